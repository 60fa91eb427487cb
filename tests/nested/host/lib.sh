# Helpers for the tiered host's scenario scripts (sourced by /init and
# by each scenario). Every line meant for the test runner starts with
# "@@nested "; see tests/nested/src/console.rs for the grammar.

# Prints a fact: "@@nested fact KEY VALUE...".
fact() {
	echo "@@nested fact $*"
}

# Prints FILE between begin/end markers named NAME, so the test runner
# can take it out of the console log whole. The heartbeat (below) prints
# nothing inside the block.
dump() {
	console_lock
	echo "@@nested begin $1"
	cat "$2" 2>&1
	echo
	echo "@@nested end $1"
	console_unlock
}

# The console's lock (a directory: mkdir is atomic), held while a block
# prints, so that the heartbeat's lines never land inside one.
console_lock() {
	until mkdir /tmp/console.lock 2>/dev/null; do
		sleep 1
	done
}

console_unlock() {
	rmdir /tmp/console.lock
}

# Prints "@@nested alive UPTIME" every 30 s (a beat waits while a
# block prints) for as long as the host runs, so that a console silent
# for longer than the runner's SILENCE_LIMIT (tests/nested/src/qemu.rs)
# means that the host's kernel stopped, not that a scenario's process
# hangs. A tiervisor or tierbench process still running 180 s
# (tiervisor.stuck_after=N on the command line: N s) after it started,
# and every 120 s after that, has its threads' states, wait channels and
# kernel stacks printed as block stacks-PID-AGE: a process that hangs in
# the host shows where.
heartbeat() {
	stuck_after=$(cmdline_value tiervisor.stuck_after 180)
	while sleep 30; do
		console_lock
		echo "@@nested alive $(cut -d' ' -f1 /proc/uptime)"
		console_unlock
		for p in /proc/[0-9]*; do
			case "$(cat "$p/comm" 2>/dev/null)" in
			tiervisor | tierbench) ;;
			*) continue ;;
			esac
			start=$(cut -d' ' -f22 "$p/stat" 2>/dev/null)
			[ -n "$start" ] || continue
			age=$(awk -v s="$start" '{ print int($1 - s / 100) }' /proc/uptime)
			due=/tmp/stacks-due-${p#/proc/}
			[ "$age" -ge "$(cat "$due" 2>/dev/null || echo "$stuck_after")" ] || continue
			echo $((age + 120)) >"$due"
			thread_stacks "$p" >/tmp/stacks 2>&1
			dump "stacks-${p#/proc/}-$age" /tmp/stacks
		done
	done
}

# Each thread of process directory $1: id, name, state, wait channel and
# kernel stack.
thread_stacks() {
	for t in "$1"/task/*; do
		echo "thread ${t##*/} $(cat "$t/comm") $(grep '^State' "$t/status")" \
			"wchan=$(cat "$t/wchan")"
		cat "$t/stack"
	done
}

# The value of KEY=VALUE on the kernel command line, or $2.
cmdline_value() {
	v=$(sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" /proc/cmdline)
	echo "${v:-$2}"
}

# The host's view of its memory: nodes, kernel memory tiers, HMAT
# latencies and SLIT distances.
host_facts() {
	fact nodes-with-memory "$(cat /sys/devices/system/node/has_memory)"
	for t in /sys/devices/virtual/memory_tiering/memory_tier*; do
		[ -e "$t/nodelist" ] && fact memory-tier "${t##*/}" "$(cat "$t/nodelist")"
	done
	for n in /sys/devices/system/node/node[0-9]*; do
		fact node "${n##*/}" \
			"read-latency=$(cat "$n/access0/initiators/read_latency" 2>/dev/null || echo none)" \
			"distance=$(cat "$n/distance" | tr ' ' ,)"
	done
}

# Turns the NVDIMM's label-less namespace0.0 into device-DAX /dev/dax0.0
# with 2 MiB alignment, through libnvdimm's sysfs (what
# `ndctl create-namespace -m devdax -e namespace0.0` does).
make_devdax() {
	nd=/sys/bus/nd/devices
	dax=$(cat $nd/region0/dax_seed) || return 1
	echo namespace0.0 >/sys/bus/nd/drivers/nd_pmem/unbind || return 1
	cat /proc/sys/kernel/random/uuid >"$nd/$dax/uuid" || return 1
	echo pmem >"$nd/$dax/mode" || return 1
	echo 2097152 >"$nd/$dax/align" || return 1
	echo namespace0.0 >"$nd/$dax/namespace" || return 1
	echo "$dax" >/sys/bus/nd/drivers/dax_pmem/bind || return 1
	for d in /sys/bus/dax/devices/*; do
		fact dax "${d##*/}" "size=$(cat "$d/size")" "align=$(cat "$d/align")" \
			"target-node=$(cat "$d/target_node")"
	done
}

# Runs tiervisor with "$@" (plus --report-json), in the background so
# that /proc/PID/numa_maps can be sampled while it runs; sets the debug
# corruption switch when the command line asks for it (tiervisor.corrupt=N).
# The integrity campaign's switches (tests/nested/tests/campaign.rs):
# tiervisor.shuffle=N adds --shuffle N (random moves, exchanges once the
# fast tier is full); tiervisor.migration=off runs with no migrator and
# no tiering engine, as the baseline; tiervisor.engine=off keeps the
# migrator (and the shuffle) but runs no tiering engine, so no tracker
# arms pages. Prints its exit code and its JSON report.
run_tiervisor() {
	corrupt=$(cmdline_value tiervisor.corrupt 0)
	if [ "$corrupt" != 0 ]; then
		export TIERVISOR_DEBUG_CORRUPT_PROMOTIONS=$corrupt
	fi
	if [ "$(cmdline_value tiervisor.migration on)" = off ]; then
		# Drop the script's --migrator and its value.
		n=$#
		while [ "$n" -gt 0 ]; do
			a=$1
			shift
			n=$((n - 1))
			if [ "$a" = --migrator ]; then
				shift
				n=$((n - 1))
				continue
			fi
			set -- "$@" "$a"
		done
		set -- "$@" --no-tiering
		fact campaign migration=off
	fi
	if [ "$(cmdline_value tiervisor.engine on)" = off ]; then
		set -- "$@" --no-tiering
		fact campaign engine=off
	fi
	shuffle=$(cmdline_value tiervisor.shuffle 0)
	if [ "$shuffle" != 0 ]; then
		set -- "$@" --shuffle "$shuffle"
		fact campaign shuffle="$shuffle"
	fi
	/bin/tiervisor run --report-json /tmp/report.json "$@" >/tmp/tiervisor.out 2>&1 &
	pid=$!
	# numa_maps once guest RAM has pages on both nodes (a NUMA run's
	# placement puts them there as the guest warms up), or the last sample
	# before tiervisor ends: a fixed delay caught tiervisor still probing
	# its tiers' speed on a slow host.
	: >/tmp/numa_maps
	while [ -e "/proc/$pid/numa_maps" ]; do
		grep -i memfd "/proc/$pid/numa_maps" >/tmp/numa_maps.new 2>/dev/null &&
			mv /tmp/numa_maps.new /tmp/numa_maps
		grep 'tiervisor-ram' /tmp/numa_maps | grep -q 'N0=' &&
			grep 'tiervisor-ram' /tmp/numa_maps | grep -q 'N1=' && break
		sleep 1
	done
	dump numa-maps /tmp/numa_maps
	wait "$pid"
	rc=$?
	dump tiervisor-output /tmp/tiervisor.out
	dump report /tmp/report.json
	echo "@@nested rc $rc"
}

# Has the kernel trace every KVM exit for a guest triple fault (SVM exit
# 0x7f, SHUTDOWN) or an intercepted exception (0x40-0x5f), and every
# exception KVM injects. KVM resets a vCPU that triple-faulted, so the
# VMM only ever sees rip 0xfff0; the trace keeps the rip and exit info
# from before the reset.
trace_guest_faults() {
	t=/sys/kernel/tracing
	mount -t tracefs tracefs $t 2>/dev/null
	[ -d $t/events/kvm/kvm_exit ] || { fact kvm-trace none; return 0; }
	echo "exit_reason == 127 || (exit_reason >= 64 && exit_reason < 96)" \
		>$t/events/kvm/kvm_exit/filter &&
		echo 1 >$t/events/kvm/kvm_exit/enable &&
		echo 1 >$t/events/kvm/kvm_inj_exception/enable ||
		fact kvm-trace failed
}

# Prints what trace_guest_faults recorded, if anything.
dump_guest_faults() {
	grep -v '^#' /sys/kernel/tracing/trace >/tmp/kvm-trace 2>/dev/null
	[ -s /tmp/kvm-trace ] && dump kvm-guest-faults /tmp/kvm-trace
}

# Replaces the loaded kvm_amd and kvm with the access-log KVM
# (host-kernel/kvm-access-log, packed in /lib/modules/access-log/), kvm.ko
# taking "$@" as parameters. Facts: access-log-load ok|failed STEP.
load_access_log_kvm() {
	if ! rmmod kvm_amd || ! rmmod kvm; then
		fact access-log-load failed rmmod "$(lsmod | grep kvm | tr '\n' ' ')"
		return 1
	fi
	if ! insmod /lib/modules/access-log/kvm.ko "$@"; then
		fact access-log-load failed insmod-kvm "$@"
		return 1
	fi
	if ! insmod /lib/modules/access-log/kvm-amd.ko; then
		fact access-log-load failed insmod-kvm-amd
		return 1
	fi
	[ -c /dev/kvm ] || {
		fact access-log-load failed no-dev-kvm
		return 1
	}
	fact access-log-load ok "$@"
	# The stock module's trace events went with it.
	trace_guest_faults
}

# Loads tiercopy's test DMA provider (it loads only where the kernel has
# dmaengine; fact tiercopy-testdma-load ok|failed, with insmod's words
# when it failed) and then tiercopy (fact tiercopy-load ok|failed), from
# the booted kernel's /lib/modules/RELEASE/tiercopy/.
tiercopy_load_modules() {
	dir=/lib/modules/$(uname -r)/tiercopy
	# An insmod killed by an oops in the module's init leaves the module
	# listed: its exit code counts too.
	if insmod "$dir/tiercopy-testdma.ko" >/tmp/testdma.out 2>&1 &&
		[ -d /sys/module/tiercopy_testdma ]; then
		fact tiercopy-testdma-load ok
	else
		fact tiercopy-testdma-load failed
		dump tiercopy-testdma-load /tmp/testdma.out
	fi
	if insmod "$dir/tiercopy.ko"; then
		fact tiercopy-load ok
	else
		fact tiercopy-load failed
	fi
}

# Faults for a migration on kernel:dma: the test provider completes each
# issued group in reverse order, fails every 2000th descriptor and stalls
# every 5000th (tiercopy then waits dma_timeout_ms, 100 here, terminates
# the channels and copies that piece with the CPU). Counted in
# descriptors, not time, so that a run's faults do not depend on its
# speed: a 2 MiB frame is 512 descriptors, so some frames go by DMA and
# some fall back. tiercopy_stop_faults restores the provider and writes
# its counters to /tmp/testdma-counters.
tiercopy_inject_faults() {
	d=/sys/kernel/debug/tiercopy-testdma
	echo Y >$d/reverse
	echo 2000 >$d/fail_every
	echo 5000 >$d/stall_every
	echo 100 >/sys/module/tiercopy/parameters/dma_timeout_ms
}

tiercopy_stop_faults() {
	d=/sys/kernel/debug/tiercopy-testdma
	echo 0 >$d/fail_every
	echo 0 >$d/stall_every
	echo N >$d/reverse
	for c in done failed stalled; do
		echo "$c $(cat $d/$c)"
	done >/tmp/testdma-counters
}

# Facts NAME-dmesg-splats N: the kernel warnings, BUGs, lockdep and
# sanitizer reports among dmesg's lines after line START; with any, the
# log since START as block NAME-dmesg.
kernel_splats() {
	dmesg | tail -n +$(($1 + 1)) >/tmp/dmesg
	grep -E 'WARNING:|BUG:|Oops|lockdep|possible circular|inconsistent lock|possible recursive|suspicious RCU|INFO: rcu|sleeping function|Call Trace|KASAN|UBSAN|kmemleak|general protection' \
		/tmp/dmesg >/tmp/splats
	fact "$2-dmesg-splats" "$(wc -l </tmp/splats)"
	[ -s /tmp/splats ] && dump "$2-dmesg" /tmp/dmesg
	return 0
}
