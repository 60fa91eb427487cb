#!/usr/bin/env bash
# Runs the kernel's scripts/checkpatch.pl (from the linux-source-6.12 that
# build.sh fetched, extracted under target/tiercopy/FLAVOUR/src/) on tiercopy and
# tiercopy-testdma: the modules' sources and Kbuild files --strict, the
# uapi header (its comments follow the ABI's spelling) and the self-test
# (user space, stdint types) in the default mode. Exits nonzero on any
# error, warning or --strict check, except checkpatch's reminder that new
# files might need a MAINTAINERS entry (out of tree: none to add), which
# it reports and ignores.
#
# Usage: host-kernel/tiercopy/check.sh   (after build.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$here/../../target/tiercopy

log() { printf 'tiercopy check: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

checkpatch=$(ls "$work"/*/src/linux-source-*/scripts/checkpatch.pl 2>/dev/null | head -n1)
[ -n "$checkpatch" ] ||
	die "no checkpatch.pl under $work/*/src: run host-kernel/tiercopy/build.sh DEST first"
command -v perl >/dev/null || die "perl not found"

failed=0
run() {
	local what=$1 out bad
	shift
	out=$("$checkpatch" --no-tree --show-types "$@" 2>&1) || true
	printf '%s\n' "$out"
	bad=$(printf '%s\n' "$out" | grep -E '^(ERROR|WARNING|CHECK):' |
		grep -cv '^WARNING:FILE_PATH_CHANGES:' || true)
	if [ "$bad" -ne 0 ]; then
		log "$what: $bad problem(s)"
		failed=1
	else
		log "$what: clean"
	fi
}

run tiercopy/tiercopy.c --strict -f "$here/tiercopy.c"
run tiercopy/Kbuild --strict -f "$here/Kbuild"
run tiercopy-testdma/tiercopy-testdma.c --strict -f "$here/../tiercopy-testdma/tiercopy-testdma.c"
run tiercopy-testdma/Kbuild --strict -f "$here/../tiercopy-testdma/Kbuild"
run include/uapi/linux/tiercopy.h -f "$here/include/uapi/linux/tiercopy.h"
run selftest/tiercopy_test.c -f "$here/selftest/tiercopy_test.c"
exit "$failed"
