#!/usr/bin/env bash
# Installs what the tests need into the checkout (idempotent, offline-safe once done):
#   - python-ndn (PyPI, pinned) in tests/interop/.venv
#   - NDNts 0.0.20250307 (npm, pinned by package-lock.json) in tests/interop/ndnts/node_modules
# Needs: python3 (with venv), node + npm, cargo. Nothing is installed system-wide.
set -euo pipefail
cd "$(dirname "$0")/.."
interop=tests/interop

need() { command -v "$1" >/dev/null 2>&1 || { echo "setup: '$1' is required but not installed" >&2; exit 1; }; }
need python3; need node; need npm; need cargo

req="$interop/python/requirements.txt"
stamp="$interop/.venv/.installed"
if [ ! -x "$interop/.venv/bin/python" ] || [ ! -f "$stamp" ] || ! cmp -s "$req" "$stamp"; then
  echo "setup: creating $interop/.venv with $(tr '\n' ' ' < "$req")"
  python3 -m venv "$interop/.venv"
  "$interop/.venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$stamp"
fi

lock="$interop/ndnts/package-lock.json"
nstamp="$interop/ndnts/node_modules/.installed"
if [ ! -f "$nstamp" ] || ! cmp -s "$lock" "$nstamp"; then
  echo "setup: installing NDNts (npm ci) in $interop/ndnts"
  (cd "$interop/ndnts" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$lock" "$nstamp"
fi
echo "setup: test dependencies ready"
