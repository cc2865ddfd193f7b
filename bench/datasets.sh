#!/usr/bin/env bash
# Datasets (issue 33). Sections, each its own block; run all or pick with SECTIONS.
#
# == preview ==
# Quick-look picture latency (`GET /api/preview/<name>?variable=&time=`): the first
# request of a time step (decoded: header, coordinates and that step's chunks read
# through the verified local route, decoded, drawn) and the same request again (a
# cache hit), median and max over STEPS time steps, for three fields written here with
# netCDF4-python (deflate + shuffle, one chunk per time step): 1° (180 × 360), 0.25°
# (720 × 1440) and 0.1° (1800 × 3600) global grids, and one real CMIP6 file of
# esmvaltool-sample-data. curl's time_total on loopback.
# Usage: [SECTIONS="preview"] [PROFILE=release|debug] [STEPS=5] bash bench/datasets.sh
set -euo pipefail
cd "$(dirname "$0")/.."
sections=${SECTIONS:-preview}
profile=${PROFILE:-release}
steps=${STEPS:-5}
PY=$PWD/tests/interop/.venv/bin/python
[ -x "$PY" ] || { echo "tests/interop/.venv missing: run scripts/setup-test-deps.sh" >&2; exit 1; }
if [ "$profile" = release ]; then cargo build --release -q -p granary; else cargo build -q -p granary; fi
G=$PWD/target/$profile/granary
tmp=$(mktemp -d -p "${BENCH_TMP:-/tmp}")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

if [[ " $sections " == *" preview "* ]]; then
  data=$tmp/node
  mkdir -p "$data" "$tmp/files"
  "$G" --data-dir "$data" --socket "$data/g.sock" daemon --http 127.0.0.1:0 >"$tmp/daemon.out" 2>"$tmp/daemon.err" &
  pids+=($!)
  for _ in $(seq 100); do grep -q '^gateway http' "$tmp/daemon.out" 2>/dev/null && break; sleep 0.1; done
  base=$(sed -n 's|^gateway \(http://[^/]*\)/.*|\1|p' "$tmp/daemon.out" | head -1)
  [ -n "$base" ] || { echo "daemon did not start" >&2; cat "$tmp/daemon.err" >&2; exit 1; }
  "$PY" - "$tmp/files" "$steps" <<'EOF'
import sys, numpy as np, netCDF4
out, steps = sys.argv[1], int(sys.argv[2])
for name, ny, nx in (("g1", 180, 360), ("g025", 720, 1440), ("g01", 1800, 3600)):
    with netCDF4.Dataset(f"{out}/{name}.nc", "w") as d:
        d.createDimension("time", None); d.createDimension("lat", ny); d.createDimension("lon", nx)
        t = d.createVariable("time", "f8", ("time",)); t.units = "days since 2000-01-01"
        la = d.createVariable("lat", "f8", ("lat",)); la.units = "degrees_north"
        lo = d.createVariable("lon", "f8", ("lon",)); lo.units = "degrees_east"
        la[:] = np.linspace(-90 + 90 / ny, 90 - 90 / ny, ny); lo[:] = np.linspace(0, 360 - 360 / nx, nx)
        v = d.createVariable("tas", "f4", ("time", "lat", "lon"), zlib=True, shuffle=True,
                             chunksizes=(1, ny, nx), fill_value=np.float32(1e20))
        v.long_name = "Near-Surface Air Temperature"; v.units = "K"
        y, x = np.meshgrid(la[:], lo[:], indexing="ij")
        for i in range(steps):
            t[i] = 15.5 + 30 * i
            v[i] = (273 + 30 * np.cos(np.radians(y)) + 5 * np.sin(np.radians(x + 10 * i))).astype("f4")
EOF
  real=$("$PY" -c "import esmvaltool_sample_data, os, glob; print(sorted(glob.glob(os.path.join(os.path.dirname(esmvaltool_sample_data.__file__), 'data/timeseries/CMIP6/CMIP/MPI-M/MPI-ESM1-2-HR/historical/r1i1p1f1/Amon/ta/gn/*/*.nc')))[0])")
  cp "$real" "$tmp/files/cmip6_ta.nc"
  for f in "$tmp"/files/*.nc; do
    "$G" --data-dir "$data" --socket "$data/g.sock" put "$f" "/bench/preview/$(basename "$f")" >/dev/null
  done
  for f in "$tmp"/files/*.nc; do
    n=/bench/preview/$(basename "$f")
    for _ in $(seq 300); do [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/api/file$n")" = 200 ] && break; sleep 0.1; done
  done
  echo "| field | size (values) | PNG bytes | first: median / max (ms) | cached: median / max (ms) |"
  echo "|---|---|---|---|---|"
  for f in g1 g025 g01 cmip6_ta; do
    n=/bench/preview/$f.nc
    var=tas; [ $f = cmip6_ta ] && var=ta
    first=(); cached=(); bytes=0
    for i in $(seq 0 $((steps - 1))); do
      u="$base/api/preview$n?variable=$var&time=$i"
      r=$(curl -s -o "$tmp/p.png" -w '%{http_code} %{time_total}' "$u")
      [ "${r%% *}" = 200 ] || { echo "$u: $r $(cat "$tmp/p.png")" >&2; exit 1; }
      first+=("${r##* }"); bytes=$(stat -c %s "$tmp/p.png")
      h=$(curl -s -D - -o /dev/null -w '%{time_total}' "$u")
      grep -qi '^x-preview-cache: hit' <<<"$h" || { echo "$u: second request not a cache hit" >&2; exit 1; }
      cached+=("$(tail -n1 <<<"$h" | tr -d '\r')")
    done
    shape=$(curl -s "$base/api/preview$n" | "$PY" -c "import sys, json; v = json.load(sys.stdin)['variables'][0]; print(' x '.join(map(str, v['shape'][-2:])))")
    ms() { printf '%s\n' "$@" | awk '{print $1 * 1000}'; }
    fm=$(ms "${first[@]}" | median); fx=$(ms "${first[@]}" | sort -n | tail -1)
    cm=$(ms "${cached[@]}" | median); cx=$(ms "${cached[@]}" | sort -n | tail -1)
    printf '| %s | %s | %s | %.1f / %.1f | %.2f / %.2f |\n' "$f" "$shape" "$bytes" "$fm" "$fx" "$cm" "$cx"
  done
fi
