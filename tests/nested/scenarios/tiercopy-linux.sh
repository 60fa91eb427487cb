#!/bin/sh
# A Linux guest whose frames move through host-kernel copy offload, on the
# generic kernel (it has dmaengine): the test DMA provider and tiercopy
# are loaded, and the remap migrator copies on --copy-engine kernel:dma
# while the provider completes out of order and fails and stalls
# descriptors (tiercopy_inject_faults), so that some pieces go by DMA and
# some fall back to the CPU, while the guest checks its data.
. /nested/lib.sh
dmesg_start=$(dmesg | wc -l)
tiercopy_load_modules
dump tiercopy-stats-before /sys/kernel/debug/tiercopy/stats
tiercopy_inject_faults
run_tiervisor --kernel /guest/bzImage --initramfs /guest/initramfs.cpio.gz \
	--cmdline "console=ttyS0 quiet guest.mib=96 guest.seconds=$(cmdline_value guest.seconds 20)" \
	--vcpus "$(cmdline_value tiervisor.vcpus 2)" --memory 256M --migrator remap --copy-engine kernel:dma \
	--tier name=dram,backend=memfd,size=64M --tier name=cxl,backend=memfd,size=256M \
	--console-log /tmp/guest.log --timeout 480
tiercopy_stop_faults
dump guest-console /tmp/guest.log
dump tiercopy-stats-after /sys/kernel/debug/tiercopy/stats
dump tiercopy-testdma-counters /tmp/testdma-counters
rmmod tiercopy
fact tiercopy-rmmod $?
rmmod tiercopy_testdma
fact tiercopy-testdma-rmmod $?
kernel_splats "$dmesg_start" tiercopy
