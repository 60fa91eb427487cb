// SPDX-License-Identifier: GPL-2.0
/*
 * tiercopy: /dev/tiercopy copies a batch of ranges between user addresses
 * of the calling process, with a pool of kernel threads (an unbound
 * workqueue limited to "threads" workers, chunks of "chunk_kib") or with
 * dmaengine DMA_MEMCPY channels, falling back to the CPU per range.
 *
 * A range is processed in pieces of at most "pin_mib" MiB per side: pin
 * the source (read) and destination (write) pages, copy, unpin (the
 * destination's pages marked dirty). A bad address fails its range with
 * -EFAULT. A pending signal stops the batch before the next range starts;
 * a fatal one also between the pieces of a range.
 *
 * The ABI is include/uapi/linux/tiercopy.h. Counters are in
 * /sys/kernel/debug/tiercopy/stats.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/debugfs.h>
#include <linux/dma-mapping.h>
#include <linux/dmaengine.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/miscdevice.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/sched/signal.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>
#include <uapi/linux/tiercopy.h>

#define TC_MAX_CHANNELS 16
#define TC_MAX_THREADS 8

static unsigned int threads;
module_param(threads, uint, 0444);
MODULE_PARM_DESC(threads, "copy threads (0: online CPUs, at most 8)");

static unsigned int chunk_kib = 256;
module_param(chunk_kib, uint, 0644);
MODULE_PARM_DESC(chunk_kib, "KiB one thread copies at a time (default 256)");

static unsigned int pin_mib = 64;
module_param(pin_mib, uint, 0644);
MODULE_PARM_DESC(pin_mib, "MiB pinned at once on each side (default 64)");

static unsigned int dma_channels = 4;
module_param(dma_channels, uint, 0444);
MODULE_PARM_DESC(dma_channels, "DMA_MEMCPY channels requested at load (default 4, at most 16)");

static unsigned int dma_timeout_ms = 1000;
module_param(dma_timeout_ms, uint, 0644);
MODULE_PARM_DESC(dma_timeout_ms, "DMA timeout per piece before the CPU fallback (default 1000)");

static unsigned long dma_min_bytes = 2UL << 20;
module_param(dma_min_bytes, ulong, 0644);
MODULE_PARM_DESC(dma_min_bytes, "AUTO: smallest range copied by DMA (default 2 MiB)");

static unsigned long dma_min_bytes_many = 1UL << 20;
module_param(dma_min_bytes_many, ulong, 0644);
MODULE_PARM_DESC(dma_min_bytes_many,
		 "AUTO: smallest range copied by DMA with dma_many_channels (default 1 MiB)");

static unsigned int dma_many_channels = 4;
module_param(dma_many_channels, uint, 0644);
MODULE_PARM_DESC(dma_many_channels, "AUTO: channels for dma_min_bytes_many (default 4)");

static struct workqueue_struct *tc_wq;
static unsigned int tc_threads;

/* Channels, requested at load and released at unload; one DMA piece at a time. */
static struct dma_chan *tc_chans[TC_MAX_CHANNELS];
static unsigned int tc_nr_chans;
static DEFINE_MUTEX(tc_dma_lock);

static struct {
	atomic64_t batches;
	atomic64_t ranges;
	atomic64_t bytes_threads;
	atomic64_t bytes_dma;
	atomic64_t dma_fallbacks;
	atomic64_t dma_timeouts;
	atomic64_t dma_no_channel;
	atomic64_t range_errors;
	atomic64_t ranges_interrupted;
} tc_stats;

static struct dentry *tc_debugfs;

/* One piece of a range: its pinned pages and where it starts in them. */
struct tc_piece {
	struct page **src_pages;
	struct page **dst_pages;
	unsigned int src_off;
	unsigned int dst_off;
	size_t len;
};

/* Copies bytes [pos, end) of a piece with the CPU. */
static void tc_copy_span(const struct tc_piece *p, size_t pos, size_t end)
{
	while (pos < end) {
		size_t s = p->src_off + pos, d = p->dst_off + pos;
		size_t n = min3(end - pos, PAGE_SIZE - offset_in_page(s),
				PAGE_SIZE - offset_in_page(d));
		void *sv = kmap_local_page(p->src_pages[s >> PAGE_SHIFT]);
		void *dv = kmap_local_page(p->dst_pages[d >> PAGE_SHIFT]);

		memcpy(dv + offset_in_page(d), sv + offset_in_page(s), n);
		kunmap_local(dv);
		kunmap_local(sv);
		pos += n;
	}
}

struct tc_wait {
	atomic_t pending;
	bool failed;
	struct completion done;
};

struct tc_chunk {
	struct work_struct work;
	const struct tc_piece *piece;
	size_t start;
	size_t end;
	struct tc_wait *wait;
};

static void tc_chunk_fn(struct work_struct *work)
{
	struct tc_chunk *c = container_of(work, struct tc_chunk, work);
	struct tc_wait *w = c->wait;

	tc_copy_span(c->piece, c->start, c->end);
	if (atomic_dec_and_test(&w->pending))
		complete(&w->done);
}

/* Copies a piece with the threads: chunks on the workqueue, or inline. */
static void tc_threads_piece(const struct tc_piece *p)
{
	size_t chunk = max_t(size_t, (size_t)READ_ONCE(chunk_kib) << 10, PAGE_SIZE);
	size_t nr = DIV_ROUND_UP(p->len, chunk), i;
	struct tc_chunk *chunks;
	struct tc_wait w;

	chunks = nr > 1 && tc_threads > 1 ?
		 kvcalloc(nr, sizeof(*chunks), GFP_KERNEL) : NULL;
	if (!chunks) {
		for (i = 0; i < p->len; i += chunk) {
			tc_copy_span(p, i, min(p->len, i + chunk));
			cond_resched();
		}
		goto out;
	}
	atomic_set(&w.pending, nr);
	init_completion(&w.done);
	for (i = 0; i < nr; i++) {
		chunks[i].piece = p;
		chunks[i].start = i * chunk;
		chunks[i].end = min(p->len, (i + 1) * chunk);
		chunks[i].wait = &w;
		INIT_WORK(&chunks[i].work, tc_chunk_fn);
		queue_work(tc_wq, &chunks[i].work);
	}
	wait_for_completion(&w.done);
	kvfree(chunks);
out:
	atomic64_add(p->len, &tc_stats.bytes_threads);
}

/* One DMA descriptor: a span within one source and one destination page. */
struct tc_seg {
	struct dma_chan *chan;
	dma_addr_t src;
	dma_addr_t dst;
	unsigned int len;
	unsigned int mapped;	/* 0, 1 (src) or 2 (src and dst) */
};

static void tc_dma_done(void *arg, const struct dmaengine_result *res)
{
	struct tc_wait *w = arg;

	if (res && res->result != DMA_TRANS_NOERROR)
		WRITE_ONCE(w->failed, true);
	if (atomic_dec_and_test(&w->pending))
		complete(&w->done);
}

/*
 * Copies a piece by DMA: one memcpy descriptor per span that stays within
 * a source page and a destination page (pinned user pages are not
 * physically contiguous), the spans dealt round-robin to the channels.
 * Returns 0 when every descriptor completed without error in time, else
 * nonzero (the caller then copies the piece with the CPU). Called with
 * tc_dma_lock held.
 */
static int tc_dma_piece(const struct tc_piece *p)
{
	size_t nsegs_max = 2 * (DIV_ROUND_UP(p->len, PAGE_SIZE) + 1);
	unsigned long timeout = msecs_to_jiffies(READ_ONCE(dma_timeout_ms));
	struct tc_seg *segs;
	size_t nsegs = 0, pos = 0, i;
	struct tc_wait w;
	int ret = 0;

	segs = kvcalloc(nsegs_max, sizeof(*segs), GFP_KERNEL);
	if (!segs)
		return -ENOMEM;
	atomic_set(&w.pending, 1);	/* a bias, dropped once all are issued */
	w.failed = false;
	init_completion(&w.done);

	while (pos < p->len) {
		size_t s = p->src_off + pos, d = p->dst_off + pos;
		size_t n = min3(p->len - pos, PAGE_SIZE - offset_in_page(s),
				PAGE_SIZE - offset_in_page(d));
		struct tc_seg *seg = &segs[nsegs];
		struct dma_async_tx_descriptor *tx;
		struct device *dev;
		dma_cookie_t cookie;

		seg->chan = tc_chans[nsegs % tc_nr_chans];
		seg->len = n;
		dev = seg->chan->device->dev;
		nsegs++;
		seg->src = dma_map_page(dev, p->src_pages[s >> PAGE_SHIFT],
					offset_in_page(s), n, DMA_TO_DEVICE);
		if (dma_mapping_error(dev, seg->src)) {
			ret = -EIO;
			break;
		}
		seg->mapped = 1;
		seg->dst = dma_map_page(dev, p->dst_pages[d >> PAGE_SHIFT],
					offset_in_page(d), n, DMA_FROM_DEVICE);
		if (dma_mapping_error(dev, seg->dst)) {
			ret = -EIO;
			break;
		}
		seg->mapped = 2;
		tx = dmaengine_prep_dma_memcpy(seg->chan, seg->dst, seg->src, n,
					       DMA_PREP_INTERRUPT | DMA_CTRL_ACK);
		if (!tx) {
			ret = -EIO;
			break;
		}
		tx->callback_result = tc_dma_done;
		tx->callback_param = &w;
		atomic_inc(&w.pending);
		cookie = dmaengine_submit(tx);
		if (dma_submit_error(cookie)) {
			atomic_dec(&w.pending);
			ret = -EIO;
			break;
		}
		pos += n;
	}
	for (i = 0; i < tc_nr_chans && i < nsegs; i++)
		dma_async_issue_pending(tc_chans[i]);
	if (atomic_dec_and_test(&w.pending))
		complete(&w.done);
	if (!wait_for_completion_timeout(&w.done, timeout)) {
		/* No callback runs after dmaengine_terminate_sync(). */
		for (i = 0; i < tc_nr_chans; i++)
			dmaengine_terminate_sync(tc_chans[i]);
		atomic64_inc(&tc_stats.dma_timeouts);
		ret = -ETIMEDOUT;
	} else if (READ_ONCE(w.failed)) {
		ret = -EIO;
	}

	for (i = 0; i < nsegs; i++) {
		struct device *dev = segs[i].chan->device->dev;

		if (segs[i].mapped >= 1)
			dma_unmap_page(dev, segs[i].src, segs[i].len, DMA_TO_DEVICE);
		if (segs[i].mapped == 2)
			dma_unmap_page(dev, segs[i].dst, segs[i].len, DMA_FROM_DEVICE);
	}
	kvfree(segs);
	if (!ret)
		atomic64_add(p->len, &tc_stats.bytes_dma);
	return ret;
}

/* Pins the pages of [addr, addr + len); -EFAULT unless all are pinned. */
static int tc_pin(u64 addr, size_t len, bool write, struct page **pages)
{
	int nr = DIV_ROUND_UP(offset_in_page(addr) + len, PAGE_SIZE);
	int got;

	got = pin_user_pages_fast(addr & PAGE_MASK, nr, write ? FOLL_WRITE : 0,
				  pages);
	if (got == nr)
		return nr;
	if (got > 0)
		unpin_user_pages(pages, got);
	return -EFAULT;
}

static bool tc_use_dma(u32 mode, u64 len)
{
	unsigned int nr = READ_ONCE(tc_nr_chans);

	if (mode == TIERCOPY_MODE_DMA)
		return true;
	if (mode != TIERCOPY_MODE_AUTO || !nr)
		return false;
	return len >= READ_ONCE(dma_min_bytes) ||
	       (nr >= READ_ONCE(dma_many_channels) &&
		len >= READ_ONCE(dma_min_bytes_many));
}

/*
 * Copies one range in pieces; sets its status and backend. Returns the
 * bytes copied.
 */
static u64 tc_copy_range(struct tiercopy_range *r, u32 mode,
			 struct page **src_pages, struct page **dst_pages,
			 size_t piece_max)
{
	bool dma = tc_use_dma(mode, r->len);
	bool cpu_used = false;
	u64 pos = 0;
	int err = 0;

	if (dma && !READ_ONCE(tc_nr_chans)) {
		atomic64_inc(&tc_stats.dma_no_channel);
		dma = false;
	}
	if (r->src + r->len < r->src || r->dst + r->len < r->dst) {
		err = -EFAULT;
		goto out;
	}
	while (pos < r->len) {
		struct tc_piece p = {
			.src_pages = src_pages,
			.dst_pages = dst_pages,
			.src_off = offset_in_page(r->src + pos),
			.dst_off = offset_in_page(r->dst + pos),
			.len = min_t(u64, r->len - pos, piece_max),
		};
		int nsrc, ndst;

		if (pos && fatal_signal_pending(current)) {
			err = -EINTR;
			break;
		}
		nsrc = tc_pin(r->src + pos, p.len, false, src_pages);
		if (nsrc < 0) {
			err = nsrc;
			break;
		}
		ndst = tc_pin(r->dst + pos, p.len, true, dst_pages);
		if (ndst < 0) {
			unpin_user_pages(src_pages, nsrc);
			err = ndst;
			break;
		}
		if (dma) {
			int ret;

			mutex_lock(&tc_dma_lock);
			ret = tc_dma_piece(&p);
			mutex_unlock(&tc_dma_lock);
			if (ret) {
				atomic64_inc(&tc_stats.dma_fallbacks);
				tc_threads_piece(&p);
				cpu_used = true;
			}
		} else {
			tc_threads_piece(&p);
			cpu_used = true;
		}
		unpin_user_pages_dirty_lock(dst_pages, ndst, true);
		unpin_user_pages(src_pages, nsrc);
		pos += p.len;
		cond_resched();
	}
out:
	r->status = err;
	r->backend = pos ? (cpu_used ? TIERCOPY_BACKEND_THREADS :
			    TIERCOPY_BACKEND_DMA) : TIERCOPY_BACKEND_NONE;
	if (err)
		atomic64_inc(&tc_stats.range_errors);
	return err ? 0 : pos;
}

static bool tc_overlap(u64 a, u64 alen, u64 b, u64 blen)
{
	return alen && blen && a < b + blen && b < a + alen;
}

static long tc_ioctl_copy(struct tiercopy_batch __user *ubatch)
{
	struct page **src_pages = NULL, **dst_pages = NULL;
	struct tiercopy_range *r;
	struct tiercopy_batch b;
	size_t piece_max, npages;
	u64 total = 0, copied = 0;
	u32 mode, i, j;
	long ret = 0;

	if (copy_from_user(&b, ubatch, sizeof(b)))
		return -EFAULT;
	if (b.size != sizeof(b) || b.version != TIERCOPY_ABI_VERSION)
		return -EINVAL;
	mode = b.flags;
	if (mode & ~TIERCOPY_MODE_MASK || mode == TIERCOPY_MODE_MASK)
		return -EINVAL;
	if (!b.nr_ranges)
		return -EINVAL;
	if (b.nr_ranges > TIERCOPY_MAX_RANGES)
		return -E2BIG;
	r = vmemdup_user(u64_to_user_ptr(b.ranges), b.nr_ranges * sizeof(*r));
	if (IS_ERR(r))
		return PTR_ERR(r);
	for (i = 0; i < b.nr_ranges; i++) {
		if (r[i].len > TIERCOPY_MAX_BATCH_BYTES) {
			ret = -E2BIG;
			goto out;
		}
		total += r[i].len;
	}
	if (total > TIERCOPY_MAX_BATCH_BYTES) {
		ret = -E2BIG;
		goto out;
	}
	/* A destination overlapping any source or another destination. */
	for (i = 0; i < b.nr_ranges; i++) {
		for (j = 0; j < b.nr_ranges; j++) {
			if (tc_overlap(r[i].dst, r[i].len, r[j].src, r[j].len) ||
			    (i != j &&
			     tc_overlap(r[i].dst, r[i].len, r[j].dst, r[j].len))) {
				ret = -EINVAL;
				goto out;
			}
		}
	}

	piece_max = max_t(size_t, (size_t)READ_ONCE(pin_mib) << 20, PAGE_SIZE);
	npages = piece_max / PAGE_SIZE + 1;
	src_pages = kvmalloc_array(npages, sizeof(*src_pages), GFP_KERNEL);
	dst_pages = kvmalloc_array(npages, sizeof(*dst_pages), GFP_KERNEL);
	if (!src_pages || !dst_pages) {
		ret = -ENOMEM;
		goto out;
	}
	atomic64_inc(&tc_stats.batches);
	for (i = 0; i < b.nr_ranges; i++) {
		if (signal_pending(current)) {
			if (!i) {
				ret = -ERESTARTSYS;
				goto out;
			}
			for (; i < b.nr_ranges; i++) {
				r[i].status = -EINTR;
				r[i].backend = TIERCOPY_BACKEND_NONE;
				atomic64_inc(&tc_stats.ranges_interrupted);
			}
			break;
		}
		r[i].status = 0;
		r[i].backend = TIERCOPY_BACKEND_NONE;
		if (!r[i].len)
			continue;
		atomic64_inc(&tc_stats.ranges);
		copied += tc_copy_range(&r[i], mode, src_pages, dst_pages,
					piece_max);
	}
	b.copied = copied;
	if (copy_to_user(u64_to_user_ptr(b.ranges), r,
			 b.nr_ranges * sizeof(*r)) ||
	    copy_to_user(ubatch, &b, sizeof(b)))
		ret = -EFAULT;
out:
	kvfree(dst_pages);
	kvfree(src_pages);
	kvfree(r);
	return ret;
}

static long tc_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	if (cmd == TIERCOPY_IOC_COPY)
		return tc_ioctl_copy((struct tiercopy_batch __user *)arg);
	return -ENOTTY;
}

static const struct file_operations tc_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = tc_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice tc_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "tiercopy",
	.fops = &tc_fops,
	.mode = 0600,
};

static int tc_stats_show(struct seq_file *m, void *v)
{
	seq_printf(m, "threads %u\n", tc_threads);
	seq_printf(m, "dma_channels %u\n", tc_nr_chans);
	seq_printf(m, "batches %lld\n", atomic64_read(&tc_stats.batches));
	seq_printf(m, "ranges %lld\n", atomic64_read(&tc_stats.ranges));
	seq_printf(m, "bytes_threads %lld\n", atomic64_read(&tc_stats.bytes_threads));
	seq_printf(m, "bytes_dma %lld\n", atomic64_read(&tc_stats.bytes_dma));
	seq_printf(m, "dma_fallbacks %lld\n", atomic64_read(&tc_stats.dma_fallbacks));
	seq_printf(m, "dma_timeouts %lld\n", atomic64_read(&tc_stats.dma_timeouts));
	seq_printf(m, "dma_no_channel %lld\n", atomic64_read(&tc_stats.dma_no_channel));
	seq_printf(m, "range_errors %lld\n", atomic64_read(&tc_stats.range_errors));
	seq_printf(m, "ranges_interrupted %lld\n",
		   atomic64_read(&tc_stats.ranges_interrupted));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(tc_stats);

static void tc_release_channels(void)
{
	while (tc_nr_chans)
		dma_release_channel(tc_chans[--tc_nr_chans]);
}

static void tc_request_channels(void)
{
	unsigned int want = min_t(unsigned int, dma_channels, TC_MAX_CHANNELS);
	dma_cap_mask_t mask;

	dma_cap_zero(mask);
	dma_cap_set(DMA_MEMCPY, mask);
	while (tc_nr_chans < want) {
		struct dma_chan *chan = dma_request_chan_by_mask(&mask);

		if (IS_ERR(chan))
			break;
		tc_chans[tc_nr_chans++] = chan;
	}
}

static int __init tc_init(void)
{
	int ret;

	tc_threads = threads ? threads : min_t(unsigned int, num_online_cpus(),
					       TC_MAX_THREADS);
	tc_wq = alloc_workqueue("tiercopy", WQ_UNBOUND, tc_threads);
	if (!tc_wq)
		return -ENOMEM;
	tc_request_channels();
	ret = misc_register(&tc_misc);
	if (ret) {
		tc_release_channels();
		destroy_workqueue(tc_wq);
		return ret;
	}
	tc_debugfs = debugfs_create_dir("tiercopy", NULL);
	debugfs_create_file("stats", 0444, tc_debugfs, NULL, &tc_stats_fops);
	pr_info("%u threads, %u DMA channels\n", tc_threads, tc_nr_chans);
	return 0;
}

static void __exit tc_exit(void)
{
	debugfs_remove_recursive(tc_debugfs);
	misc_deregister(&tc_misc);
	tc_release_channels();
	destroy_workqueue(tc_wq);
}

module_init(tc_init);
module_exit(tc_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("tiercopy: batched user-to-user copies by kernel threads or DMA");
