#!/bin/sh
# An unmodified Linux guest (the host's own Debian kernel) with 2 vCPUs
# (tiervisor.vcpus=N on the host's command line: N) boots to its init
# under tiervisor, runs a data-verifying memory workload while the
# tiering engine moves its frames, prints its result and powers off.
. /nested/lib.sh
run_tiervisor --kernel /guest/bzImage --initramfs /guest/initramfs.cpio.gz \
	--cmdline "console=ttyS0 quiet guest.mib=96 guest.seconds=$(cmdline_value guest.seconds 20)" \
	--vcpus "$(cmdline_value tiervisor.vcpus 2)" --memory 256M --migrator remap --console-log /tmp/guest.log --timeout 480
dump guest-console /tmp/guest.log
