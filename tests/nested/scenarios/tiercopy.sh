#!/bin/sh
# tiercopy (host-kernel/tiercopy): /dev/tiercopy copies batches of ranges
# between a process's user addresses with kernel threads or dmaengine
# memcpy channels. Loads the test DMA provider (tiercopy-testdma, which
# needs a kernel with dmaengine: its failure is a fact, and the self-test
# then skips its DMA checks) and tiercopy, runs the self-test
# (/bin/tiercopy-test, which also checks that rmmod fails while
# /dev/tiercopy is open), checks the device's mode, unloads both in
# reverse order, and last, every kernel warning since the start. Before
# unloading, tiervisor's remap migrator moves frames through it
# (--copy-engine kernel:threads and kernel:dma).
. /nested/lib.sh
dmesg_start=$(dmesg | wc -l)
fact tiercopy-dma-engine "$([ -d /sys/class/dma ] && echo y || echo n)"

insmod /lib/modules/tiercopy/tiercopy-testdma.ko >/tmp/testdma.out 2>&1
fact tiercopy-testdma-load "$([ -d /sys/module/tiercopy_testdma ] && echo ok || echo failed)"
[ -d /sys/module/tiercopy_testdma ] || dump tiercopy-testdma-load /tmp/testdma.out
if insmod /lib/modules/tiercopy/tiercopy.ko; then
	fact tiercopy-load ok
else
	fact tiercopy-load failed
fi
fact tiercopy-dev-mode "$(stat -c %a /dev/tiercopy 2>&1)"
fact tiercopy-channels "$(sed -n 's/^dma_channels //p' /sys/kernel/debug/tiercopy/stats 2>&1)"

echo "@@nested begin tiercopy-selftest"
/bin/tiercopy-test 2>&1
rc=$?
echo "@@nested end tiercopy-selftest"
fact tiercopy-selftest-rc $rc
dump tiercopy-stats /sys/kernel/debug/tiercopy/stats

# rmmod while a file holds /dev/tiercopy open must fail, and work after.
exec 3</dev/tiercopy
rmmod tiercopy 2>/dev/null
fact tiercopy-rmmod-open $?
exec 3<&-
# The remap migrator on the kernel copy engine (page-copy's KernelCopy):
# the engine moves hotset's frames while hotset verifies its data, with
# kernel threads, then in DMA mode (without dmaengine in this kernel every
# range falls back to the threads, counted in dma_no_channel).
tiers="--tier name=dram,backend=memfd,size=64M --tier name=cxl,backend=memfd,size=192M"
for engine in threads dma; do
	/bin/tiervisor run --report-json "/tmp/kernel-$engine.json" \
		--workload hotset:verify=1,phases=3,seconds=2 --vcpus 2 --memory 256M \
		--migrator remap --copy-engine "kernel:$engine" $tiers --timeout 240 \
		>"/tmp/kernel-$engine.out" 2>&1
	fact "kernel-$engine-rc" $?
	dump "kernel-$engine-output" "/tmp/kernel-$engine.out"
	dump "kernel-$engine-report" "/tmp/kernel-$engine.json"
done
dump tiercopy-stats-after-migration /sys/kernel/debug/tiercopy/stats
rmmod tiercopy
fact tiercopy-rmmod $?
if [ -d /sys/module/tiercopy_testdma ]; then
	rmmod tiercopy_testdma
	fact tiercopy-testdma-rmmod $?
fi

dmesg | tail -n +$((dmesg_start + 1)) >/tmp/dmesg
grep -E 'WARNING:|BUG:|Oops|lockdep|possible circular|inconsistent lock|possible recursive|suspicious RCU|INFO: rcu|sleeping function|Call Trace|KASAN|UBSAN|kmemleak|general protection' \
	/tmp/dmesg >/tmp/splats
fact tiercopy-dmesg-splats "$(wc -l </tmp/splats)"
[ -s /tmp/splats ] && dump tiercopy-dmesg /tmp/dmesg
exit 0
