#!/usr/bin/env bash
# Builds the KVM access-log modules and their self-test into DEST:
#
#   kvm.ko, kvm-amd.ko     Debian's 6.12 KVM (linux-source-6.12 from
#                          bookworm-backports) with the access-log patch
#                          (0001-*.patch here), built out of tree with kbuild
#                          against the cloud kernel's headers, so that their
#                          vermagic and symbol CRCs match that kernel
#                          (the tiered host's: tests/nested/build.sh)
#   kvm-access-log-test    the self-test (selftest/access_log_test.c),
#                          static, built with the host's gcc
#
# The packages come through scripts/debian-backports.sh (the machine's apt
# sources are not touched): the headers that ^linux-headers-cloud-amd64
# pins, their -common and linux-kbuild packages, and linux-source-6.12 of
# the same version (../headers.sh, shared with tiercopy). Only
# arch/x86/kvm, virt/kvm and virt/lib (and checkpatch, for check.sh) are
# extracted, under target/kvm-access-log/.
#
# Cached: DEST/.inputs holds a digest of the package versions, the patch,
# the ABI header, the self-test and this script; when it matches, nothing
# is rebuilt. Progress goes to stderr.
#
# Needs (besides build-essential): xz-utils, and libelf1 for kbuild's
# objtool/modpost (scripts/test-all.sh installs both). Module BTF is
# turned off on the make line, so pahole is not needed.
#
# Usage: host-kernel/kvm-access-log/build.sh DEST
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
root=$PWD

log() { printf 'kvm-access-log: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

[ $# -eq 1 ] || die "usage: host-kernel/kvm-access-log/build.sh DEST"
dest=$(realpath -m "$1")
for tool in make gcc patch tar xz strip sha256sum realpath; do
	command -v "$tool" >/dev/null || die "$tool not found (build-essential, xz-utils)"
done

work=$root/target/kvm-access-log
patches=("$here"/0*.patch)
[ -f "${patches[0]}" ] || die "no patch in $here"
header=$here/include/uapi/linux/kvm_access_log.h
selftest=$here/selftest/access_log_test.c

# 1. The packages (headers, kbuild, linux-source of the same version) and
# checkpatch, through ../headers.sh (shared with tiercopy).
# shellcheck source=../headers.sh
. "$here/../headers.sh"
fetch_headers "$work"

inputs=$(cat "$pkgs/.packages" "${patches[@]}" "$header" "$selftest" "$here/build.sh" "$here/../headers.sh" |
	sha256sum | cut -d' ' -f1)
if [ "$(cat "$dest/.inputs" 2>/dev/null)" = "$inputs" ] &&
	[ -f "$dest/kvm.ko" ] && [ -f "$dest/kvm-amd.ko" ] && [ -x "$dest/kvm-access-log-test" ]; then
	log "up to date in $dest"
	exit 0
fi

# 2. The KVM sources, extracted once per linux-source.
src=$work/kvm-src/linux-source-$series
if [ "$(cat "$work/kvm-src/.packages" 2>/dev/null)" != "linux-source-$series=$version" ]; then
	log "extracting arch/x86/kvm, virt/kvm and virt/lib from linux-source-$series $version"
	rm -rf "$work/kvm-src"
	mkdir -p "$work/kvm-src"
	tar -xJf "$pkgs/usr/src/linux-source-$series.tar.xz" -C "$work/kvm-src" \
		"linux-source-$series/arch/x86/kvm" "linux-source-$series/virt/kvm" \
		"linux-source-$series/virt/lib" ||
		die "cannot extract the KVM sources from linux-source-$series"
	echo "linux-source-$series=$version" >"$work/kvm-src/.packages"
fi

# 3. A patched copy.
tree=$work/build
rm -rf "$tree"
mkdir -p "$tree"
cp -a "$src/arch" "$src/virt" "$tree/"
for p in "${patches[@]}"; do
	log "applying ${p##*/}"
	patch -p1 -s -d "$tree" --no-backup-if-mismatch <"$p" ||
		die "${p##*/} does not apply to linux-source-$series $version"
done
cmp -s "$tree/include/uapi/linux/kvm_access_log.h" "$header" ||
	die "the patch's include/uapi/linux/kvm_access_log.h differs from $header"

# Out-of-tree tweaks: the kvm Makefile names its own directory and
# virt/kvm through $(srctree) (the headers tree here); trace.h's
# TRACE_INCLUDE_PATH (../../arch/x86/kvm) resolves from an -I two levels
# down (virt/kvm); the ABI header is not in the headers tree.
sed -i -e 's|\$(srctree)/arch/x86/kvm|$(src)|' \
	-e 's|include \$(srctree)/virt/kvm/Makefile.kvm|include $(src)/../../../virt/kvm/Makefile.kvm|' \
	"$tree/arch/x86/kvm/Makefile"
printf '\nccflags-y += -I%s -I%s\n' "$tree/virt/kvm" "$tree/include/uapi" >>"$tree/arch/x86/kvm/Makefile"

# 4. kvm.ko and kvm-amd.ko (kvm-intel is not built). No module BTF: it
# would need pahole, and nothing here uses it.
log "building kvm.ko and kvm-amd.ko against $release"
jobs=$(nproc 2>/dev/null || echo 2)
make -s -C "$hdr" M="$tree/arch/x86/kvm" -j"$jobs" \
	CONFIG_KVM_INTEL= CONFIG_DEBUG_INFO_BTF_MODULES= modules >"$work/make.log" 2>&1 || {
	tail -n 40 "$work/make.log" >&2
	die "the module build failed (whole log: $work/make.log)"
}
grep -i 'warning:' "$work/make.log" >&2 || true

stage=$(mktemp -d "$work/.out.XXXXXX")
trap 'rm -rf "$stage"' EXIT
for m in kvm kvm-amd; do
	ko=$tree/arch/x86/kvm/$m.ko
	[ -f "$ko" ] || die "no $m.ko after the build"
	strip --strip-debug -o "$stage/$m.ko" "$ko"
	check_vermagic "$stage/$m.ko"
done

# 5. The self-test.
log "building the self-test"
gcc -static -O2 -Wall -Wextra -Werror -I "$here/include/uapi" \
	-o "$stage/kvm-access-log-test" "$selftest" ||
	die "the self-test does not build (static: needs libc6-dev's libc.a)"
strip "$stage/kvm-access-log-test"

mkdir -p "$dest"
for f in kvm.ko kvm-amd.ko kvm-access-log-test; do
	cmp -s "$stage/$f" "$dest/$f" || cp "$stage/$f" "$dest/$f"
done
echo "$inputs" >"$dest/.inputs"
log "built $(du -k "$dest/kvm.ko" | cut -f1) KiB kvm.ko, $(du -k "$dest/kvm-amd.ko" | cut -f1) KiB kvm-amd.ko and the self-test into $dest"
