#!/usr/bin/env bash
# Fetches the Debian cloud kernel (the package behind the
# linux-image-cloud-amd64 metapackage) with apt-get download, unpacks it
# with dpkg-deb -x into target/debian-kernel/PACKAGE_VERSION/ and prints
# the path of its vmlinuz (a bzImage) on stdout. Cached: a version already
# unpacked is not fetched again, and with no apt answer at all the newest
# unpacked one is used. Paths are absolute (cargo runs tests in their
# crate directories).
#
# Usage: scripts/debian-kernel.sh
#   DEBIAN_KERNEL_PACKAGE=linux-image-6.1.0-56-cloud-amd64 pins a package
#   (default: whatever linux-image-cloud-amd64 depends on).
# Called by scripts/test-all.sh for the Linux boot tests.
set -euo pipefail
cd "$(dirname "$0")/.."

meta=linux-image-cloud-amd64
cache=$PWD/target/debian-kernel

log() { printf 'debian-kernel: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

for tool in apt-get apt-cache dpkg-deb; do
    command -v "$tool" >/dev/null || die "$tool not found: this needs a Debian (or derived) host"
done

# The concrete kernel package and its candidate version, from apt's lists:
# prints "PACKAGE VERSION", or nothing when apt does not know the package.
# (apt-cache takes seconds here, as the images keep no package cache: the
# metapackage's "Depends: PACKAGE (= VERSION)" gives both in one call.)
resolve() {
    local pkg=${DEBIAN_KERNEL_PACKAGE:-} version=
    if [ -z "$pkg" ]; then
        read -r pkg version < <(apt-cache show --no-all-versions "$meta" 2>/dev/null |
            sed -n 's/^Depends: //p' | tr ',' '\n' |
            sed -n 's/^ *\(linux-image-[^ ]*\)\( *(= *\([^)]*\))\)\{0,1\}.*/\1 \3/p' |
            head -n1) || true
        [ -n "$pkg" ] || return 0
    fi
    if [ -z "$version" ]; then
        version=$(apt-cache show --no-all-versions "$pkg" 2>/dev/null |
            sed -n 's/^Version: //p' | head -n1) || true
    fi
    [ -n "$version" ] && printf '%s %s\n' "$pkg" "$version"
    return 0
}

# The vmlinuz in an unpacked package directory.
vmlinuz_in() {
    local found=("$1"/boot/vmlinuz-*)
    [ ${#found[@]} -eq 1 ] && [ -f "${found[0]}" ] || return 1
    printf '%s\n' "${found[0]}"
}

# Downloads and unpacks PACKAGE VERSION into DIR (through a temporary
# directory, so that an interrupted run leaves no half-unpacked kernel).
fetch() {
    local pkg=$1 version=$2 dir=$3 tmp status=0
    tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
    if (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$pkg=$version" >&2) &&
        dpkg-deb -x "$tmp"/*.deb "$tmp/root"; then
        if vmlinuz_in "$tmp/root" >/dev/null; then
            log "downloaded $(du -k "$tmp"/*.deb | cut -f1) KiB, unpacked $(du -sk "$tmp/root" | cut -f1) KiB"
            rm -rf "$dir"
            mv "$tmp/root" "$dir"
        else
            log "package $pkg has no /boot/vmlinuz-*"
            status=1
        fi
    else
        status=1
    fi
    rm -rf "$tmp"
    return "$status"
}

mkdir -p "$cache"
started=$SECONDS
target=$(resolve)
if [ -z "$target" ]; then
    log "apt does not know $meta${DEBIAN_KERNEL_PACKAGE:+ / $DEBIAN_KERNEL_PACKAGE}; running apt-get update"
    apt-get update -qq >&2 || log "warning: apt-get update failed"
    target=$(resolve)
fi
if [ -z "$target" ]; then
    # Offline, or no Debian archive: fall back on a kernel fetched before.
    newest=$(find "$cache" -mindepth 1 -maxdepth 1 -type d -name 'linux-image-*' |
        sort -V | tail -n1)
    if [ -z "${DEBIAN_KERNEL_PACKAGE:-}" ] && [ -n "$newest" ] &&
        vmlinuz=$(vmlinuz_in "$newest"); then
        log "warning: apt cannot resolve $meta; using the cached $newest"
        printf '%s\n' "$vmlinuz"
        exit 0
    fi
    die "apt cannot find ${DEBIAN_KERNEL_PACKAGE:-$meta} (is a Debian amd64 archive, e.g. bookworm main, in /etc/apt/sources.list?)"
fi

read -r pkg version <<<"$target"
dir="$cache/${pkg}_${version}"
if vmlinuz=$(vmlinuz_in "$dir"); then
    log "$pkg $version already unpacked"
    printf '%s\n' "$vmlinuz"
    exit 0
fi

log "fetching $pkg $version"
if ! fetch "$pkg" "$version" "$dir"; then
    # Stale lists name a version the mirror no longer has: refresh, retry.
    log "download failed; running apt-get update and retrying"
    apt-get update -qq >&2 || true
    target=$(resolve)
    [ -n "$target" ] || die "apt cannot find $meta after apt-get update"
    read -r pkg version <<<"$target"
    dir="$cache/${pkg}_${version}"
    fetch "$pkg" "$version" "$dir" || die "cannot download or unpack $pkg $version"
fi
vmlinuz=$(vmlinuz_in "$dir")
log "unpacked $pkg $version in $((SECONDS - started)) s"
printf '%s\n' "$vmlinuz"
