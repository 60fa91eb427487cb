#!/bin/sh
# A device-DAX tier: DRAM from a memfd, PMEM from /dev/dax0.0 (the QEMU
# NVDIMM, 2 MiB aligned). The tiering engine moves hotset's frames
# between the two with each remap migrator while hotset verifies its
# data: plain remap first, then pre-copy. userfaultfd cannot register
# DAX mappings, so frames leaving the device move under the VM-wide
# write stop (every vCPU parked), frames leaving the memfd under
# write-protection. The device tier has room to spare, so moves run both
# as plain moves (into free slots) and as exchanges.
. /nested/lib.sh
host_facts
make_devdax || { echo "@@nested error cannot make /dev/dax0.0"; exit 1; }
tiers="--tier name=dram,backend=memfd,size=64M --tier name=pmem,backend=file,path=/dev/dax0.0,size=256M"
workload="--workload hotset:verify=1,phases=3,seconds=2 --vcpus 2 --memory 256M"
/bin/tiervisor run --report-json /tmp/remap.json $workload --migrator remap $tiers \
	--timeout 240 >/tmp/remap.out 2>&1
fact remap-rc $?
dump remap-output /tmp/remap.out
dump remap-report /tmp/remap.json
run_tiervisor $workload --migrator remap-precopy $tiers --timeout 240
