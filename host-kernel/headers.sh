# shellcheck shell=bash
# Sourced by the host-kernel build scripts (kvm-access-log/build.sh,
# tiercopy/build.sh): fetches the tiered host's kernel headers through
# scripts/debian-backports.sh (a private apt configuration; the machine's
# apt sources are untouched):
# the headers that ^linux-headers-FLAVOUR pins, their -common and
# linux-kbuild packages, and linux-source-6.12 of the same version (for
# scripts/checkpatch.pl). The .debs are shared through target/apt-bpo's
# cache.
#
# fetch_headers WORK [FLAVOUR] sets, from the repository root:
#   pkgs     the unpacked packages (WORK/pkgs; .packages lists them)
#   hdr      the headers tree to build against (make -C "$hdr" M=...)
#   release  the kernel release (6.12.95+deb12-FLAVOUR)
#   abi      6.12.95+deb12; series 6.12; version the packages' version
#   checkpatch  WORK/src/linux-source-SERIES/scripts/checkpatch.pl
# and checks that the compiler the kernel was built with is installed.
# Needs log and die from the caller.

# FLAVOUR is the Debian kernel flavour: cloud-amd64 (the default, the
# tiered host's kernel) or amd64 (the generic kernel, which has dmaengine).
fetch_headers() {
	local work=$1 flavour=${2:-cloud-amd64} meta pkgline hpkg cc common src
	meta=$(scripts/debian-backports.sh "$work/headers-meta" "^linux-headers-$flavour") ||
		die "cannot resolve ^linux-headers-$flavour in bookworm-backports"
	pkgline=$(grep '^linux-headers-' "$meta/.packages" | head -n1)
	hpkg=${pkgline%%=*}
	version=${pkgline#*=}
	release=${hpkg#linux-headers-}
	abi=${release%-"$flavour"}
	[ "$abi" != "$release" ] || die "unexpected headers package $hpkg"
	series=${abi%%+*}
	series=${series%.*}
	pkgs=$(scripts/debian-backports.sh "$work/pkgs" "$hpkg" "linux-headers-$abi-common" \
		"linux-kbuild-$abi" "linux-source-$series") ||
		die "cannot fetch the headers, kbuild and linux-source-$series"
	grep -qx "linux-source-$series=$version" "$pkgs/.packages" ||
		die "linux-source-$series is not $version like the headers"

	# checkpatch, extracted once per linux-source.
	src=$work/src
	checkpatch=$src/linux-source-$series/scripts/checkpatch.pl
	if [ "$(cat "$src/.packages" 2>/dev/null)" != "linux-source-$series=$version" ]; then
		log "extracting checkpatch from linux-source-$series $version"
		rm -rf "$src"
		mkdir -p "$src"
		tar -xJf "$pkgs/usr/src/linux-source-$series.tar.xz" -C "$src" \
			"linux-source-$series/scripts/checkpatch.pl" \
			"linux-source-$series/scripts/spelling.txt" \
			"linux-source-$series/scripts/const_structs.checkpatch" ||
			die "cannot extract checkpatch from linux-source-$series"
		echo "linux-source-$series=$version" >"$src/.packages"
	fi

	# The headers' Makefile includes the -common tree by absolute path.
	hdr=$pkgs/usr/src/linux-headers-$release
	common=$pkgs/usr/src/linux-headers-$abi-common
	[ -d "$hdr" ] && [ -d "$common" ] || die "no headers under $pkgs/usr/src"
	printf 'include %s/Makefile\n' "$common" >"$hdr/Makefile"
	cc=$(sed -n 's/^CC = .*(CROSS_COMPILE)\(gcc-[0-9]*\)$/\1/p' "$hdr/.kernelvariables")
	command -v "x86_64-linux-gnu-${cc:-gcc-12}" >/dev/null ||
		die "x86_64-linux-gnu-${cc:-gcc-12} not found: the kernel was built with it (install ${cc:-gcc-12})"
}

# check_vermagic KO: dies unless KO was built for $release.
check_vermagic() {
	local vermagic
	vermagic=$(strings "$1" | sed -n 's/^vermagic=//p')
	case $vermagic in
	"$release "*) ;;
	*) die "${1##*/} has vermagic '$vermagic', not $release" ;;
	esac
}
