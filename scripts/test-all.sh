#!/usr/bin/env bash
# Runs every test suite of tiervisor, installing what they need first.
# This is the README's test command; .ci/run calls it unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

# Debian packages the suites need: the build toolchain, acpica-tools, and
# for the tiered host qemu-system-x86, busybox-static, cpio and xz-utils
# (and make, patch and gcc-12 for its access-log KVM modules).
# The Linux boot tests fetch a Debian kernel with scripts/debian-kernel.sh;
# the tiered host fetches its kernel and QEMU from bookworm-backports
# (scripts/debian-backports.sh).
need_pkgs=()
command -v cc >/dev/null || need_pkgs+=(gcc)
command -v git >/dev/null || need_pkgs+=(git)
# The docs' API examples (scripts/api-examples.py) run curl as written.
command -v curl >/dev/null || need_pkgs+=(curl)
# The API contract test runs schemathesis (PyPI) in a virtualenv.
command -v python3 >/dev/null || need_pkgs+=(python3)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_pkgs+=(python3-venv)
# iasl checks the ACPI tables Linux guests get.
command -v iasl >/dev/null || need_pkgs+=(acpica-tools)
if [ ${#need_pkgs[@]} -gt 0 ]; then
    log "installing ${need_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_pkgs[@]}"
fi
# The tiered host (tests/nested): QEMU, a static busybox, cpio and xz (the
# 6.12 kernel's modules are .ko.xz), without the GUI packages QEMU
# recommends.
nested_pkgs=()
command -v qemu-system-x86_64 >/dev/null || nested_pkgs+=(qemu-system-x86)
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || nested_pkgs+=(busybox-static)
command -v cpio >/dev/null || nested_pkgs+=(cpio)
command -v xz >/dev/null || nested_pkgs+=(xz-utils)
# The access-log KVM modules (host-kernel/kvm-access-log/build.sh): kbuild
# with the compiler Debian's 6.12 kernel was built with, and patch (both
# in build-essential on bookworm; module BTF is off, so no pahole).
command -v make >/dev/null || nested_pkgs+=(make)
command -v patch >/dev/null || nested_pkgs+=(patch)
command -v x86_64-linux-gnu-gcc-12 >/dev/null || nested_pkgs+=(gcc-12)
if [ ${#nested_pkgs[@]} -gt 0 ]; then
    log "installing ${nested_pkgs[*]} (tiered-host tests)"
    export DEBIAN_FRONTEND=noninteractive
    [ ${#need_pkgs[@]} -gt 0 ] || apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${nested_pkgs[@]}"
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

# The hugetlb migration suites need 2 MiB pages in the host's pool (128
# at most at once; reserve a margin for two suites running side by side).
want_hugepages=256
free_hugepages=$(awk '/^HugePages_Free:/ {print $2}' /proc/meminfo)
if [ "${free_hugepages:-0}" -lt "$want_hugepages" ]; then
    total=$(cat /proc/sys/vm/nr_hugepages)
    log "reserving 2 MiB hugepages for the hugetlb suites"
    echo $((total + want_hugepages - free_hugepages)) >/proc/sys/vm/nr_hugepages ||
        echo "warning: cannot grow the hugetlb pool; the hugetlb suites will fail" >&2
fi

# Every crate of the lockfile, for every target, so that nothing later
# (cargo metadata included) needs the network or a warm cache.
log "cargo fetch (every crate of Cargo.lock)"
cargo fetch --locked

# The stages below all run, whatever fails; each is summed up at the end
# and the script fails if any did.
summary=()
failed=0
stage() {
    local name=$1
    shift
    log "$name"
    local started=$SECONDS rc=0
    "$@" || rc=$?
    local took=$((SECONDS - started))
    if [ "$rc" -eq 0 ]; then
        summary+=("$(printf 'PASS  %5ss  %s' "$took" "$name")")
    else
        summary+=("$(printf 'FAIL  %5ss  %s (exit %s)' "$took" "$name" "$rc")")
        failed=$((failed + 1))
    fi
}

stage "cargo fmt --check" cargo fmt --all -- --check

stage "cargo clippy (warnings are errors)" \
    cargo clippy --workspace --all-targets --locked -- -D warnings

# No file imports a file that imports it back (docs/architecture.md).
stage "no file-level import loops" \
    python3 scripts/import-loops.py vmm api tiering crates/*/

# The Linux boot tests boot the Debian cloud kernel: its bzImage, and the
# vmlinux ELF inside it, which boots through its PVH entry without the
# in-guest decompressor (slow here: guest CPL0 code is emulated).
log "Debian cloud kernel for the Linux boot tests"
if ! TIERVISOR_TEST_KERNEL=$(scripts/debian-kernel.sh); then
    echo "error: cannot fetch the Debian cloud kernel (scripts/debian-kernel.sh);" \
        "the Linux boot tests need it" >&2
    exit 1
fi
TIERVISOR_TEST_VMLINUX="$(dirname "$TIERVISOR_TEST_KERNEL")/vmlinux-${TIERVISOR_TEST_KERNEL##*/vmlinuz-}"
if [ ! -s "$TIERVISOR_TEST_VMLINUX" ] || [ "$TIERVISOR_TEST_VMLINUX" -ot "$TIERVISOR_TEST_KERNEL" ]; then
    cargo run --quiet --locked -p kernel-image --bin extract-vmlinux -- \
        "$TIERVISOR_TEST_KERNEL" "$TIERVISOR_TEST_VMLINUX"
fi
export TIERVISOR_TEST_KERNEL TIERVISOR_TEST_VMLINUX

# --no-fail-fast: one failing test binary must not hide the others.
stage "cargo test (unit and KVM end-to-end suites)" \
    cargo test --workspace --locked --no-fail-fast -- --test-threads=2

# The README's install command, into a scratch root, reusing the test
# build (--debug --target-dir target): every binary installs and runs.
install_check() {
    local root=target/install-check
    rm -rf "$root"
    scripts/install.sh "$root" -- --debug --target-dir target || return
    local bin
    for bin in tiervisor tierctl tierbench; do
        "$root/bin/$bin" --version || return
    done
}
stage "install (scripts/install.sh: tiervisor, tierctl, tierbench)" install_check

stage "README walkthrough, as written, with the installed binaries" \
    python3 scripts/walkthrough.py target/install-check/bin

stage "docs/api.md examples, as written, with the installed binaries" \
    python3 scripts/api-examples.py target/install-check/bin

stage "API contract test (schemathesis against a live tiervisor serve)" \
    scripts/api-contract.sh

stage "Prometheus scrapes tiervisor serve over TCP with its token" scripts/prometheus-check.sh

nested_scenarios() {
    local dir
    dir=$(tests/nested/build.sh) || return
    TIERVISOR_NESTED_DIR=$dir \
        cargo test --locked -p tiered-host --test scenarios --test campaign \
        --no-fail-fast -- --test-threads=1
}
stage "tiered host (QEMU with NUMA, HMAT and device-DAX): build, scenarios, short integrity loop" \
    nested_scenarios

log "summary"
printf '%s\n' "${summary[@]}"
echo "stages: $((${#summary[@]} - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
