#!/bin/sh
# A graceful stop of a Linux guest: the guest's workload is set to run far
# longer than the scenario; once it has started, SIGTERM asks tiervisor to
# stop. The engine stops, tiervisor presses the guest's ACPI power button,
# and the guest ends its workload, checks its data and powers off within
# the grace period: tiervisor exits 5 with a report naming the signal.
. /nested/lib.sh
/bin/tiervisor run --report-json /tmp/report.json \
	--kernel /guest/bzImage --initramfs /guest/initramfs.cpio.gz \
	--cmdline "console=ttyS0 quiet guest.mib=96 guest.seconds=3600" \
	--vcpus 2 --memory 256M --migrator remap --console-log /tmp/guest.log \
	--timeout 480 --stop-grace 300 >/tmp/tiervisor.out 2>&1 &
pid=$!
# Until the guest's workload runs (its init says "@@guest start"), at
# most 400 s; then a few seconds of it, with the engine moving frames.
i=0
while ! grep -q "@@guest start" /tmp/guest.log 2>/dev/null; do
	i=$((i + 1))
	if [ "$i" -gt 400 ] || ! kill -0 "$pid" 2>/dev/null; then
		fact linux-stop "the guest's workload never started"
		break
	fi
	sleep 1
done
sleep 3
kill -TERM "$pid"
fact linux-stop "SIGTERM sent"
wait "$pid"
rc=$?
dump tiervisor-output /tmp/tiervisor.out
dump report /tmp/report.json
echo "@@nested rc $rc"
dump guest-console /tmp/guest.log
