#!/usr/bin/env bash
# Installs what the tests need into the checkout (idempotent, offline-safe once done):
#   - python-ndn, esgf-pyclient and friends (PyPI, pinned) in tests/interop/.venv
#   - NDNts 0.0.20250307 (npm, pinned by package-lock.json) in tests/interop/ndnts/node_modules
#   - xfsprogs (apt, only if mkfs.xfs is missing and we are root) for the reflink test
#   - netcdf-bin (apt, only if ncgen is missing and we are root) for the netCDF fixtures
#   - postgresql (apt, only if initdb is missing and we are root) for the catalog tests
#   - fuse3 (apt, only if fusermount3 is missing and we are root) for `granary mount`
#     (fusermount3 unmounts for non-root users; root mounts through /dev/fuse directly)
#   - chromium + chromium-driver (apt, only if /usr/bin/chromium is missing and we are
#     root) for the web page's browser test (Playwright drives this Chromium; it never
#     downloads a browser of its own)
#   - curl (apt, if missing) for the gateway test; nginx (apt, if missing) for bench/gateway.sh
#   - vsftpd (apt, if missing) with nginx for the caching-vs-http experiment; fonts-dejavu-core
#     (apt, if missing) for PNG plots
#   - prometheus (apt, only if promtool is missing and we are root) for `promtool check
#     metrics` on the gateway's /metrics (the package's server is not used)
# Needs: python3 (with venv), node + npm, cargo. Nothing else is installed system-wide.
set -euo pipefail
cd "$(dirname "$0")/.."
interop=tests/interop

need() { command -v "$1" >/dev/null 2>&1 || { echo "setup: '$1' is required but not installed" >&2; exit 1; }; }
need python3; need node; need npm; need cargo

# mkfs.xfs for the reflink-ingest test (an XFS file system on a loop device).
if ! command -v mkfs.xfs >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing xfsprogs (apt) for the reflink test"
    (apt-get install -y -qq xfsprogs >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq xfsprogs >/dev/null; })
  else
    echo "setup: mkfs.xfs (xfsprogs) is missing and cannot be installed here; the reflink test will fail" >&2
  fi
fi

# ncgen/ncdump for the netCDF reader tests (fixtures made from CDL in all five kinds).
if ! command -v ncgen >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing netcdf-bin (apt) for the netCDF tests"
    (apt-get install -y -qq netcdf-bin >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq netcdf-bin >/dev/null; })
  else
    echo "setup: ncgen (netcdf-bin) is missing and cannot be installed here; the netCDF tests will fail" >&2
  fi
fi

# PostgreSQL (initdb, pg_ctl) for the catalog's PostgreSQL tests and bench/catalog.sh
# (each starts a throw-away cluster in a temporary directory).
if ! command -v initdb >/dev/null 2>&1 && [ ! -x /usr/lib/postgresql/15/bin/initdb ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing postgresql (apt) for the catalog tests"
    (apt-get install -y -qq postgresql >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq postgresql >/dev/null; })
  else
    echo "setup: PostgreSQL (initdb) is missing and cannot be installed here; the catalog PostgreSQL tests will fail" >&2
  fi
fi

# fusermount3 for `granary mount` (the mount tests need /dev/fuse; as root
# they mount without it, but `granary mount --unmount` falls back to it).
if ! command -v fusermount3 >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing fuse3 (apt) for granary mount"
    (apt-get install -y -qq fuse3 >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq fuse3 >/dev/null; })
  else
    echo "setup: fusermount3 (fuse3) is missing and cannot be installed here; non-root mounts will not unmount cleanly" >&2
  fi
fi

# Debian's Chromium for the web page's browser test (crates/cli/tests/it/browser.rs).
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing chromium and chromium-driver (apt) for the browser test"
    (apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; })
  else
    echo "setup: /usr/bin/chromium (Debian chromium) is missing and cannot be installed here; the browser test will skip (fail with CI=true)" >&2
  fi
fi

# curl for the gateway test (ranges, HEAD); nginx as the peer of bench/gateway.sh (the
# script starts its own instance on loopback with a temporary config; the package's
# service is not used). nginx and vsftpd are also the HTTP and FTP baselines of the
# caching-vs-http experiment (`granary testbed run`, crates/cli/tests/it/netns_experiments.rs),
# started with their own configs inside a namespace.
for pkg in curl:curl nginx:nginx vsftpd:vsftpd; do
  cmd=${pkg%%:*}; deb=${pkg##*:}
  if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "setup: installing $deb (apt)"
      (apt-get install -y -qq "$deb" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$deb" >/dev/null; })
    else
      echo "setup: $cmd ($deb) is missing and cannot be installed here" >&2
    fi
  fi
done

# A font for the PNG plots of `sim cache` and `testbed run` (resvg renders their SVG text
# with system fonts).
if [ ! -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing fonts-dejavu-core (apt) for PNG plots"
    (apt-get install -y -qq fonts-dejavu-core >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq fonts-dejavu-core >/dev/null; })
  else
    echo "setup: fonts-dejavu-core is missing; PNG plots will have no text" >&2
  fi
fi

# promtool (Debian prometheus) checks the gateway's /metrics exposition
# (crates/cli/tests/it/gateway_metrics.rs); the Prometheus server itself is not run.
if ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing prometheus (apt) for promtool"
    (apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus >/dev/null; })
  else
    echo "setup: promtool (prometheus) is missing and cannot be installed here; the /metrics test will fail" >&2
  fi
fi

req="$interop/python/requirements.txt"
stamp="$interop/.venv/.installed"
if [ ! -x "$interop/.venv/bin/python" ] || [ ! -f "$stamp" ] || ! cmp -s "$req" "$stamp"; then
  echo "setup: creating $interop/.venv with $(tr '\n' ' ' < "$req")"
  python3 -m venv "$interop/.venv"
  "$interop/.venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
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
