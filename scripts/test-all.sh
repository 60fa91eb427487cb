#!/usr/bin/env bash
# Runs every test suite of tiervisor, installing what they need first.
# This is the README's test command; .ci/run calls it unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

# Debian packages the suites need (none beyond the build toolchain yet; the
# tiered-host suite adds qemu and a Debian kernel).
need_pkgs=()
command -v cc >/dev/null || need_pkgs+=(gcc)
command -v git >/dev/null || need_pkgs+=(git)
if [ ${#need_pkgs[@]} -gt 0 ]; then
    log "installing ${need_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_pkgs[@]}"
fi
if ! command -v cargo >/dev/null; then
    echo "error: cargo (Rust toolchain) is required: https://rustup.rs" >&2
    exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true

if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
    echo "error: /dev/kvm is not accessible; the KVM suites need it" >&2
    exit 1
fi

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

log "cargo test (unit and KVM end-to-end suites)"
cargo test --workspace --locked -- --test-threads=2
