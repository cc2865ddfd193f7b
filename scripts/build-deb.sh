#!/usr/bin/env bash
# Builds the Debian package of Granary: the binary, a systemd unit (its own user,
# state in /var/lib/granary, sockets in /run/granary, logs to the journal, a raised
# RLIMIT_NOFILE) and /etc/granary/granary.toml, with dpkg-deb from a staged tree.
#
#   bash scripts/build-deb.sh [--binary PATH] [--out DIR]
#
# Without --binary, builds the release binary first. Prints the package's path.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="" out="target/debian"
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "build-deb: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v dpkg-deb >/dev/null || { echo "build-deb: dpkg-deb is required" >&2; exit 1; }
if [ -z "$bin" ]; then
  cargo build --release --locked -p granary >&2
  bin=target/release/granary
fi
[ -x "$bin" ] || { echo "build-deb: $bin is not an executable" >&2; exit 1; }
version=$(awk -F'"' '/^version = /{ print $2; exit }' Cargo.toml)
arch=$(dpkg --print-architecture)
mkdir -p "$out"
stage=$(mktemp -d)
chmod 0755 "$stage"
trap 'rm -rf "$stage"' EXIT
install -D -m 0755 "$bin" "$stage/usr/bin/granary"
install -D -m 0644 packaging/debian/granary.service "$stage/lib/systemd/system/granary.service"
install -D -m 0644 packaging/debian/granary.toml "$stage/etc/granary/granary.toml"
install -D -m 0644 README.md "$stage/usr/share/doc/granary/README.md"
install -D -m 0644 docs/cli.md "$stage/usr/share/doc/granary/cli.md"
install -D -m 0644 docs/federation.md "$stage/usr/share/doc/granary/federation.md"
install -d "$stage/DEBIAN"
size=$(du -sk "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: granary
Version: $version
Architecture: $arch
Maintainer: Granary developers <granary@localhost>
Installed-Size: $size
Depends: libc6, adduser
Recommends: fuse3
Section: net
Priority: optional
Description: NDN node and repository for big-science data
 Granary is a named-data networking (NDN) forwarder, a file-backed repository
 with one signed manifest per file version, verified transfer tools, a science
 catalog and an HTTP gateway (ESGF and STAC search, downloads, OPeNDAP).
CONTROL
echo /etc/granary/granary.toml > "$stage/DEBIAN/conffiles"
cat > "$stage/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if ! getent passwd granary >/dev/null; then
    adduser --system --group --home /var/lib/granary \
      --gecos "Granary NDN node" granary >/dev/null
  fi
  install -d -o granary -g granary -m 0750 /var/lib/granary
  if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null || true
    systemctl enable granary.service >/dev/null || true
    systemctl restart granary.service >/dev/null || true
  fi
fi
exit 0
POSTINST
cat > "$stage/DEBIAN/prerm" <<'PRERM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
  systemctl stop granary.service >/dev/null || true
  systemctl disable granary.service >/dev/null || true
fi
exit 0
PRERM
cat > "$stage/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
# The node's data in /var/lib/granary and its user are kept, on purge too: published
# files are the operator's to remove.
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null || true
fi
exit 0
POSTRM
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"
deb="$out/granary_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zgzip -z6 --build "$stage" "$deb" >&2
echo "$deb"
