#!/bin/sh
# NUMA tiers and the kernel migrator: one memfd for guest RAM, the fast
# tier on the fastest memory node and the slow tier on the next (no
# numa-node given: tiervisor ranks the host's nodes itself), frames moved
# with move_pages(2) by the tiering engine while hotset verifies its data.
. /nested/lib.sh
host_facts
run_tiervisor --workload hotset:verify=1,phases=3,seconds=2 --vcpus 2 --memory 256M \
	--backing shared-numa --migrator kernel \
	--tier name=dram,backend=memfd,size=64M --tier name=cxl,backend=memfd,size=192M \
	--timeout 240
