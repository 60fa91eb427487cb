/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * tiercopy: copy a batch of ranges between user addresses of the calling
 * process, with kernel threads or dmaengine memcpy channels
 * (host-kernel/tiercopy in tiervisor).
 */
#ifndef _UAPI_LINUX_TIERCOPY_H
#define _UAPI_LINUX_TIERCOPY_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define TIERCOPY_ABI_VERSION 1
#define TIERCOPY_MAX_RANGES 512          /* per batch; more: -E2BIG */
#define TIERCOPY_MAX_BATCH_BYTES (1ULL << 30) /* sum of lengths; more: -E2BIG */
#define TIERCOPY_MODE_AUTO 0      /* DMA where it wins (thresholds below), else threads */
#define TIERCOPY_MODE_THREADS 1   /* kernel threads only */
#define TIERCOPY_MODE_DMA 2       /* DMA for every range (CPU fallback per range on DMA error/timeout or no channel) */
#define TIERCOPY_MODE_MASK 0x3    /* flags bits other than the mode: -EINVAL; mode 3: -EINVAL */
#define TIERCOPY_BACKEND_NONE 0
#define TIERCOPY_BACKEND_THREADS 1
#define TIERCOPY_BACKEND_DMA 2

struct tiercopy_range {
	__u64 src;      /* in: user address, readable */
	__u64 dst;      /* in: user address, writable */
	__u64 len;      /* in: bytes, 1..TIERCOPY_MAX_BATCH_BYTES; 0 = skipped (status 0, backend NONE) */
	__s32 status;   /* out: 0, or -errno for this range (-EFAULT bad address, -EINTR not done because of a signal, -EIO DMA and CPU both failed) */
	__u32 backend;  /* out: TIERCOPY_BACKEND_* that completed it */
};

struct tiercopy_batch {
	__u32 size;       /* in: sizeof(struct tiercopy_batch) (32); else -EINVAL */
	__u32 version;    /* in: TIERCOPY_ABI_VERSION; else -EINVAL */
	__u32 flags;      /* in: mode (TIERCOPY_MODE_*) */
	__u32 nr_ranges;  /* in: 1..TIERCOPY_MAX_RANGES */
	__u64 ranges;     /* in: user address of nr_ranges struct tiercopy_range (read, status/backend written back) */
	__u64 copied;     /* out: bytes copied, all ranges */
};

#define TIERCOPY_IOC_COPY _IOWR(0xB7, 0x01, struct tiercopy_batch)

#endif /* _UAPI_LINUX_TIERCOPY_H */
