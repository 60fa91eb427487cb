#!/usr/bin/env bash
# Builds the tiered host's artifacts under target/nested/ and prints that
# directory's path on stdout:
#
#   bzImage        the Debian cloud kernel from bookworm-backports (6.12,
#                  scripts/debian-backports.sh ^linux-image-cloud-amd64),
#                  for the host and for its Linux guest; it has DAMON's
#                  physical-address monitoring (the damon scenario). The
#                  PVM-side boot tests keep bookworm's 6.1
#                  (scripts/debian-kernel.sh)
#   bzImage-generic  Debian's generic kernel of the same release
#                  (^linux-image-amd64), which the host boots for the
#                  tiercopy scenarios: unlike the cloud kernel it has
#                  dmaengine (CONFIG_DMADEVICES), so tiercopy's DMA back
#                  end and its test provider run there
#   host.cpio.gz   the host's initramfs: busybox (busybox-static), each
#                  kernel's KVM and NVDIMM/DAX modules under
#                  /lib/modules/RELEASE/ with the list /init loads
#                  (/lib/modules/RELEASE/load), statically linked
#                  tiervisor, tierbench and the tracking tests
#                  (vmm/tests/tracking) built from this checkout, the
#                  scenarios (tests/nested/host, tests/nested/scenarios),
#                  the guest's kernel and initramfs, and the
#                  access-log KVM (below)
#   access-log/    kvm.ko and kvm-amd.ko with the access-log ioctl and its
#                  self-test (host-kernel/kvm-access-log/build.sh), packed
#                  into the host as /lib/modules/access-log/ and
#                  /bin/kvm-access-log-test; the stock modules stay the
#                  ones /init loads (the access-log scenario swaps them)
#   tiercopy/      tiercopy.ko, tiercopy-testdma.ko and their self-test
#                  (host-kernel/tiercopy/build.sh), packed into the host as
#                  /lib/modules/RELEASE/tiercopy/ and /bin/tiercopy-test;
#                  nothing loads them but the tiercopy scenarios
#   tiercopy-generic/  the same modules built for the generic kernel
#   guest.cpio.gz  the Linux guest's initramfs: the static guest-init
#                  (tests/nested/src/bin/guest-init) as /init, and the
#                  button and evdev modules it loads
#
#   qemu/          QEMU 10 from Debian's bookworm-backports, unpacked (not
#                  installed) with its firmware (scripts/debian-backports.sh):
#                  bookworm's QEMU 7.2 hung or crashed the host now and then
#                  (docs/testing.md); the system's qemu-system-x86 stays
#                  installed for the libraries both share
#
# Reproducible and cached: cargo rebuilds the binaries when sources
# change; each archive is packed from a staged tree with fixed mtimes and
# owners (cpio --reproducible, gzip -n) and replaces the old one only when
# its bytes differ.
#
# Usage: tests/nested/build.sh        (scripts/test-all.sh calls it)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/target/nested
target=x86_64-unknown-linux-gnu

log() { printf 'nested-build: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

for tool in cpio gzip objcopy xz; do
	command -v "$tool" >/dev/null || die "$tool not found (scripts/test-all.sh installs it)"
done
busybox=/bin/busybox
[ -x "$busybox" ] && ! ldd "$busybox" >/dev/null 2>&1 ||
	die "$busybox is missing or not static: install busybox-static"

mkdir -p "$out"
# fetch_kernel DIR META: unpacks the kernel package that metapackage META
# pins into $out/DIR; sets kpkg (that directory), kimage (its vmlinuz),
# kmods (its module tree) and krel (its release).
fetch_kernel() {
	local images trees
	kpkg=$(scripts/debian-backports.sh "$out/$1" "^$2") ||
		die "cannot fetch ^$2 from bookworm-backports"
	images=("$kpkg"/boot/vmlinuz-*)
	trees=("$kpkg"/lib/modules/*/kernel)
	[ -f "${images[0]}" ] || die "no vmlinuz in $kpkg"
	[ -d "${trees[0]}" ] || die "no modules in $kpkg"
	kimage=${images[0]}
	kmods=${trees[0]}
	krel=$(basename "$(dirname "$kmods")")
}
fetch_kernel kernel-generic linux-image-amd64
gvmlinuz=$kimage gmodules=$kmods grelease=$krel
fetch_kernel kernel linux-image-cloud-amd64
vmlinuz=$kimage modules=$kmods release=$krel

# The access-log KVM, built against the headers of the same kernel.
host-kernel/kvm-access-log/build.sh "$out/access-log" ||
	die "cannot build the access-log modules (host-kernel/kvm-access-log/build.sh)"
for m in kvm kvm-amd; do
	grep -aq "^vermagic=$release " <(strings "$out/access-log/$m.ko") ||
		die "access-log $m.ko is not built for $release (the host's kernel)"
done
# tiercopy and its test DMA provider, against the same headers.
host-kernel/tiercopy/build.sh "$out/tiercopy" ||
	die "cannot build the tiercopy modules (host-kernel/tiercopy/build.sh)"
host-kernel/tiercopy/build.sh "$out/tiercopy-generic" amd64 ||
	die "cannot build the tiercopy modules for the generic kernel (host-kernel/tiercopy/build.sh)"
for m in tiercopy tiercopy-testdma; do
	grep -aq "^vermagic=$release " <(strings "$out/tiercopy/$m.ko") ||
		die "$m.ko is not built for $release (the host's kernel)"
	grep -aq "^vermagic=$grelease " <(strings "$out/tiercopy-generic/$m.ko") ||
		die "the generic $m.ko is not built for $grelease"
done
[ "$(cat "$out/tiercopy-generic/dma-engine")" = y ] ||
	die "$grelease has no dmaengine: the tiercopy scenarios need it"

scripts/debian-backports.sh "$out/qemu" qemu-system-x86 qemu-system-data qemu-system-common seabios >/dev/null ||
	die "cannot fetch QEMU from bookworm-backports"
"$out/qemu/usr/bin/qemu-system-x86_64" --version >/dev/null ||
	die "the unpacked QEMU does not run (are qemu-system-x86's libraries installed?)"

log "static tiervisor, tierbench and guest-init (release, crt-static)"
RUSTFLAGS="-C target-feature=+crt-static" CARGO_TARGET_DIR=$out/cargo \
	cargo build --release --locked --quiet --target "$target" \
	-p vmm --bin tiervisor -p bench --bin tierbench -p tiered-host --bin guest-init
bin=$out/cargo/$target/release
# The tracking tests (vmm/tests/tracking), for the damon scenario: DAMON
# can be owned only in the tiered host.
log "static tracking tests"
tracking=$(RUSTFLAGS="-C target-feature=+crt-static" CARGO_TARGET_DIR=$out/cargo \
	cargo test --release --locked --quiet --no-run --target "$target" \
	-p vmm --test tracking --message-format=json |
	grep '"kind":\["test"\]' | grep '"name":"tracking"' |
	sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -n1)
[ -x "$tracking" ] || die "no tracking test binary"

# Packs directory $1 into the gzipped newc archive $2, replacing $2 only
# when the bytes differ.
pack() {
	local stage=$1 archive=$2
	find "$stage" -exec touch -h -d @0 {} +
	(cd "$stage" && find . -print0 | LC_ALL=C sort -z |
		cpio --null -o -H newc --reproducible --owner=0:0 --quiet) |
		gzip -n -1 >"$archive.new"
	if cmp -s "$archive.new" "$archive"; then
		rm "$archive.new"
	else
		mv "$archive.new" "$archive"
		log "packed ${archive##*/} ($(du -k "$archive" | cut -f1) KiB)"
	fi
}

# Copies module $1 (a path under the kernel's module tree, without .ko)
# into directory $2, uncompressed (6.12 ships them as .ko.xz; busybox
# insmod takes plain ELF), from module tree $3 (the cloud kernel's by
# default).
module() {
	local m=$1 dir=$2 tree=${3:-$modules}
	if [ -f "$tree/$m.ko" ]; then
		cp "$tree/$m.ko" "$dir/"
	elif [ -f "$tree/$m.ko.xz" ]; then
		xz -dc "$tree/$m.ko.xz" >"$dir/${m##*/}.ko"
	else
		die "module $m missing from $tree"
	fi
}

stage=$(mktemp -d "$out/.stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT

# The guest: /init, a console node (the kernel opens /dev/console
# before init runs, so it must exist in the archive), and the modules
# its init loads to watch the ACPI power button (button, evdev).
mkdir -p "$stage/guest/dev" "$stage/guest/lib/modules"
objcopy --strip-debug "$bin/guest-init" "$stage/guest/init"
mknod -m 600 "$stage/guest/dev/console" c 5 1
for m in drivers/acpi/button drivers/input/evdev; do
	module "$m" "$stage/guest/lib/modules"
done
pack "$stage/guest" "$out/guest.cpio.gz"

for k in "$vmlinuz=bzImage" "$gvmlinuz=bzImage-generic"; do
	cp "${k%=*}" "$out/${k#*=}.new"
	cmp -s "$out/${k#*=}.new" "$out/${k#*=}" && rm "$out/${k#*=}.new" || mv "$out/${k#*=}.new" "$out/${k#*=}"
done

# The host.
h=$stage/host
mkdir -p "$h/bin" "$h/lib/modules" "$h/nested/scenarios" "$h/guest" "$h/dev"
cp "$busybox" "$h/bin/busybox"
for b in tiervisor tierbench; do
	objcopy --strip-debug "$bin/$b" "$h/bin/$b"
done
objcopy --strip-debug "$tracking" "$h/bin/tracking-tests"
# Each kernel's modules, and the order /init loads them in (the generic
# kernel's kvm-amd needs ccp, which the cloud kernel builds in).
kernel_modules() {
	local rel=$1 tree=$2 m
	shift 2
	mkdir -p "$h/lib/modules/$rel"
	: >"$h/lib/modules/$rel/load"
	for m in "$@"; do
		module "$m" "$h/lib/modules/$rel" "$tree"
		echo "${m##*/}" >>"$h/lib/modules/$rel/load"
	done
}
kvm_nvdimm="arch/x86/kvm/kvm-amd drivers/nvdimm/libnvdimm drivers/acpi/nfit/nfit \
	drivers/nvdimm/nd_btt drivers/nvdimm/nd_pmem drivers/dax/device_dax drivers/dax/dax_pmem \
	drivers/dax/kmem"
# shellcheck disable=SC2086 # the list splits on purpose
kernel_modules "$release" "$modules" virt/lib/irqbypass arch/x86/kvm/kvm $kvm_nvdimm
# shellcheck disable=SC2086
kernel_modules "$grelease" "$gmodules" virt/lib/irqbypass arch/x86/kvm/kvm \
	drivers/crypto/ccp/ccp $kvm_nvdimm
mkdir -p "$h/lib/modules/access-log"
cp "$out/access-log/kvm.ko" "$out/access-log/kvm-amd.ko" "$h/lib/modules/access-log/"
cp "$out/access-log/kvm-access-log-test" "$h/bin/kvm-access-log-test"
for k in "$release=tiercopy" "$grelease=tiercopy-generic"; do
	mkdir -p "$h/lib/modules/${k%=*}/tiercopy"
	cp "$out/${k#*=}/tiercopy.ko" "$out/${k#*=}/tiercopy-testdma.ko" "$h/lib/modules/${k%=*}/tiercopy/"
done
# The self-test is user space: one binary for both kernels.
cp "$out/tiercopy/tiercopy-test" "$h/bin/tiercopy-test"
cp tests/nested/host/init "$h/init"
cp tests/nested/host/lib.sh "$h/nested/"
cp tests/nested/scenarios/*.sh "$h/nested/scenarios/"
cp "$out/bzImage" "$h/guest/bzImage"
cp "$out/guest.cpio.gz" "$h/guest/initramfs.cpio.gz"
mknod -m 600 "$h/dev/console" c 5 1
pack "$h" "$out/host.cpio.gz"

echo "$out"
