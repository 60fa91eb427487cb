#!/usr/bin/env bash
# Installs tiervisor, tierctl and tierbench (release builds) into
# PREFIX/bin: ~/.cargo/bin by default (cargo's own root, or $CARGO_HOME).
# Usage: scripts/install.sh [PREFIX] [-- extra cargo install options]
set -euo pipefail
cd "$(dirname "$0")/.."
root=()
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  root=(--root "$(realpath -m "$1")")
  shift
fi
[ "${1:-}" = "--" ] && shift
for crate in vmm api crates/bench; do
  echo "[install] $crate" >&2
  cargo install --locked --quiet --force --path "$crate" "${root[@]}" "$@"
done
bin="${root[1]:-${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}}/bin"
echo "installed tiervisor, tierctl and tierbench into $bin" >&2
case ":$PATH:" in
  *":$bin:"*) ;;
  *) echo "add it to PATH: export PATH=\"$bin:\$PATH\"" >&2 ;;
esac
