#!/bin/sh
# A Linux guest that mostly reads, tiered on the access-log tracker: the
# access-log KVM (host-kernel/kvm-access-log) replaces the stock modules,
# and the guest's init rewrites its 96 MiB buffer each round but reads the
# first 16 MiB of it eight more times (guest.read-rounds, guest.hot-mib):
# hot by reads, which only accessed bits show. The engine keeps 48 MiB on
# a 64 MiB fast tier (the slow one holds all 256 MiB of guest RAM) and
# moves frames while the guest checks its data.
. /nested/lib.sh
load_access_log_kvm || exit 0
cat >/tmp/policy.json <<'JSON'
{"tracker": "access-log", "fast_quota": {"max_bytes": 50331648}}
JSON
run_tiervisor --kernel /guest/bzImage --initramfs /guest/initramfs.cpio.gz \
	--cmdline "console=ttyS0 quiet guest.mib=96 guest.seconds=$(cmdline_value guest.seconds 30) guest.read-rounds=8 guest.hot-mib=16" \
	--vcpus "$(cmdline_value tiervisor.vcpus 2)" --memory 256M --migrator remap --policy /tmp/policy.json \
	--tier name=dram,backend=memfd,size=64M --tier name=cxl,backend=memfd,size=256M \
	--console-log /tmp/guest.log --timeout 480
dump guest-console /tmp/guest.log
