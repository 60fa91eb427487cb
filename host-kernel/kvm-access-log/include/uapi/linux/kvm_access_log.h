/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * KVM_TIERVISOR_ACCESS_LOG: test and clear the accessed bits of KVM's
 * secondary MMU (TDP MMU and shadow MMU rmaps) over a guest-physical
 * range, and return one bit per 4 KiB guest page.
 *
 * This is an out-of-tree extension (tiervisor); its capability and ioctl
 * numbers are chosen far outside upstream's numbering.
 */
#ifndef _UAPI_LINUX_KVM_ACCESS_LOG_H
#define _UAPI_LINUX_KVM_ACCESS_LOG_H

#include <linux/ioctl.h>
#include <linux/types.h>

#ifndef KVMIO
#define KVMIO 0xAE
#endif

/* 'T' 'V' 1: far outside upstream's capability numbering */
#define KVM_CAP_TIERVISOR_ACCESS_LOG 0x54560001

/* Test only; leave the accessed bits set. */
#define KVM_ACCESS_LOG_NO_CLEAR (1U << 0)
/*
 * Flush the VM's TLBs after clearing, so that the next access re-walks and
 * sets the bit again even through a cached translation; costs every vCPU
 * an exit.  Without it (the default) nothing exits, as with the MMU
 * notifier's clear_young().
 */
#define KVM_ACCESS_LOG_FLUSH_TLB (1U << 1)
/* Every known flag; others are refused with -EINVAL. */
#define KVM_ACCESS_LOG_FLAGS (KVM_ACCESS_LOG_NO_CLEAR | KVM_ACCESS_LOG_FLUSH_TLB)
/* 1 GiB of 4 KiB pages per call. */
#define KVM_ACCESS_LOG_MAX_PAGES (1U << 18)

struct kvm_access_log {
	/* in: KVM_ACCESS_LOG_* */
	__u32 flags;
	/* in: sizeof(struct kvm_access_log); other values -EINVAL */
	__u32 size;
	/* in: first guest frame (4 KiB) of the range, address space 0 */
	__u64 first_gfn;
	/*
	 * in: 1..KVM_ACCESS_LOG_MAX_PAGES, else -EINVAL; first_gfn + npages
	 * must not overflow
	 */
	__u64 npages;
	/*
	 * in: user address of DIV_ROUND_UP(npages, 64) __u64 words; bit i
	 * (word i / 64, bit i % 64) = gfn first_gfn + i was accessed
	 */
	__u64 bitmap;
	/* out: number of bits set */
	__u64 accessed;
};

#define KVM_TIERVISOR_ACCESS_LOG _IOWR(KVMIO, 0xf0, struct kvm_access_log)

#endif /* _UAPI_LINUX_KVM_ACCESS_LOG_H */
