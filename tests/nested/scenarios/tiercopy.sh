#!/bin/sh
# tiercopy (host-kernel/tiercopy): /dev/tiercopy copies batches of ranges
# between a process's user addresses with kernel threads or dmaengine
# memcpy channels. Runs on the cloud kernel (no dmaengine) and on the
# generic kernel (dmaengine). Loads the test DMA provider
# (tiercopy-testdma, which needs a kernel with dmaengine: its failure is a
# fact, and the self-test then skips its DMA checks) and tiercopy, runs
# the self-test (/bin/tiercopy-test, which also checks that rmmod fails
# while /dev/tiercopy is open), checks the device's mode, unloads both in
# reverse order, and last, every kernel warning since the start. Before
# unloading, tiervisor's remap migrator moves frames through it
# (--copy-engine kernel:threads and kernel:dma), and with dmaengine once
# more on kernel:dma while the provider completes out of order and fails
# and stalls descriptors (tiercopy_inject_faults); then tierbench copy
# measures the kernel engines (emulated figures).
. /nested/lib.sh
dmesg_start=$(dmesg | wc -l)
fact tiercopy-dma-engine "$([ -d /sys/class/dma ] && echo y || echo n)"

tiercopy_load_modules
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
if [ -d /sys/module/tiercopy_testdma ]; then
	tiercopy_inject_faults
	/bin/tiervisor run --report-json /tmp/kernel-faults.json \
		--workload hotset:verify=1,phases=3,seconds=2 --vcpus 2 --memory 256M \
		--migrator remap --copy-engine kernel:dma $tiers --timeout 240 \
		>/tmp/kernel-faults.out 2>&1
	fact kernel-faults-rc $?
	tiercopy_stop_faults
	dump kernel-faults-output /tmp/kernel-faults.out
	dump kernel-faults-report /tmp/kernel-faults.json
	dump tiercopy-stats-after-faults /sys/kernel/debug/tiercopy/stats
	dump tiercopy-testdma-counters /tmp/testdma-counters
	# tierbench's copy suite with the kernel engines beside the user-space
	# ones (emulated: TCG's copies say nothing about real hardware).
	start=$(date +%s)
	/bin/tierbench copy --quick --json /tmp/copy.json --markdown /tmp/copy.md >/tmp/copy.out 2>&1
	fact tierbench-copy-rc $?
	fact tierbench-copy-seconds $(($(date +%s) - start))
	dump tierbench-copy /tmp/copy.md
	dump tierbench-copy-json /tmp/copy.json
	dump tierbench-copy-output /tmp/copy.out
fi
rmmod tiercopy
fact tiercopy-rmmod $?
if [ -d /sys/module/tiercopy_testdma ]; then
	rmmod tiercopy_testdma
	fact tiercopy-testdma-rmmod $?
fi

kernel_splats "$dmesg_start" tiercopy
exit 0
