#!/bin/sh
# The access-log KVM (host-kernel/kvm-access-log): KVM_TIERVISOR_ACCESS_LOG,
# an ioctl that harvests the accessed bits of KVM's nested page tables.
# The self-test (/bin/kvm-access-log-test) first runs on the stock modules
# /init loaded (it must fail: no capability), then the stock kvm_amd and
# kvm are replaced by the patched ones from /lib/modules/access-log/ and it
# runs with the TDP MMU (the default) and with the shadow MMU's rmaps
# (kvm.ko tdp_mmu=0). Then, on the patched modules with the TDP MMU, the
# access-log tracker's tests and the engine on that tracker. Last, every
# kernel warning since the start.
. /nested/lib.sh
# Kernel log lines before this scenario: only later ones are judged.
dmesg_start=$(dmesg | wc -l)
fact access-log-lockdep "$([ -e /proc/lockdep ] && echo on || echo off)"

# Runs the self-test; its output goes between markers (block NAME) and
# "access-log-selftest-rc tdp_mmu=Y|N RC" is the fact.
selftest() {
	echo "@@nested begin $1"
	/bin/kvm-access-log-test 2>&1
	rc=$?
	echo "@@nested end $1"
	fact access-log-selftest-rc "tdp_mmu=$(cat /sys/module/kvm/parameters/tdp_mmu 2>&1) $rc"
}

/bin/kvm-access-log-test >/tmp/stock.out 2>&1
fact access-log-stock-selftest-rc $?
dump access-log-stock /tmp/stock.out

if load_access_log_kvm; then
	fact access-log-taint "$(cat /proc/sys/kernel/tainted)"
	selftest access-log-selftest-tdp
	load_access_log_kvm tdp_mmu=0 && selftest access-log-selftest-shadow
	load_access_log_kvm && fact access-log-final-tdp-mmu "$(cat /sys/module/kvm/parameters/tdp_mmu)"
fi

# The access-log tracker on the patched KVM (TDP MMU): the tracking
# tests' access-log cases with the access log required (ranking, shifts,
# migrations, reads; no exits, from KVM's debugfs counters), then the
# engine on it moves hotset's frames while hotset verifies its data.
# tiervisor.access-log-tests=FILTER narrows the tests (a run by hand).
filter=$(cmdline_value tiervisor.access-log-tests access_log)
echo "@@nested begin access-log-tests"
TIERVISOR_REQUIRE_ACCESS_LOG=1 /bin/tracking-tests "$filter" --test-threads=1 --nocapture 2>&1
rc=$?
echo "@@nested end access-log-tests"
fact access-log-tests-rc $rc
cat >/tmp/policy.json <<'JSON'
{"tracker": "access-log", "fast_quota": {"max_bytes": 67108864}}
JSON
run_tiervisor --workload hotset:verify=1,phases=3,seconds=2 --vcpus 2 --memory 256M \
	--migrator remap --policy /tmp/policy.json \
	--tier name=dram,backend=memfd,size=64M --tier name=cxl,backend=memfd,size=192M \
	--timeout 240

# Kernel warnings since the scenario began: WARN, BUG, lockdep, RCU.
kernel_splats "$dmesg_start" access-log
