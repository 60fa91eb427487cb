// SPDX-License-Identifier: GPL-2.0-only
/*
 * Self-test of KVM_TIERVISOR_ACCESS_LOG (kvm_access_log.h).
 *
 * A VM with two memslots: slot 0, 2 MiB at GPA 0 (anonymous, no THP), and
 * slot 1, 2 MiB at GPA 2 MiB (anonymous, THP when the host has one). One
 * vCPU in real mode runs a hand-assembled loop (page 1) over a table
 * (page 2) of {segment, op} entries: op 0 reads and op 1 writes the byte
 * at segment:0x10, op 2 reads fs:0x10, where FS's hidden base is slot 1;
 * then it halts. Each check harvests and compares the bitmap with the
 * pages the table touched (plus the code and table pages).
 *
 * Prints one line per check ("ok ..." or "FAIL ...") and a summary line;
 * exits 1 if any check failed, 2 if the test could not run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <linux/kvm_access_log.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096UL
#define SLOT_SIZE (2UL << 20)
#define SLOT_PAGES (SLOT_SIZE / PAGE)
#define HUGE_GFN SLOT_PAGES /* slot 1's first page */
#define CODE_GFN 1
#define TABLE_GFN 2
#define WORDS(n) (((n) + 63) / 64)
#define MAX_LIST 16
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define END { ~0U, READ }

enum op { READ = 0, WRITE = 1, HUGE_READ = 2 };

struct touch {
	unsigned int gfn;
	enum op op;
};

/* The guest: see the file comment. 16-bit code, loaded at CODE_GFN. */
static const uint8_t guest_code[] = {
	0xbe, 0x00, 0x20,		/*  0: mov si, 0x2000 */
	0x8b, 0x04,			/*  3: loop: mov ax, [si] */
	0x3d, 0xff, 0xff,		/*  5: cmp ax, 0xffff */
	0x74, 0x24,			/*  8: je done */
	0x8e, 0xc0,			/* 10: mov es, ax */
	0x8a, 0x44, 0x02,		/* 12: mov al, [si + 2] */
	0x3c, 0x01,			/* 15: cmp al, 1 */
	0x74, 0x09,			/* 17: je write */
	0x72, 0x0f,			/* 19: jb read */
	0x64, 0x8a, 0x1e, 0x10, 0x00,	/* 21: mov bl, [fs:0x10] */
	0xeb, 0x0d,			/* 26: jmp next */
	0x26, 0xc6, 0x06, 0x10, 0x00, 0x5a, /* 28: write: mov byte [es:0x10], 0x5a */
	0xeb, 0x05,			/* 34: jmp next */
	0x26, 0x8a, 0x1e, 0x10, 0x00,	/* 36: read: mov bl, [es:0x10] */
	0x83, 0xc6, 0x04,		/* 41: next: add si, 4 */
	0xeb, 0xd5,			/* 44: jmp loop */
	0xf4,				/* 46: done: hlt */
};

static int kvm_fd, vm_fd, vcpu_fd;
static struct kvm_run *run;
static uint8_t *mem, *huge_mem;
static int checks, failures;

static void fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("FATAL ");
	vprintf(fmt, ap);
	printf(" (%s)\n", strerror(errno));
	va_end(ap);
	exit(2);
}

static void check(int ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	checks++;
	failures += !ok;
	va_start(ap, fmt);
	printf("%s %s: ", ok ? "ok  " : "FAIL", name);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
}

/* KVM_TIERVISOR_ACCESS_LOG; 0 or -errno. */
static int harvest_raw(struct kvm_access_log *log)
{
	return ioctl(vm_fd, KVM_TIERVISOR_ACCESS_LOG, log) ? -errno : 0;
}

static int harvest(uint64_t first, uint64_t npages, uint32_t flags,
		   uint64_t *bitmap, uint64_t *accessed)
{
	struct kvm_access_log log = {
		.flags = flags,
		.size = sizeof(log),
		.first_gfn = first,
		.npages = npages,
		.bitmap = (uintptr_t)bitmap,
		.accessed = ~0ULL,
	};
	int r = harvest_raw(&log);

	*accessed = log.accessed;
	return r;
}

static int test_bit(const uint64_t *bitmap, uint64_t i)
{
	return (bitmap[i / 64] >> (i % 64)) & 1;
}

/* Appends " N" for each set bit (first + i) to buf, at most MAX_LIST. */
static void list_bits(char *buf, size_t len, const uint64_t *bitmap,
		      uint64_t first, uint64_t npages)
{
	uint64_t i;
	size_t at = strlen(buf);
	int n = 0;

	for (i = 0; i < npages && at < len; i++) {
		if (!test_bit(bitmap, i))
			continue;
		if (n++ == MAX_LIST) {
			snprintf(buf + at, len - at, " ...");
			return;
		}
		at += snprintf(buf + at, len - at, " %llu",
			       (unsigned long long)(first + i));
	}
}

/*
 * Flags every expect() adds: the exact checks flush the TLBs after each
 * clear, so that the next run re-walks its pages on any hardware (a TLB
 * that kept a translation would hide the access); the default, without
 * the flush, is checked on its own.
 */
static uint32_t expect_flags = KVM_ACCESS_LOG_FLUSH_TLB;

/*
 * Harvests [first, first + npages) with flags (and expect_flags) and
 * checks that exactly the gfns in want[] (terminated by ~0U) are set and
 * that the count matches.
 */
static void expect(const char *name, uint64_t first, uint64_t npages,
		   uint32_t flags, const unsigned int *want)
{
	uint64_t *got = calloc(WORDS(npages), 8);
	uint64_t *exp = calloc(WORDS(npages), 8);
	uint64_t accessed, n = 0;
	char gots[512] = "", wants[512] = "";
	int r, same;

	if (!got || !exp)
		fatal("calloc");
	for (; *want != ~0U; want++) {
		if (*want >= first && *want - first < npages) {
			exp[(*want - first) / 64] |= 1ULL << ((*want - first) % 64);
			n++;
		}
	}
	flags |= expect_flags;
	r = harvest(first, npages, flags, got, &accessed);
	same = !memcmp(got, exp, WORDS(npages) * 8);
	list_bits(gots, sizeof(gots), got, first, npages);
	list_bits(wants, sizeof(wants), exp, first, npages);
	check(!r && same && accessed == n, name,
	      "gfns %llu..%llu%s: rc %d, accessed %llu, set {%s }, want {%s }",
	      (unsigned long long)first,
	      (unsigned long long)(first + npages - 1),
	      flags & KVM_ACCESS_LOG_NO_CLEAR ? " (NO_CLEAR)" : "", r,
	      (unsigned long long)accessed, gots, wants);
	free(got);
	free(exp);
}

/* Writes the table, points the vCPU at the code and runs it to its HLT. */
static void run_guest(const char *name, const struct touch *t)
{
	uint8_t *table = mem + TABLE_GFN * PAGE;
	struct kvm_regs regs = { .rip = CODE_GFN * PAGE, .rflags = 2 };
	struct kvm_sregs sregs;
	int i;

	for (i = 0; t[i].gfn != ~0U; i++) {
		uint16_t seg = t[i].op == HUGE_READ ? 0 : t[i].gfn << 8;

		memcpy(table + 4 * i, &seg, 2);
		table[4 * i + 2] = t[i].op;
		table[4 * i + 3] = 0;
	}
	memset(table + 4 * i, 0xff, 2);

	if (ioctl(vcpu_fd, KVM_GET_SREGS, &sregs))
		fatal("KVM_GET_SREGS");
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	sregs.ds.base = 0;
	sregs.ds.selector = 0;
	sregs.es.base = 0;
	sregs.es.selector = 0;
	sregs.fs = sregs.ds;
	sregs.fs.base = HUGE_GFN * PAGE;
	if (ioctl(vcpu_fd, KVM_SET_SREGS, &sregs))
		fatal("KVM_SET_SREGS");
	if (ioctl(vcpu_fd, KVM_SET_REGS, &regs))
		fatal("KVM_SET_REGS");
	if (ioctl(vcpu_fd, KVM_RUN, 0))
		fatal("KVM_RUN (%s)", name);
	if (run->exit_reason != KVM_EXIT_HLT) {
		ioctl(vcpu_fd, KVM_GET_REGS, &regs);
		errno = 0;
		fatal("guest (%s) exited with reason %u at rip %#llx, not HLT",
		      name, run->exit_reason, (unsigned long long)regs.rip);
	}
}

/* The refusals: each bad argument is -EINVAL or -EFAULT. */
static void refusals(void)
{
	static uint64_t bitmap[WORDS(KVM_ACCESS_LOG_MAX_PAGES)];
	struct {
		const char *name;
		struct kvm_access_log log;
		int want;
	} cases[] = {
		{ "unknown flag", { .flags = 1U << 2 }, -EINVAL },
		{ "unknown high flag", { .flags = 1U << 31 }, -EINVAL },
		{ "size too small", { .size = sizeof(struct kvm_access_log) - 8 }, -EINVAL },
		{ "size too large", { .size = sizeof(struct kvm_access_log) + 8 }, -EINVAL },
		{ "size zero", { .size = 0 }, -EINVAL },
		{ "npages 0", { .npages = 0 }, -EINVAL },
		{ "npages MAX+1", { .npages = KVM_ACCESS_LOG_MAX_PAGES + 1ULL }, -EINVAL },
		{ "npages 2^32+1", { .npages = (1ULL << 32) + 1 }, -EINVAL },
		{ "first_gfn + npages overflows",
		  { .first_gfn = ~0ULL - 5, .npages = 10 }, -EINVAL },
		{ "NULL bitmap", { .bitmap = 0 }, -EFAULT },
		{ "bitmap at address 8", { .bitmap = 8 }, -EFAULT },
		{ "kernel-address bitmap", { .bitmap = 0xffffffff81000000ULL }, -EFAULT },
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		struct kvm_access_log log = cases[i].log;
		int r;

		/* The fields a case does not name are valid. */
		if (!log.size && strncmp(cases[i].name, "size", 4))
			log.size = sizeof(log);
		if (!log.npages && strcmp(cases[i].name, "npages 0"))
			log.npages = SLOT_PAGES;
		if (!log.bitmap && !strstr(cases[i].name, "bitmap"))
			log.bitmap = (uintptr_t)bitmap;
		r = harvest_raw(&log);
		check(r == cases[i].want, "refuse", "%s: rc %d (%s), want %d (%s)",
		      cases[i].name, r, strerror(-r), cases[i].want,
		      strerror(-cases[i].want));
	}
}

/* A bitmap that ends in a read-only page or a hole: -EFAULT. */
static void bad_bitmaps(void)
{
	uint8_t *area = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct kvm_access_log log = {
		.size = sizeof(log),
		.npages = SLOT_PAGES,
	};
	int r;

	if (area == MAP_FAILED)
		fatal("mmap");
	mprotect(area + PAGE, PAGE, PROT_READ);
	munmap(area + 2 * PAGE, PAGE);
	/* 512 pages need 64 bytes: 8 in the writable page, 56 beyond. */
	log.bitmap = (uintptr_t)(area + PAGE - 8);
	r = harvest_raw(&log);
	check(r == -EFAULT, "refuse", "bitmap running into a read-only page: rc %d, want %d",
	      r, -EFAULT);
	log.bitmap = (uintptr_t)(area + 2 * PAGE - 8);
	r = harvest_raw(&log);
	check(r == -EFAULT, "refuse", "bitmap running into a hole: rc %d, want %d",
	      r, -EFAULT);
	munmap(area, 2 * PAGE);
}

/* AnonHugePages of the mapping at addr in /proc/self/smaps, in KiB. */
static long anon_huge_kib(void *addr)
{
	char line[256], want[32];
	long kib = -1;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return -1;
	snprintf(want, sizeof(want), "%lx-", (unsigned long)addr);
	while (fgets(line, sizeof(line), f)) {
		if (strchr(line, '-') && strchr(line, ' ') &&
		    strchr(line, '-') < strchr(line, ' ')) {
			if (in)
				break;
			in = !strncmp(line, want, strlen(want));
		} else if (in && sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) {
			break;
		}
	}
	fclose(f);
	return kib;
}

static void add_slot(int slot, uint64_t gpa, void *hva)
{
	struct kvm_userspace_memory_region region = {
		.slot = slot,
		.guest_phys_addr = gpa,
		.memory_size = SLOT_SIZE,
		.userspace_addr = (uintptr_t)hva,
	};

	if (ioctl(vm_fd, KVM_SET_USER_MEMORY_REGION, &region))
		fatal("KVM_SET_USER_MEMORY_REGION %d", slot);
}

int main(void)
{
	static uint64_t big[WORDS(KVM_ACCESS_LOG_MAX_PAGES)];
	const unsigned int none[] = { ~0U };
	const struct touch a[] = {
		{ 16, WRITE }, { 17, READ }, { 100, WRITE }, { 255, READ }, END
	};
	const unsigned int want_a[] = { CODE_GFN, TABLE_GFN, 16, 17, 100, 255, ~0U };
	const struct touch b[] = { { 20, READ }, { 21, WRITE }, { 200, READ }, END };
	const unsigned int want_b[] = { CODE_GFN, TABLE_GFN, 20, 21, 200, ~0U };
	const struct touch reads[] = { { 40, READ }, { 41, READ }, { 42, READ }, END };
	const unsigned int want_reads[] = { CODE_GFN, TABLE_GFN, 40, 41, 42, ~0U };
	const struct touch writes[] = { { 40, WRITE }, { 41, WRITE }, { 42, WRITE }, END };
	const struct touch c[] = { { 50, WRITE }, { 51, READ }, END };
	const unsigned int want_c[] = { CODE_GFN, TABLE_GFN, 50, 51, ~0U };
	const unsigned int want_a_from_16[] = { 16, 17, 100, 255, ~0U };
	const unsigned int want_code[] = { CODE_GFN, TABLE_GFN, ~0U };
	const struct touch huge[] = { { HUGE_GFN, HUGE_READ }, END };
	unsigned int want_huge[SLOT_PAGES + 1];
	char mode[16] = "?";
	uint64_t accessed;
	long huge_kib;
	uint8_t *area;
	size_t run_size;
	unsigned int i;
	FILE *f;
	int r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	f = fopen("/sys/module/kvm/parameters/tdp_mmu", "r");
	if (f) {
		if (fscanf(f, "%15s", mode) != 1)
			snprintf(mode, sizeof(mode), "?");
		fclose(f);
	}
	printf("access-log self-test: tdp_mmu=%s\n", mode);

	kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm_fd < 0)
		fatal("open /dev/kvm");
	r = ioctl(kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_TIERVISOR_ACCESS_LOG);
	check(r == 1, "capability", "KVM_CHECK_EXTENSION on /dev/kvm: %d, want 1", r);
	vm_fd = ioctl(kvm_fd, KVM_CREATE_VM, 0);
	if (vm_fd < 0)
		fatal("KVM_CREATE_VM");
	/* Real mode on VMX without unrestricted guests needs it; SVM ignores it. */
	ioctl(vm_fd, KVM_SET_TSS_ADDR, 0xfffbd000UL);
	r = ioctl(vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_TIERVISOR_ACCESS_LOG);
	check(r == 1, "capability", "KVM_CHECK_EXTENSION on the VM: %d, want 1", r);
	if (failures)
		return 1;

	/* Slot 0: no THP, so that every page has its own SPTE. */
	mem = mmap(NULL, SLOT_SIZE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED)
		fatal("mmap");
	madvise(mem, SLOT_SIZE, MADV_NOHUGEPAGE);
	memcpy(mem + CODE_GFN * PAGE, guest_code, sizeof(guest_code));
	add_slot(0, 0, mem);
	/* Slot 1: 2 MiB-aligned with THP, for a huge SPTE. */
	area = mmap(NULL, 2 * SLOT_SIZE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (area == MAP_FAILED)
		fatal("mmap");
	huge_mem = (uint8_t *)(((uintptr_t)area + SLOT_SIZE - 1) & ~(SLOT_SIZE - 1));
	madvise(huge_mem, SLOT_SIZE, MADV_HUGEPAGE);
	memset(huge_mem, 1, SLOT_SIZE);
	add_slot(1, HUGE_GFN * PAGE, huge_mem);

	vcpu_fd = ioctl(vm_fd, KVM_CREATE_VCPU, 0);
	if (vcpu_fd < 0)
		fatal("KVM_CREATE_VCPU");
	run_size = ioctl(kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	run = mmap(NULL, run_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu_fd, 0);
	if (run == MAP_FAILED)
		fatal("mmap kvm_run");

	expect("before any run", 0, 2 * SLOT_PAGES, 0, none);

	run_guest("table a", a);
	expect_flags = 0;
	expect("touched pages, no TLB flush (the default)", 0, SLOT_PAGES, 0,
	       want_a);
	expect_flags = KVM_ACCESS_LOG_FLUSH_TLB;
	expect("second harvest, no run", 0, SLOT_PAGES, 0, none);
	run_guest("table a", a);
	expect("touched pages", 0, SLOT_PAGES, 0, want_a);

	run_guest("table b", b);
	expect("new table", 0, SLOT_PAGES, 0, want_b);

	run_guest("reads", reads);
	expect("reads count", 0, SLOT_PAGES, 0, want_reads);
	run_guest("writes", writes);
	expect("writes count", 0, SLOT_PAGES, 0, want_reads);

	run_guest("table c", c);
	expect("NO_CLEAR", 0, SLOT_PAGES, KVM_ACCESS_LOG_NO_CLEAR, want_c);
	expect("NO_CLEAR kept the bits", 0, SLOT_PAGES, KVM_ACCESS_LOG_NO_CLEAR, want_c);
	expect("clear after NO_CLEAR", 0, SLOT_PAGES, 0, want_c);
	expect("cleared", 0, SLOT_PAGES, 0, none);

	/* A range from gfn 16 running past slot 0 into slot 1 and beyond. */
	run_guest("table a", a);
	expect("range from gfn 16 past the slots", 16, 2 * SLOT_PAGES + 88, 0,
	       want_a_from_16);
	expect("pages before the range kept", 0, SLOT_PAGES, 0, want_code);
	expect("range outside every memslot", 1ULL << 30, 4096, 0, none);
	expect("range at the top of the gfn space", ~0ULL - 64, 64, 0, none);

	/* The largest range, and a refused call clears nothing. */
	run_guest("table a", a);
	refusals();
	bad_bitmaps();
	r = harvest(0, KVM_ACCESS_LOG_MAX_PAGES, 0, big, &accessed);
	for (i = 0; want_a[i] != ~0U && test_bit(big, want_a[i]); i++)
		;
	check(!r && accessed == 6 && want_a[i] == ~0U, "largest range",
	      "gfns 0..%u after refused calls: rc %d, accessed %llu, want the 6 of table a",
	      KVM_ACCESS_LOG_MAX_PAGES - 1, r, (unsigned long long)accessed);

	/* A huge SPTE counts for each of its 4 KiB pages. */
	huge_kib = anon_huge_kib(huge_mem);
	run_guest("huge", huge);
	for (i = 0; i < SLOT_PAGES; i++)
		want_huge[i] = HUGE_GFN + i;
	want_huge[SLOT_PAGES] = ~0U;
	if (huge_kib >= 2048) {
		expect("huge SPTE counts for all its pages", HUGE_GFN, SLOT_PAGES, 0,
		       want_huge);
	} else {
		printf("note: slot 1 has no THP (AnonHugePages %ld kB): 4 KiB SPTEs\n",
		       huge_kib);
		want_huge[1] = ~0U;
		expect("4 KiB SPTE in slot 1", HUGE_GFN, SLOT_PAGES, 0, want_huge);
	}
	expect("slot 0 after the huge run", 0, SLOT_PAGES, 0, want_code);
	expect("huge cleared", HUGE_GFN, SLOT_PAGES, 0, none);

	printf("access-log self-test: tdp_mmu=%s: %d checks, %d failed\n", mode,
	       checks, failures);
	return failures ? 1 : 0;
}
