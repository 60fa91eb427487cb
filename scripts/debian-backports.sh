#!/usr/bin/env bash
# Fetches packages from Debian's bookworm-backports suite and unpacks them
# (dpkg-deb -x) into one directory, without touching the machine's own apt
# sources: apt runs with a private configuration under target/apt-bpo that
# names only the machine's own mirror and that suite. Nothing is installed;
# the packages' dependencies must already be met by the system (the
# caller's job).
#
# Cached: DEST/.packages lists the unpacked "package=version" lines, and a
# set whose candidates have not changed is not fetched again. With no apt
# answer at all, an existing DEST is kept (with a warning). Prints DEST's
# absolute path on stdout.
#
# Usage: scripts/debian-backports.sh DEST PACKAGE...
#   A PACKAGE written ^META stands for the package that metapackage META
#   pins with "Depends: PACKAGE (= VERSION)" (^linux-image-cloud-amd64 is
#   the suite's current cloud kernel), so callers need not name versions.
# Called by tests/nested/build.sh for the tiered host's QEMU and kernel.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'debian-backports: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

[ $# -ge 2 ] || die "usage: scripts/debian-backports.sh DEST PACKAGE..."
dest=$(realpath -m "$1")
shift
for tool in apt-get apt-cache dpkg-deb realpath; do
    command -v "$tool" >/dev/null || die "$tool not found: this needs a Debian (or derived) host"
done

apt_dir=$PWD/target/apt-bpo
mkdir -p "$apt_dir/lists/partial" "$apt_dir/etc" "$apt_dir/cache/archives/partial"
# The machine's own mirror (deb822 or one-line sources), else Debian's.
uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$uri" ] || uri=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$uri" ] || uri=http://deb.debian.org/debian
printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uri" >"$apt_dir/etc/bpo.sources"
apt_opts=(
    -o Dir::Etc::SourceList=/dev/null
    -o "Dir::Etc::SourceParts=$apt_dir/etc"
    -o "Dir::State::Lists=$apt_dir/lists"
    -o "Dir::Cache=$apt_dir/cache"
    -o APT::Sandbox::User=root
)

# "package=version" for each package's candidate in the suite.
wanted=()
if apt-get "${apt_opts[@]}" update -qq >&2; then
    for pkg in "$@"; do
        if [ "${pkg#^}" != "$pkg" ]; then
            meta=${pkg#^}
            pkg=$(apt-cache "${apt_opts[@]}" show --no-all-versions "$meta" 2>/dev/null |
                sed -n 's/^Depends: \([^ ,]*\) *(= [^)]*).*/\1/p' | head -n1)
            [ -n "$pkg" ] || die "bookworm-backports has no metapackage $meta pinning one package"
        fi
        version=$(apt-cache "${apt_opts[@]}" policy "$pkg" 2>/dev/null |
            sed -n 's/^ *Candidate: //p' | head -n1)
        case $version in
        '' | '(none)') die "bookworm-backports has no $pkg" ;;
        esac
        wanted+=("$pkg=$version")
    done
fi

if [ ${#wanted[@]} -eq 0 ]; then
    [ -s "$dest/.packages" ] || die "cannot reach bookworm-backports at $uri, and nothing is cached in $dest"
    log "warning: cannot reach bookworm-backports; using the cached $(tr '\n' ' ' <"$dest/.packages")"
    printf '%s\n' "$dest"
    exit 0
fi

if [ -s "$dest/.packages" ] && [ "$(cat "$dest/.packages")" = "$(printf '%s\n' "${wanted[@]}")" ]; then
    printf '%s\n' "$dest"
    exit 0
fi

# Download and unpack through a temporary directory, so that an
# interrupted run leaves no half-unpacked tree behind.
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$(dirname "$dest")/.backports.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log "downloading ${wanted[*]}"
(cd "$tmp" && apt-get "${apt_opts[@]}" download -q "${wanted[@]}" >&2) ||
    die "apt-get download ${wanted[*]} failed"
for deb in "$tmp"/*.deb; do
    dpkg-deb -x "$deb" "$tmp/root"
done
printf '%s\n' "${wanted[@]}" >"$tmp/root/.packages"
rm -rf "$dest"
mv "$tmp/root" "$dest"
log "unpacked $(du -sk "$dest" | cut -f1) KiB into $dest"
printf '%s\n' "$dest"
