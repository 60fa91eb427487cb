#!/bin/sh
# DAMON in the host kernel as the access tracker. First the tracking
# tests' damon cases (vmm/tests/tracking/damon.rs, built statically into
# the host as /bin/tracking-tests) with DAMON required: ranking against
# the oracle, phase shifts, migrations, reads. Then the tiering engine on
# the damon tracker moves hotset's frames with the remap migrator while
# hotset verifies its data, one page of each frame checked 20 times per
# 200 ms aggregation.
. /nested/lib.sh
fact kdamonds-before "$(cat /sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds 2>&1)"
# The tests' output goes to the console as it comes (a hang shows where),
# between markers so the runner can take it out whole.
# Switches for a run by hand: tiervisor.damon-tests=FILTER narrows the
# tests, tiervisor.track-debug=1 prints each interval's evidence.
filter=$(cmdline_value tiervisor.damon-tests damon)
[ "$(cmdline_value tiervisor.track-debug 0)" = 1 ] && export TRACK_DEBUG=1
echo "@@nested begin damon-tests"
TIERVISOR_REQUIRE_DAMON=1 /bin/tracking-tests "$filter" --test-threads=1 --nocapture 2>&1
rc=$?
echo "@@nested end damon-tests"
fact damon-tests-rc $rc
fact kdamonds-after-tests "$(cat /sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds 2>&1)"
cat >/tmp/policy.json <<'JSON'
{"tracker": "damon", "fast_quota": {"max_bytes": 67108864},
 "sampling": {"budget_pages_per_sec": 12800, "window_period_us": 200000,
              "min_window_us": 500, "max_window_us": 200000}}
JSON
run_tiervisor --workload hotset:verify=1,phases=3,seconds=2 --vcpus 2 --memory 256M \
	--migrator remap --policy /tmp/policy.json \
	--tier name=dram,backend=memfd,size=64M --tier name=cxl,backend=memfd,size=192M \
	--timeout 240
fact kdamonds-after-run "$(cat /sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds 2>&1)"
