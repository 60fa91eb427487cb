// SPDX-License-Identifier: GPL-2.0
/*
 * tiercopy test DMA provider — for tests only.
 *
 * A dmaengine provider with "channels" DMA_MEMCPY channels on a platform
 * device this module creates. The "hardware" is the CPU: issued
 * descriptors are performed by a work item, with memcpy between the
 * kernel's direct mapping of the DMA addresses. That is only right
 * because the device is virtual and has a 64-bit DMA mask, and the tiered
 * host it is meant for has no IOMMU and no memory encryption: dma-direct
 * then hands out bus addresses equal to physical addresses, which
 * phys_to_virt() turns into the direct mapping. It is not a model for a
 * real driver, and it refuses to load where the DMA ops are not direct.
 *
 * Knobs under /sys/kernel/debug/tiercopy-testdma/: "reverse" (complete
 * each issued group in reverse order), "fail_next" (the next N
 * descriptors complete with DMA_TRANS_ABORTED and copy nothing),
 * "stall_next" (the next N never complete, until terminate_all),
 * "fail_every" and "stall_every" (N: every Nth descriptor performed since
 * load fails, or stalls; 0, the default, never), and the counters "done",
 * "failed" and "stalled".
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/cc_platform.h>
#include <linux/debugfs.h>
#include <linux/dma-map-ops.h>
#include <linux/dma-mapping.h>
#include <linux/dmaengine.h>
#include <linux/io.h>
#include <linux/list.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>

#define TDMA_MAX_CHANNELS 16

static unsigned int channels = 4;
module_param(channels, uint, 0444);
MODULE_PARM_DESC(channels, "memcpy channels (default 4, at most 16)");

static bool reverse;
module_param(reverse, bool, 0644);
MODULE_PARM_DESC(reverse, "complete each issued group in reverse order");

static atomic_t fail_next = ATOMIC_INIT(0);
static atomic_t stall_next = ATOMIC_INIT(0);
static u32 fail_every;
static u32 stall_every;
static atomic64_t nr_run = ATOMIC64_INIT(0);
static atomic64_t nr_done = ATOMIC64_INIT(0);
static atomic64_t nr_failed = ATOMIC64_INIT(0);
static atomic64_t nr_stalled = ATOMIC64_INIT(0);

struct tdma_desc {
	struct dma_async_tx_descriptor tx;
	struct list_head node;
	dma_addr_t src;
	dma_addr_t dst;
	size_t len;
};

struct tdma_chan {
	struct dma_chan chan;
	spinlock_t lock;		/* the lists and the cookies */
	struct list_head submitted;	/* submitted, not issued */
	struct list_head issued;	/* issued, not yet taken by the work */
	struct list_head stalled;	/* never completing */
	struct work_struct work;
};

static struct platform_device *tdma_pdev;
static struct dma_device tdma_dev;
static struct tdma_chan *tdma_chans;
static unsigned int tdma_nr;
static struct workqueue_struct *tdma_wq;
static struct dentry *tdma_debugfs;
static bool tdma_probed;

static struct tdma_chan *to_tdma_chan(struct dma_chan *chan)
{
	return container_of(chan, struct tdma_chan, chan);
}

static struct tdma_desc *to_tdma_desc(struct dma_async_tx_descriptor *tx)
{
	return container_of(tx, struct tdma_desc, tx);
}

static dma_cookie_t tdma_tx_submit(struct dma_async_tx_descriptor *tx)
{
	struct tdma_chan *tc = to_tdma_chan(tx->chan);
	struct tdma_desc *d = to_tdma_desc(tx);
	dma_cookie_t cookie;
	unsigned long flags;

	spin_lock_irqsave(&tc->lock, flags);
	cookie = tc->chan.cookie + 1;
	if (cookie < DMA_MIN_COOKIE)
		cookie = DMA_MIN_COOKIE;
	tc->chan.cookie = cookie;
	tx->cookie = cookie;
	list_add_tail(&d->node, &tc->submitted);
	spin_unlock_irqrestore(&tc->lock, flags);
	return cookie;
}

static struct dma_async_tx_descriptor *
tdma_prep_memcpy(struct dma_chan *chan, dma_addr_t dst, dma_addr_t src,
		 size_t len, unsigned long flags)
{
	struct tdma_desc *d = kzalloc(sizeof(*d), GFP_NOWAIT);

	if (!d)
		return NULL;
	dma_async_tx_descriptor_init(&d->tx, chan);
	d->tx.flags = flags;
	d->tx.tx_submit = tdma_tx_submit;
	d->src = src;
	d->dst = dst;
	d->len = len;
	return &d->tx;
}

static void tdma_issue_pending(struct dma_chan *chan)
{
	struct tdma_chan *tc = to_tdma_chan(chan);
	unsigned long flags;

	spin_lock_irqsave(&tc->lock, flags);
	list_splice_tail_init(&tc->submitted, &tc->issued);
	spin_unlock_irqrestore(&tc->lock, flags);
	queue_work(tdma_wq, &tc->work);
}

/* Whether descriptor number @n (from 1) is one of every @every-th. */
static bool tdma_every(u64 n, u32 every)
{
	u32 rem;

	if (!every)
		return false;
	div_u64_rem(n, every, &rem);
	return !rem;
}

/* Performs (or fails, or stalls) one descriptor and calls its callback. */
static void tdma_run(struct tdma_chan *tc, struct tdma_desc *d)
{
	struct dmaengine_result res = { .result = DMA_TRANS_NOERROR };
	struct dma_async_tx_descriptor *tx = &d->tx;
	u64 n = atomic64_inc_return(&nr_run);
	unsigned long flags;

	if (atomic_dec_if_positive(&stall_next) >= 0 ||
	    tdma_every(n, READ_ONCE(stall_every))) {
		spin_lock_irqsave(&tc->lock, flags);
		list_add_tail(&d->node, &tc->stalled);
		spin_unlock_irqrestore(&tc->lock, flags);
		atomic64_inc(&nr_stalled);
		return;
	}
	if (atomic_dec_if_positive(&fail_next) >= 0 ||
	    tdma_every(n, READ_ONCE(fail_every))) {
		res.result = DMA_TRANS_ABORTED;
		res.residue = d->len;
		atomic64_inc(&nr_failed);
	} else {
		/* Direct-mapped bus addresses: see the comment at the top. */
		memcpy(phys_to_virt(d->dst), phys_to_virt(d->src), d->len);
		atomic64_inc(&nr_done);
	}
	spin_lock_irqsave(&tc->lock, flags);
	if (tx->cookie > tc->chan.completed_cookie)
		tc->chan.completed_cookie = tx->cookie;
	spin_unlock_irqrestore(&tc->lock, flags);
	if (tx->callback_result)
		tx->callback_result(tx->callback_param, &res);
	else if (tx->callback)
		tx->callback(tx->callback_param);
	kfree(d);
}

/* Takes each issued group and performs it, in order or in reverse. */
static void tdma_work(struct work_struct *work)
{
	struct tdma_chan *tc = container_of(work, struct tdma_chan, work);
	struct tdma_desc *d, *n;
	unsigned long flags;
	LIST_HEAD(group);

	for (;;) {
		spin_lock_irqsave(&tc->lock, flags);
		list_splice_tail_init(&tc->issued, &group);
		spin_unlock_irqrestore(&tc->lock, flags);
		if (list_empty(&group))
			return;
		if (READ_ONCE(reverse)) {
			list_for_each_entry_safe_reverse(d, n, &group, node) {
				list_del(&d->node);
				tdma_run(tc, d);
			}
		} else {
			list_for_each_entry_safe(d, n, &group, node) {
				list_del(&d->node);
				tdma_run(tc, d);
			}
		}
		cond_resched();
	}
}

static enum dma_status tdma_tx_status(struct dma_chan *chan,
				      dma_cookie_t cookie,
				      struct dma_tx_state *state)
{
	struct tdma_chan *tc = to_tdma_chan(chan);
	dma_cookie_t used, complete;
	unsigned long flags;

	spin_lock_irqsave(&tc->lock, flags);
	used = chan->cookie;
	complete = chan->completed_cookie;
	spin_unlock_irqrestore(&tc->lock, flags);
	if (state) {
		state->last = complete;
		state->used = used;
		state->residue = 0;
	}
	/* Approximate with reverse=1: completion is not in cookie order. */
	return cookie <= complete ? DMA_COMPLETE : DMA_IN_PROGRESS;
}

/* Drops every descriptor not yet taken by the work, stalled ones too. */
static int tdma_terminate_all(struct dma_chan *chan)
{
	struct tdma_chan *tc = to_tdma_chan(chan);
	struct tdma_desc *d, *n;
	unsigned long flags;
	LIST_HEAD(drop);

	spin_lock_irqsave(&tc->lock, flags);
	list_splice_tail_init(&tc->submitted, &drop);
	list_splice_tail_init(&tc->issued, &drop);
	list_splice_tail_init(&tc->stalled, &drop);
	spin_unlock_irqrestore(&tc->lock, flags);
	list_for_each_entry_safe(d, n, &drop, node)
		kfree(d);
	return 0;
}

/* Waits for the work: no callback runs after this returns. */
static void tdma_synchronize(struct dma_chan *chan)
{
	flush_work(&to_tdma_chan(chan)->work);
}

static void tdma_free_chan_resources(struct dma_chan *chan)
{
	tdma_terminate_all(chan);
	tdma_synchronize(chan);
}

static int tdma_debugfs_u64_get(void *data, u64 *val)
{
	*val = atomic64_read(data);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(tdma_u64_fops, tdma_debugfs_u64_get, NULL, "%llu\n");

/* Frees what probe allocated; the dma_device must be unregistered. */
static void tdma_free(void)
{
	debugfs_remove_recursive(tdma_debugfs);
	tdma_debugfs = NULL;
	if (tdma_wq)
		destroy_workqueue(tdma_wq);
	tdma_wq = NULL;
	kfree(tdma_chans);
	tdma_chans = NULL;
}

/*
 * Registers the channels on the platform device. dmaengine takes the
 * provider's module from the device's bound driver (it pins that module
 * while a client holds a channel), so this runs as the driver's probe.
 */
static int tdma_probe(struct platform_device *pdev)
{
	unsigned int i;
	int ret;

	/* The memcpy through phys_to_virt() needs dma-direct (no IOMMU). */
	if (get_dma_ops(&pdev->dev) || cc_platform_has(CC_ATTR_MEM_ENCRYPT)) {
		dev_err(&pdev->dev,
			"needs direct DMA mapping (no IOMMU, no memory encryption)\n");
		return -ENODEV;
	}
	tdma_nr = clamp_t(unsigned int, channels, 1, TDMA_MAX_CHANNELS);
	tdma_wq = alloc_workqueue("tiercopy-testdma", WQ_UNBOUND, tdma_nr);
	tdma_chans = kcalloc(tdma_nr, sizeof(*tdma_chans), GFP_KERNEL);
	if (!tdma_wq || !tdma_chans) {
		ret = -ENOMEM;
		goto err;
	}

	memset(&tdma_dev, 0, sizeof(tdma_dev));
	dma_cap_set(DMA_MEMCPY, tdma_dev.cap_mask);
	dma_cap_set(DMA_PRIVATE, tdma_dev.cap_mask);
	tdma_dev.dev = &pdev->dev;
	tdma_dev.device_prep_dma_memcpy = tdma_prep_memcpy;
	tdma_dev.device_issue_pending = tdma_issue_pending;
	tdma_dev.device_tx_status = tdma_tx_status;
	tdma_dev.device_terminate_all = tdma_terminate_all;
	tdma_dev.device_synchronize = tdma_synchronize;
	tdma_dev.device_free_chan_resources = tdma_free_chan_resources;
	tdma_dev.copy_align = DMAENGINE_ALIGN_1_BYTE;
	INIT_LIST_HEAD(&tdma_dev.channels);
	for (i = 0; i < tdma_nr; i++) {
		struct tdma_chan *tc = &tdma_chans[i];

		spin_lock_init(&tc->lock);
		INIT_LIST_HEAD(&tc->submitted);
		INIT_LIST_HEAD(&tc->issued);
		INIT_LIST_HEAD(&tc->stalled);
		INIT_WORK(&tc->work, tdma_work);
		tc->chan.device = &tdma_dev;
		tc->chan.cookie = DMA_MIN_COOKIE;
		tc->chan.completed_cookie = DMA_MIN_COOKIE;
		list_add_tail(&tc->chan.device_node, &tdma_dev.channels);
	}
	ret = dma_async_device_register(&tdma_dev);
	if (ret)
		goto err;

	tdma_debugfs = debugfs_create_dir("tiercopy-testdma", NULL);
	debugfs_create_bool("reverse", 0600, tdma_debugfs, &reverse);
	debugfs_create_atomic_t("fail_next", 0600, tdma_debugfs, &fail_next);
	debugfs_create_atomic_t("stall_next", 0600, tdma_debugfs, &stall_next);
	debugfs_create_u32("fail_every", 0600, tdma_debugfs, &fail_every);
	debugfs_create_u32("stall_every", 0600, tdma_debugfs, &stall_every);
	debugfs_create_file("done", 0444, tdma_debugfs, &nr_done, &tdma_u64_fops);
	debugfs_create_file("failed", 0444, tdma_debugfs, &nr_failed, &tdma_u64_fops);
	debugfs_create_file("stalled", 0444, tdma_debugfs, &nr_stalled, &tdma_u64_fops);
	tdma_probed = true;
	dev_info(&pdev->dev, "%u memcpy channels (for tests only)\n", tdma_nr);
	return 0;
err:
	tdma_free();
	return ret;
}

static void tdma_remove(struct platform_device *pdev)
{
	dma_async_device_unregister(&tdma_dev);
	tdma_free();
	tdma_probed = false;
}

static struct platform_driver tdma_driver = {
	.probe = tdma_probe,
	.remove = tdma_remove,
	.driver = {
		.name = "tiercopy-testdma",
	},
};

static int __init tdma_init(void)
{
	struct platform_device_info info = {
		.name = "tiercopy-testdma",
		.id = PLATFORM_DEVID_NONE,
		.dma_mask = DMA_BIT_MASK(64),
	};
	int ret;

	ret = platform_driver_register(&tdma_driver);
	if (ret)
		return ret;
	/* The driver is registered: adding the device probes it at once. */
	tdma_pdev = platform_device_register_full(&info);
	if (IS_ERR(tdma_pdev)) {
		ret = PTR_ERR(tdma_pdev);
		goto err;
	}
	if (!tdma_probed) {
		ret = -ENODEV;
		platform_device_unregister(tdma_pdev);
		goto err;
	}
	return 0;
err:
	platform_driver_unregister(&tdma_driver);
	return ret;
}

static void __exit tdma_exit(void)
{
	/* dmaengine holds this module while a client holds a channel. */
	platform_device_unregister(tdma_pdev);
	platform_driver_unregister(&tdma_driver);
}

module_init(tdma_init);
module_exit(tdma_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("tiercopy test DMA provider — for tests only");
