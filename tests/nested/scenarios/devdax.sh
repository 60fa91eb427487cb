#!/bin/sh
# A device-DAX tier: DRAM from a memfd, PMEM from /dev/dax0.0 (the QEMU
# NVDIMM, 2 MiB aligned). userfaultfd cannot register DAX mappings, so
# the remap migrators must refuse the tier up front with a clear error;
# with frames placed on both tiers and no migration, hotset verifies its
# data and the placement check finds every frame mapped from its tier.
. /nested/lib.sh
host_facts
make_devdax || { echo "@@nested error cannot make /dev/dax0.0"; exit 1; }
tiers="--tier name=dram,backend=memfd,size=64M --tier name=pmem,backend=file,path=/dev/dax0.0,size=192M"
/bin/tiervisor run --workload hotset --memory 256M --migrator remap $tiers --timeout 60 \
	>/tmp/remap.out 2>&1
fact remap-rc $?
dump remap-refusal /tmp/remap.out
run_tiervisor --workload hotset:verify=1,phases=3,seconds=2 --vcpus 2 --memory 256M \
	--migrator none --no-tiering --placement interleave $tiers --timeout 240
