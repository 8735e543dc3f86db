# shellcheck shell=bash
# Fetching PHP 8.4's sources exactly as Debian trixie ships them, verified end to end.
# Sourced by scripts/check-zts (a thread-safe CLI) and scripts/build-lsphp (LiteSpeed's
# lsphp); both build from the same tarball, cached in $PHP_SRC_DL.
#
#   php_sources_fetch     sets SRC_VERSION, TARBALL (a file name in $PHP_SRC_DL) and
#                         TARBALL_SHA256, downloading and verifying the tarball if needed
#
# The chain of trust: the mirror's InRelease is checked with the host's Debian archive
# keyring, Sources.xz against InRelease, the tarball against Sources. If the mirror no
# longer serves the current trixie php8.4 sources (seen: the pool answers 404 for the
# point release's .dsc and .orig while serving its .debs), it falls back to trixie's release
# version 8.4.11-1, whose .dsc is pinned by SHA-256 here. Within 8.4 the Zend API is the
# same. The mirror is read from the host's apt sources at run time; no host is written here.
# Callers define die() and say().

PHP_SRC_DL=${PHP_SRC_DL:-/var/cache/dw-router/php-src}
PHP_SRC_SUITE=${DW_PHP_SRC_SUITE:-trixie}
PHP_SRC_PACKAGE=php8.4
PHP_SRC_KEYRING=${DW_PHP_SRC_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
PHP_SRC_FALLBACK_DSC=php8.4_8.4.11-1.dsc
PHP_SRC_FALLBACK_DSC_SHA256=497332f6aa8c1db08fb4d2e8e047eccd4c403654a1cd3a69791692d7cd8e71ae

# shellcheck source=scripts/lib/host-mirror.sh
source "$(dirname "${BASH_SOURCE[0]}")/host-mirror.sh"

php_sources_get() { curl -fsSL --retry 3 -o "$2" "$1" || die "download failed: $1"; }
# Like php_sources_get, but returns 1 instead of dying on an HTTP error (e.g. 404).
php_sources_try_get() { rm -f "$2"; curl -fsSL --retry 3 -o "$2" "$1" 2>/dev/null; }
# $1 = expected sha256, $2 = file
php_sources_sha_ok() { [[ -f $2 ]] && sha256sum -c --status <<<"$1  $2"; }

# Prints "SHA256 NAME" of the .orig tarball listed in a .dsc or a Sources stanza on stdin.
php_sources_orig_line() {
  awk '/^Checksums-Sha256:/ {s = 1; next} /^[^ ]/ {s = 0} s && $3 ~ /\.orig\.tar\.(xz|gz|bz2)$/ {print $1, $3}'
}

php_sources_fetch() {
  command -v curl >/dev/null || die "curl is needed on the host"
  command -v gpgv >/dev/null || die "gpgv is needed on the host (apt-get install gpgv)"
  [[ -f $PHP_SRC_KEYRING ]] || die "no Debian archive keyring at $PHP_SRC_KEYRING"
  local mirror dl=$PHP_SRC_DL idx=$PHP_SRC_DL/index
  mirror=$(host_mirror)
  mkdir -p "$dl" "$idx"
  say "looking up $PHP_SRC_PACKAGE in $PHP_SRC_SUITE's Sources"
  php_sources_get "$mirror/dists/$PHP_SRC_SUITE/InRelease" "$idx/InRelease"
  gpgv --quiet --keyring "$PHP_SRC_KEYRING" --output "$idx/Release" "$idx/InRelease" 2>"$idx/gpgv.log" ||
    die "InRelease signature check failed: $(cat "$idx/gpgv.log")"
  php_sources_get "$mirror/dists/$PHP_SRC_SUITE/main/source/Sources.xz" "$idx/Sources.xz"
  local want got
  want=$(awk '/^SHA256:/ {s = 1; next} /^[^ ]/ {s = 0} s && $3 == "main/source/Sources.xz" {print $1}' "$idx/Release")
  got=$(sha256sum "$idx/Sources.xz" | cut -d' ' -f1)
  [[ -n $want && $want == "$got" ]] || die "Sources.xz does not match the signed Release (want '$want', got '$got')"

  local stanza dir
  # awk reads to the end (no early exit), so xz never dies of SIGPIPE under pipefail.
  stanza=$(xz -dc "$idx/Sources.xz" | awk -v p="$PHP_SRC_PACKAGE" '$0 == "Package: " p {s = 1} /^$/ {s = 0} s')
  [[ -n $stanza ]] || die "no source package $PHP_SRC_PACKAGE in $PHP_SRC_SUITE"
  SRC_VERSION=$(awk '/^Version:/ {print $2}' <<<"$stanza")
  dir=$(awk '/^Directory:/ {print $2}' <<<"$stanza")
  read -r TARBALL_SHA256 TARBALL < <(php_sources_orig_line <<<"$stanza")
  [[ -n ${TARBALL:-} && -n $dir ]] || die "no .orig tarball listed for $PHP_SRC_PACKAGE $SRC_VERSION"

  if php_sources_sha_ok "$TARBALL_SHA256" "$dl/$TARBALL"; then
    say "have $TARBALL ($PHP_SRC_PACKAGE $SRC_VERSION, $PHP_SRC_SUITE)"
    return
  fi
  say "downloading $TARBALL ($PHP_SRC_PACKAGE $SRC_VERSION, $PHP_SRC_SUITE)"
  if php_sources_try_get "$mirror/$dir/$TARBALL" "$dl/$TARBALL.part"; then
    php_sources_sha_ok "$TARBALL_SHA256" "$dl/$TARBALL.part" || die "$TARBALL does not match the checksum in Sources"
    mv "$dl/$TARBALL.part" "$dl/$TARBALL"
    return
  fi
  rm -f "$dl/$TARBALL.part"
  say "the mirror does not serve $dir/$TARBALL; falling back to $PHP_SRC_FALLBACK_DSC"
  php_sources_fetch_fallback "$mirror" "$dir" "$dl"
}

php_sources_fetch_fallback() {
  local mirror=$1 dir=$2 dl=$3 dsc=$PHP_SRC_FALLBACK_DSC
  php_sources_sha_ok "$PHP_SRC_FALLBACK_DSC_SHA256" "$dl/$dsc" || {
    php_sources_get "$mirror/$dir/$dsc" "$dl/$dsc"
    php_sources_sha_ok "$PHP_SRC_FALLBACK_DSC_SHA256" "$dl/$dsc" || die "$dsc does not match its pinned SHA-256"
  }
  SRC_VERSION=$(awk '/^Version:/ {print $2; exit}' "$dl/$dsc")
  read -r TARBALL_SHA256 TARBALL < <(php_sources_orig_line <"$dl/$dsc")
  [[ -n ${TARBALL:-} ]] || die "no .orig tarball listed in $dsc"
  if php_sources_sha_ok "$TARBALL_SHA256" "$dl/$TARBALL"; then
    say "have $TARBALL ($PHP_SRC_PACKAGE $SRC_VERSION)"
    return
  fi
  say "downloading $TARBALL ($PHP_SRC_PACKAGE $SRC_VERSION)"
  php_sources_try_get "$mirror/$dir/$TARBALL" "$dl/$TARBALL.part" ||
    die "the mirror serves neither $PHP_SRC_SUITE's current $PHP_SRC_PACKAGE sources nor $TARBALL"
  php_sources_sha_ok "$TARBALL_SHA256" "$dl/$TARBALL.part" || die "$TARBALL does not match the checksum in $dsc"
  mv "$dl/$TARBALL.part" "$dl/$TARBALL"
}
