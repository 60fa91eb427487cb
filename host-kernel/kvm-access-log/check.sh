#!/usr/bin/env bash
# Runs the kernel's scripts/checkpatch.pl (from the linux-source-6.12 that
# build.sh fetched and extracted under target/kvm-access-log/) on the
# access-log patch, on the files it adds (from build.sh's patched tree),
# on the ABI header and on the self-test. Exits nonzero on any error or
# warning (or --strict check), except checkpatch's reminder that new files might need a
# MAINTAINERS entry (the patch is out of tree; arch/x86/kvm/ is KVM/x86's
# already), which it reports and ignores.
#
# Usage: host-kernel/kvm-access-log/check.sh   (after build.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$here/../../target/kvm-access-log

log() { printf 'kvm-access-log check: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

checkpatch=$(ls "$work"/src/linux-source-*/scripts/checkpatch.pl 2>/dev/null | head -n1)
[ -n "$checkpatch" ] ||
	die "no checkpatch.pl under $work/src: run host-kernel/kvm-access-log/build.sh DEST first"
command -v perl >/dev/null || die "perl not found"
tree=$work/build
[ -f "$tree/arch/x86/kvm/access_log.c" ] ||
	die "no patched tree in $tree: run host-kernel/kvm-access-log/build.sh DEST first"

failed=0
# Prints checkpatch's report on "$@" and counts it as failed unless the
# only warning is the MAINTAINERS reminder. The patch and the kernel files
# are checked --strict; the uapi header (its ABI is spelled "(1U << N)":
# BIT() is not uapi) and the self-test (user space, stdint types like
# tools/testing/selftests/kvm) in the default mode.
run() {
	local what=$1 out
	shift
	out=$("$checkpatch" --no-tree --show-types "$@" 2>&1) || true
	printf '%s\n' "$out"
	local bad
	bad=$(printf '%s\n' "$out" | grep -E '^(ERROR|WARNING|CHECK):' |
		grep -cv '^WARNING:FILE_PATH_CHANGES:' || true)
	if [ "$bad" -ne 0 ]; then
		log "$what: $bad problem(s)"
		failed=1
	elif printf '%s\n' "$out" | grep -q '^WARNING:FILE_PATH_CHANGES:'; then
		log "$what: clean but for the MAINTAINERS reminder (README.md says why it stays)"
	else
		log "$what: clean"
	fi
}

for p in "$here"/0*.patch; do
	run "${p##*/}" --strict "$p"
done
for f in arch/x86/kvm/access_log.c arch/x86/kvm/access_log.h; do
	run "$f" --strict -f "$tree/$f"
done
run include/uapi/linux/kvm_access_log.h -f "$tree/include/uapi/linux/kvm_access_log.h"
run "selftest/access_log_test.c" -f "$here/selftest/access_log_test.c"
cmp -s "$tree/include/uapi/linux/kvm_access_log.h" "$here/include/uapi/linux/kvm_access_log.h" ||
	{ log "the patch's kvm_access_log.h differs from include/uapi/linux/kvm_access_log.h"; failed=1; }
exit "$failed"
