#!/usr/bin/env bash
# Builds tiercopy and its test DMA provider into DEST:
#
#   tiercopy.ko           /dev/tiercopy (tiercopy.c here), batched copies
#                         between user addresses by kernel threads or
#                         dmaengine memcpy channels
#   tiercopy-testdma.ko   tiercopy test DMA provider — for tests only
#                         (../tiercopy-testdma/)
#   tiercopy-test         the self-test (selftest/tiercopy_test.c), static
#
# Both modules are built out of tree with kbuild against the tiered host's
# kernel headers (Debian's 6.12 kernel from bookworm-backports, fetched by
# ../headers.sh like kvm-access-log's; FLAVOUR cloud-amd64, the default,
# or amd64, the generic kernel, which has dmaengine), so that their
# vermagic matches that kernel; it is checked. When the kernel has no dmaengine
# (CONFIG_DMA_ENGINE unset: the cloud kernel has no CONFIG_DMADEVICES),
# tiercopy.ko builds against dmaengine's stubs (no channel is ever found:
# DMA mode falls back to the threads) and tiercopy-testdma.ko is still
# built, as a compile check, with its dmaengine symbols unresolved: it
# then cannot load there (DEST/dma-engine says "n").
#
# Cached: DEST/.inputs holds a digest of the package versions, the
# sources and this script; when it matches, nothing is rebuilt. Progress
# goes to stderr.
#
# Usage: host-kernel/tiercopy/build.sh DEST [FLAVOUR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
root=$PWD

log() { printf 'tiercopy: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

[ $# -eq 1 ] || [ $# -eq 2 ] || die "usage: host-kernel/tiercopy/build.sh DEST [cloud-amd64|amd64]"
dest=$(realpath -m "$1")
flavour=${2:-cloud-amd64}
case $flavour in
cloud-amd64 | amd64) ;;
*) die "unknown kernel flavour '$flavour' (cloud-amd64 or amd64)" ;;
esac
for tool in make gcc tar xz strip strings sha256sum realpath; do
	command -v "$tool" >/dev/null || die "$tool not found (build-essential, xz-utils)"
done
work=$root/target/tiercopy/$flavour
testdma=$here/../tiercopy-testdma
selftest=$here/selftest/tiercopy_test.c
# shellcheck source=../headers.sh
. "$here/../headers.sh"

fetch_headers "$work" "$flavour"

inputs=$(cat "$pkgs/.packages" "$here/tiercopy.c" "$here/Kbuild" "$here/include/uapi/linux/tiercopy.h" \
	"$testdma/tiercopy-testdma.c" "$testdma/Kbuild" "$selftest" "$here/build.sh" "$here/../headers.sh" |
	sha256sum | cut -d' ' -f1)
if [ "$(cat "$dest/.inputs" 2>/dev/null)" = "$inputs" ] && [ -f "$dest/tiercopy.ko" ] &&
	[ -f "$dest/tiercopy-testdma.ko" ] && [ -x "$dest/tiercopy-test" ]; then
	log "up to date in $dest"
	exit 0
fi

if grep -q '^CONFIG_DMA_ENGINE=y' "$hdr/.config"; then
	dma_engine=y
else
	dma_engine=n
	log "$release has no CONFIG_DMA_ENGINE: tiercopy's DMA back end finds no channel there, and tiercopy-testdma.ko is only compile-checked (it cannot load)"
fi

# Copies of the sources: kbuild writes its objects next to them.
tree=$work/build
rm -rf "$tree"
mkdir -p "$tree"
cp -a "$here/tiercopy.c" "$here/Kbuild" "$here/include" "$tree/"
mkdir -p "$tree/testdma"
cp -a "$testdma/tiercopy-testdma.c" "$testdma/Kbuild" "$tree/testdma/"

jobs=$(nproc 2>/dev/null || echo 2)
# build NAME DIR [MAKE ARGS]: NAME.ko from DIR; a compiler warning fails.
build() {
	local name=$1 dir=$2
	shift 2
	log "building $name.ko against $release"
	make -s -C "$hdr" M="$dir" -j"$jobs" CONFIG_DEBUG_INFO_BTF_MODULES= "$@" modules \
		>"$work/make-$name.log" 2>&1 || {
		tail -n 40 "$work/make-$name.log" >&2
		die "the module build failed (whole log: $work/make-$name.log)"
	}
	! grep -i 'warning:' "$work/make-$name.log" | grep -v 'modpost: .* undefined!' >&2 ||
		die "the compiler warned (whole log: $work/make-$name.log)"
}
build tiercopy "$tree"
if [ "$dma_engine" = y ]; then
	build tiercopy-testdma "$tree/testdma"
else
	# Links with dmaengine's symbols unresolved: compile-checked only.
	build tiercopy-testdma "$tree/testdma" KBUILD_MODPOST_WARN=1
fi

stage=$(mktemp -d "$work/.out.XXXXXX")
trap 'rm -rf "$stage"' EXIT
for ko in "$tree/tiercopy.ko" "$tree/testdma/tiercopy-testdma.ko"; do
	[ -f "$ko" ] || die "no ${ko##*/} after the build"
	strip --strip-debug -o "$stage/${ko##*/}" "$ko"
	check_vermagic "$stage/${ko##*/}"
done

log "building the self-test"
gcc -static -O2 -Wall -Wextra -Werror -pthread -I "$here/include/uapi" \
	-o "$stage/tiercopy-test" "$selftest" ||
	die "the self-test does not build (static: needs libc6-dev's libc.a)"
strip "$stage/tiercopy-test"
echo "$dma_engine" >"$stage/dma-engine"

mkdir -p "$dest"
for f in tiercopy.ko tiercopy-testdma.ko tiercopy-test dma-engine; do
	cmp -s "$stage/$f" "$dest/$f" || cp "$stage/$f" "$dest/$f"
done
echo "$inputs" >"$dest/.inputs"
log "built $(du -k "$dest/tiercopy.ko" | cut -f1) KiB tiercopy.ko, $(du -k "$dest/tiercopy-testdma.ko" | cut -f1) KiB tiercopy-testdma.ko and the self-test into $dest (dmaengine: $dma_engine)"
