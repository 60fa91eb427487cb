#!/usr/bin/env bash
# Runs a command while a plain busy loop spins on every core, and stops
# the loops when it ends: the test command must pass on a busy machine
# (docs/testing.md, "Under load").
#
# Usage: scripts/under-load.sh COMMAND [ARG...]
#   e.g. scripts/under-load.sh ./scripts/test-all.sh
# Exits with COMMAND's status.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; }

hogs=()
stop_hogs() {
    [ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null || true
    wait "${hogs[@]}" 2>/dev/null || true
}
trap stop_hogs EXIT
for _ in $(seq "$(nproc)"); do
    bash -c 'while :; do :; done' &
    hogs+=($!)
done
echo "under-load: ${#hogs[@]} busy loops (pids ${hogs[*]})" >&2
rc=0
"$@" || rc=$?
stop_hogs
trap - EXIT
echo "under-load: '$*' exited $rc" >&2
exit "$rc"
