// SPDX-License-Identifier: GPL-2.0
/*
 * Self-test of /dev/tiercopy (host-kernel/tiercopy), run as root with
 * tiercopy.ko loaded (and tiercopy-testdma.ko before it for the DMA
 * checks, which are skipped, one line each, when tiercopy has no DMA
 * channel). One line per check; exit 1 if any failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <linux/tiercopy.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MIB (1UL << 20)
#define STATS "/sys/kernel/debug/tiercopy/stats"
#define TESTDMA "/sys/kernel/debug/tiercopy-testdma/"
#define PARAMS "/sys/module/tiercopy/parameters/"

static int fd;
static int passed, failed, skipped;
static int have_dma;

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf(ok ? "ok   " : "FAIL ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (ok)
		passed++;
	else
		failed++;
}

static void skip_check(const char *what)
{
	printf("skip %s (no DMA channel: tiercopy-testdma not loaded)\n", what);
	skipped++;
}

static long long stat_of(const char *name)
{
	char line[128];
	long long v = -1;
	size_t n = strlen(name);
	FILE *f = fopen(STATS, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, n) && line[n] == ' ')
			v = atoll(line + n + 1);
	fclose(f);
	return v;
}

static int write_file(const char *path, const char *val)
{
	int f = open(path, O_WRONLY);
	int ok;

	if (f < 0)
		return -1;
	ok = write(f, val, strlen(val)) == (ssize_t)strlen(val);
	close(f);
	return ok ? 0 : -1;
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static void fill(void *p, size_t len)
{
	uint8_t *b = p;
	size_t i;

	for (i = 0; i < len; i += 8) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		memcpy(b + i, &rng, len - i < 8 ? len - i : 8);
	}
}

/* The ioctl on ranges r[0..n); returns 0 or -errno. */
static int copy(struct tiercopy_range *r, unsigned int n, unsigned int mode,
		uint64_t *copied)
{
	struct tiercopy_batch b = {
		.size = sizeof(b),
		.version = TIERCOPY_ABI_VERSION,
		.flags = mode,
		.nr_ranges = n,
		.ranges = (uintptr_t)r,
	};

	if (ioctl(fd, TIERCOPY_IOC_COPY, &b))
		return -errno;
	if (copied)
		*copied = b.copied;
	return 0;
}

static int batch_errno(uint32_t size, uint32_t version, uint32_t flags,
		       uint32_t nr, uint64_t ranges)
{
	struct tiercopy_batch b = {
		.size = size, .version = version, .flags = flags,
		.nr_ranges = nr, .ranges = ranges,
	};

	return ioctl(fd, TIERCOPY_IOC_COPY, &b) ? errno : 0;
}

/* One range of len bytes at odd offsets in mode; checks data and backend. */
static void one_range(const char *what, size_t len, unsigned int mode,
		      unsigned int backend)
{
	uint8_t *src = map(len + 8192), *dst = map(len + 8192);
	struct tiercopy_range r = {
		.src = (uintptr_t)src + 123, .dst = (uintptr_t)dst + 4001,
		.len = len,
	};
	uint64_t copied = 0;
	int ret;

	fill(src + 123, len);
	ret = copy(&r, 1, mode, &copied);
	check(!ret && !r.status && r.backend == backend && copied == len &&
	      !memcmp(src + 123, dst + 4001, len) && !dst[4000] &&
	      !dst[4001 + len],
	      "%s: %zu bytes, ret %d status %d backend %u (want %u)",
	      what, len, ret, r.status, r.backend, backend);
	munmap(src, len + 8192);
	munmap(dst, len + 8192);
}

static void threads_sizes(void)
{
	static const size_t sizes[] = { 4096, 65536, 256 * 1024 + 123, MIB,
					4 * MIB + 7, 8 * MIB };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(sizes); i++)
		one_range("threads", sizes[i], TIERCOPY_MODE_THREADS,
			  TIERCOPY_BACKEND_THREADS);
}

static void many_ranges(void)
{
	size_t area = 8 * MIB;
	uint8_t *src = map(area), *dst = map(area);
	struct tiercopy_range r[TIERCOPY_MAX_RANGES];
	size_t off = 0, total = 0;
	uint64_t copied = 0;
	int i, ret, bad = 0;

	fill(src, area);
	for (i = 0; i < TIERCOPY_MAX_RANGES; i++) {
		size_t len = i % 7 == 3 ? 0 : 1 + (i * 2654435761u) % 12000;

		r[i] = (struct tiercopy_range){ .src = (uintptr_t)src + off,
			.dst = (uintptr_t)dst + off, .len = len,
			.status = 77, .backend = 77 };
		off += len + 17;
		total += len;
	}
	ret = copy(r, TIERCOPY_MAX_RANGES, TIERCOPY_MODE_THREADS, &copied);
	for (i = 0; i < TIERCOPY_MAX_RANGES; i++) {
		uint8_t *s = (uint8_t *)(uintptr_t)r[i].src;
		uint8_t *d = (uint8_t *)(uintptr_t)r[i].dst;

		if (r[i].status || r[i].backend != (r[i].len ?
		    TIERCOPY_BACKEND_THREADS : TIERCOPY_BACKEND_NONE) ||
		    memcmp(s, d, r[i].len) || d[r[i].len] != 0)
			bad++;
	}
	check(!ret && !bad && copied == total,
	      "threads: %d ranges (some empty), %zu bytes, ret %d, %d wrong",
	      TIERCOPY_MAX_RANGES, total, ret, bad);
	munmap(src, area);
	munmap(dst, area);
}

static void in_pieces(void)
{
	if (write_file(PARAMS "pin_mib", "1")) {
		check(0, "cannot set pin_mib");
		return;
	}
	one_range("threads in 1 MiB pieces (pin_mib=1)", 8 * MIB + 5,
		  TIERCOPY_MODE_THREADS, TIERCOPY_BACKEND_THREADS);
	if (have_dma)
		one_range("dma in 1 MiB pieces (pin_mib=1)", 8 * MIB + 5,
			  TIERCOPY_MODE_DMA, TIERCOPY_BACKEND_DMA);
	write_file(PARAMS "pin_mib", "64");
}

static void dma_modes(void)
{
	long long dma0 = stat_of("bytes_dma"), nochan0 = stat_of("dma_no_channel");

	if (!have_dma) {
		one_range("dma mode without a channel falls back", 2 * MIB,
			  TIERCOPY_MODE_DMA, TIERCOPY_BACKEND_THREADS);
		check(stat_of("dma_no_channel") == nochan0 + 1,
		      "dma mode without a channel is counted (dma_no_channel %lld -> %lld)",
		      nochan0, stat_of("dma_no_channel"));
		one_range("auto without a channel: 8 MiB by threads", 8 * MIB,
			  TIERCOPY_MODE_AUTO, TIERCOPY_BACKEND_THREADS);
		skip_check("dma: copies through the test provider");
		skip_check("auto: DMA for big ranges only");
		return;
	}
	one_range("dma", 4096, TIERCOPY_MODE_DMA, TIERCOPY_BACKEND_DMA);
	one_range("dma", 8 * MIB + 3, TIERCOPY_MODE_DMA, TIERCOPY_BACKEND_DMA);
	check(stat_of("bytes_dma") == dma0 + 4096 + 8 * (long long)MIB + 3,
	      "dma bytes counted (%lld -> %lld)", dma0, stat_of("bytes_dma"));
	one_range("auto: 256 KiB by threads", 256 * 1024, TIERCOPY_MODE_AUTO,
		  TIERCOPY_BACKEND_THREADS);
	one_range("auto: 4 MiB by DMA", 4 * MIB, TIERCOPY_MODE_AUTO,
		  TIERCOPY_BACKEND_DMA);
}

static void dma_faults(void)
{
	long long fb, to;

	if (!have_dma) {
		skip_check("dma: injected failure falls back to the CPU");
		skip_check("dma: out-of-order completion");
		skip_check("dma: stalled descriptor times out, CPU fallback");
		return;
	}
	fb = stat_of("dma_fallbacks");
	write_file(TESTDMA "fail_next", "1");
	one_range("dma: injected failure copied by the CPU", MIB,
		  TIERCOPY_MODE_DMA, TIERCOPY_BACKEND_THREADS);
	check(stat_of("dma_fallbacks") == fb + 1, "dma fallback counted (%lld -> %lld)",
	      fb, stat_of("dma_fallbacks"));

	write_file(TESTDMA "reverse", "1");
	one_range("dma: completed in reverse order", 8 * MIB + 1,
		  TIERCOPY_MODE_DMA, TIERCOPY_BACKEND_DMA);
	write_file(TESTDMA "reverse", "0");

	fb = stat_of("dma_fallbacks");
	to = stat_of("dma_timeouts");
	write_file(PARAMS "dma_timeout_ms", "200");
	write_file(TESTDMA "stall_next", "1");
	one_range("dma: stalled descriptor copied by the CPU", MIB,
		  TIERCOPY_MODE_DMA, TIERCOPY_BACKEND_THREADS);
	write_file(PARAMS "dma_timeout_ms", "1000");
	check(stat_of("dma_timeouts") == to + 1 && stat_of("dma_fallbacks") == fb + 1,
	      "dma timeout and fallback counted (timeouts %lld -> %lld)",
	      to, stat_of("dma_timeouts"));
}

static void bad_addresses(void)
{
	size_t len = 3 * 65536;
	uint8_t *src = map(len), *dst = map(len);
	uint8_t *ro = mmap(NULL, 65536, PROT_READ,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct tiercopy_range r[4] = {
		{ .src = (uintptr_t)src, .dst = (uintptr_t)dst, .len = 65536 },
		{ .src = 0x10000, .dst = (uintptr_t)dst + 65536, .len = 65536 },
		{ .src = (uintptr_t)src + 131072, .dst = (uintptr_t)dst + 131072,
		  .len = 65536 },
		{ .src = (uintptr_t)src + 65536, .dst = (uintptr_t)ro, .len = 4096 },
	};
	long long errs = stat_of("range_errors");
	uint64_t copied = 0;
	int ret;

	fill(src, len);
	ret = copy(r, 4, TIERCOPY_MODE_THREADS, &copied);
	check(!ret && r[1].status == -EFAULT && r[3].status == -EFAULT &&
	      !r[0].status && !r[2].status && copied == 131072 &&
	      !memcmp(src, dst, 65536) &&
	      !memcmp(src + 131072, dst + 131072, 65536) && !ro[0],
	      "bad src and read-only dst fail their ranges with EFAULT (%d, %d), the others are copied (%d, %d)",
	      r[1].status, r[3].status, r[0].status, r[2].status);
	check(stat_of("range_errors") == errs + 2, "range errors counted (%lld -> %lld)",
	      errs, stat_of("range_errors"));
	munmap(src, len);
	munmap(dst, len);
	munmap(ro, 65536);
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void signals(void)
{
	const unsigned int n = 128;
	const size_t len = MIB;
	uint8_t *src = map(n * len), *dst = map(n * len);
	struct tiercopy_range r[256];
	struct sigaction sa = { .sa_handler = on_alarm };	/* no SA_RESTART */
	int tries, whole = 0, late = 0, wrong = 0, bad_ret = 0;
	unsigned int i;

	sigaction(SIGALRM, &sa, NULL);
	fill(src, n * len);
	for (tries = 0; tries < 20 && !(late && whole); tries++) {
		struct itimerval it = { .it_value = { .tv_usec = tries < 10 ? 3000 : 1 } };
		int ret, eintr = 0;

		memset(dst, 0, n * len);
		for (i = 0; i < n; i++)
			r[i] = (struct tiercopy_range){
				.src = (uintptr_t)src + i * len,
				.dst = (uintptr_t)dst + i * len, .len = len,
				.status = 77 };
		setitimer(ITIMER_REAL, &it, NULL);
		ret = copy(r, n, TIERCOPY_MODE_THREADS, NULL);
		memset(&it, 0, sizeof(it));
		setitimer(ITIMER_REAL, &it, NULL);
		if (ret == -EINTR) {
			whole++;
			for (i = 0; i < n; i++)
				if (dst[i * len] || dst[i * len + len - 1])
					wrong++;
			continue;
		}
		if (ret) {
			bad_ret++;
			continue;
		}
		for (i = 0; i < n; i++) {
			if (r[i].status == -EINTR) {
				eintr++;
				continue;
			}
			if (r[i].status || memcmp(dst + i * len, src + i * len, len))
				wrong++;
		}
		if (eintr) {
			late++;
			for (i = 0; i < n && !r[i].status; i++)
				;
			for (; i < n; i++)
				if (r[i].status != -EINTR)
					wrong++;
		}
	}
	sa.sa_handler = SIG_DFL;
	sigaction(SIGALRM, &sa, NULL);
	check(late > 0 && !wrong && !bad_ret,
	      "signal mid-batch: %d of %d batches stopped late (done ranges copied, the rest EINTR), %d before the start (EINTR), %d wrong",
	      late, tries, whole, wrong + bad_ret);
	munmap(src, n * len);
	munmap(dst, n * len);
}

static void expect(int e, int want, const char *what)
{
	check(e == want, "%s: %s (want %s)", what, strerror(e), strerror(want));
}

static void refusals(void)
{
	uint8_t *buf = map(4 * 65536);
	struct tiercopy_range r[2] = {
		{ .src = (uintptr_t)buf, .dst = (uintptr_t)buf + 65536, .len = 65536 },
		{ .src = (uintptr_t)buf + 131072, .dst = (uintptr_t)buf + 196608,
		  .len = 65536 },
	};
	uint64_t ranges = (uintptr_t)r;
	const uint32_t sz = sizeof(struct tiercopy_batch), v = TIERCOPY_ABI_VERSION;

	check(sizeof(struct tiercopy_batch) == 32 && sizeof(struct tiercopy_range) == 32,
	      "ABI sizes: batch %zu, range %zu", sizeof(struct tiercopy_batch),
	      sizeof(struct tiercopy_range));
	fill(buf, 65536);
	fill(buf + 131072, 65536);
	expect(batch_errno(sz - 1, v, 0, 2, ranges), EINVAL, "size 31");
	expect(batch_errno(sz, v + 1, 0, 2, ranges), EINVAL, "version 2");
	expect(batch_errno(sz, v, 4, 2, ranges), EINVAL, "flags 4");
	expect(batch_errno(sz, v, 3, 2, ranges), EINVAL, "mode 3");
	expect(batch_errno(sz, v, 0, 0, ranges), EINVAL, "nr_ranges 0");
	expect(batch_errno(sz, v, 0, TIERCOPY_MAX_RANGES + 1, ranges), E2BIG, "nr_ranges 513");
	expect(batch_errno(sz, v, 0, 2, 8), EFAULT, "unreadable range array");
	r[1].len = TIERCOPY_MAX_BATCH_BYTES;
	expect(batch_errno(sz, v, 0, 2, ranges), E2BIG, "2^30 + 64 KiB in all");
	r[1].len = 65536;
	r[1].dst = (uintptr_t)buf + 100;	/* over range 0's source */
	expect(batch_errno(sz, v, 0, 2, ranges), EINVAL, "a destination over another range's source");
	r[1].src = (uintptr_t)buf + 196608;
	r[1].dst = (uintptr_t)buf + 65536 + 4096;	/* over range 0's destination */
	expect(batch_errno(sz, v, 0, 2, ranges), EINVAL, "a destination over another's destination");
	r[1].src = (uintptr_t)buf + 131072;
	r[1].dst = (uintptr_t)buf + 131072 + 4096;	/* over its own source */
	expect(batch_errno(sz, v, 0, 2, ranges), EINVAL, "a destination over its own source");
	check(!buf[65536] && !memcmp(buf + 65536, buf + 65537, 65535) &&
	      !buf[196608] && !memcmp(buf + 196608, buf + 196609, 65535),
	      "a refused batch copies nothing");
	check(ioctl(fd, _IO(0xB7, 0x02)) == -1 && errno == ENOTTY, "unknown ioctl: ENOTTY");
	munmap(buf, 4 * 65536);
}

#define USERS 4
#define USER_BATCHES 16
#define USER_RANGES 4
#define USER_LEN (MIB + 3)

struct user {
	unsigned int id;
	int wrong;	/* batches that failed or copied wrong bytes */
};

/*
 * One of several users of the device at once, on its own descriptor:
 * batches in every mode (DMA ones share the channels under one mutex),
 * each checked byte for byte.
 */
static void *user_run(void *arg)
{
	static const unsigned int modes[] = { TIERCOPY_MODE_THREADS,
					      TIERCOPY_MODE_DMA,
					      TIERCOPY_MODE_AUTO };
	struct user *u = arg;
	size_t span = USER_RANGES * (USER_LEN + 4096);
	uint8_t *src = map(span), *dst = map(span);
	uint64_t x = 0x2545f4914f6cdd1dULL * (u->id + 1);
	int ufd = open("/dev/tiercopy", O_RDWR | O_CLOEXEC);
	unsigned int i, j;
	size_t k;

	if (ufd < 0) {
		u->wrong = USER_BATCHES;
		return NULL;
	}
	for (i = 0; i < USER_BATCHES; i++) {
		struct tiercopy_range r[USER_RANGES];
		struct tiercopy_batch b = {
			.size = sizeof(b),
			.version = TIERCOPY_ABI_VERSION,
			.flags = modes[(i + u->id) % ARRAY_SIZE(modes)],
			.nr_ranges = USER_RANGES,
			.ranges = (uintptr_t)r,
		};
		int bad = 0;

		for (k = 0; k + 8 <= span; k += 8) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			memcpy(src + k, &x, 8);
		}
		memset(dst, 0, span);
		for (j = 0; j < USER_RANGES; j++) {
			size_t off = j * (USER_LEN + 4096) + 17 * (j + 1);

			r[j] = (struct tiercopy_range){
				.src = (uintptr_t)src + off,
				.dst = (uintptr_t)dst + off, .len = USER_LEN,
			};
		}
		if (ioctl(ufd, TIERCOPY_IOC_COPY, &b) || b.copied !=
		    (uint64_t)USER_RANGES * USER_LEN)
			bad = 1;
		for (j = 0; j < USER_RANGES && !bad; j++) {
			size_t off = j * (USER_LEN + 4096) + 17 * (j + 1);

			bad = r[j].status ||
			      memcmp(src + off, dst + off, USER_LEN) ||
			      dst[off - 1] || dst[off + USER_LEN];
		}
		u->wrong += bad;
	}
	close(ufd);
	munmap(src, span);
	munmap(dst, span);
	return NULL;
}

static void concurrent_users(void)
{
	struct user users[USERS];
	pthread_t t[USERS];
	int wrong = 0, started = 0;
	unsigned int i;

	for (i = 0; i < USERS; i++) {
		users[i] = (struct user){ .id = i };
		if (!pthread_create(&t[i], NULL, user_run, &users[i]))
			started |= 1 << i;
	}
	for (i = 0; i < USERS; i++) {
		if (started & (1 << i))
			pthread_join(t[i], NULL);
		else
			users[i].wrong = USER_BATCHES;
		wrong += users[i].wrong;
	}
	check(!wrong, "%d concurrent users x %d batches (threads, dma, auto): %d failed or wrong",
	      USERS, USER_BATCHES, wrong);
}

static void rmmod_busy(void)
{
	struct stat st;
	int rc = system("rmmod tiercopy 2>/dev/null");

	check(rc != 0 && !stat("/sys/module/tiercopy", &st),
	      "rmmod tiercopy while /dev/tiercopy is open fails (rc %d)", rc);
	if (!have_dma) {
		skip_check("rmmod of the DMA provider while tiercopy holds its channels");
		return;
	}
	rc = system("rmmod tiercopy_testdma 2>/dev/null");
	check(rc != 0 && !stat("/sys/module/tiercopy_testdma", &st),
	      "rmmod tiercopy_testdma while tiercopy holds its channels fails (rc %d)",
	      rc);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	fd = open("/dev/tiercopy", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		printf("FAIL open /dev/tiercopy: %s\n", strerror(errno));
		return 1;
	}
	if (stat_of("dma_channels") < 0) {
		printf("FAIL no %s (debugfs mounted?)\n", STATS);
		return 1;
	}
	have_dma = stat_of("dma_channels") > 0;
	printf("tiercopy: %lld threads, %lld DMA channels\n", stat_of("threads"),
	       stat_of("dma_channels"));
	threads_sizes();
	many_ranges();
	in_pieces();
	dma_modes();
	dma_faults();
	bad_addresses();
	signals();
	refusals();
	concurrent_users();
	rmmod_busy();
	printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
	close(fd);
	return failed ? 1 : 0;
}
