# shellcheck shell=bash
# The Debian mirror the host's own apt uses, read from its apt sources at run time, so
# that no registry or mirror host is written into the repository. Sourced by
# scripts/devenv (debootstrap and the root's apt sources) and scripts/lib/php-sources.sh
# (PHP's source package, for scripts/check-zts and scripts/build-lsphp).
# Callers define die().

# Prints the first URI of the host's main (non-security) Debian archive, without a
# trailing slash, so that "$mirror/dists/..." is one path.
host_mirror() {
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    uri=$(awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i}' "$f" | grep -v -- '-security' | head -n1)
    [[ -n $uri ]] && { echo "${uri%/}"; return; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    uri=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):/) {print $i; exit}}' "$f")
    [[ -n $uri ]] && { echo "${uri%/}"; return; }
  done
  die "no Debian mirror found in the host's apt sources"
}
