#!/usr/bin/env bash
# Datasets (issue 33), one run; sections picked with SECTIONS (default: all three).
#
# == publish ==
# publish-dir of the 326 real CMIP6 files of esmvaltool-sample-data with the virtual-Zarr
# chunk index (the default) and without (--no-chunk-index); embedded catalog, no
# daemon; median of 3 alternating runs each, peak RSS beside.
#
# == open == (root: the FUSE mount)
# A dataset of YEARS monthly files (tests/interop/python/datasets_bench.py: netCDF-4,
# deflate + shuffle, one chunk per time step) published through a daemon with its
# gateway, then opened by another application on the node three ways: virtual Zarr
# (GET /api/zarr/<id>), xr.open_mfdataset over `granary mount`, and xr.open_mfdataset
# over the /data URLs of its ESGF File documents through fsspec. Seconds to open, to
# read one time step, one time step's 10 % spatial subset (a tenth of the latitude
# rows) and every value; HTTP requests counted by the gateway.
#
# == preview ==
# Quick-look picture latency (`GET /api/preview/<name>?variable=&time=`): the first
# request of a time step (decoded: header, coordinates and that step's chunks read
# through the verified local route, decoded, drawn) and the same request again (a
# cache hit), median and max over STEPS time steps, for three fields written here with
# netCDF4-python (deflate + shuffle, one chunk per time step): 1° (180 × 360), 0.25°
# (720 × 1440) and 0.1° (1800 × 3600) global grids, and one real CMIP6 file of
# esmvaltool-sample-data. curl's time_total on loopback.
#
# Usage: sudo [SECTIONS="publish open preview"] [PROFILE=release|debug] [STEPS=5] [YEARS=100] bash bench/datasets.sh
set -euo pipefail
cd "$(dirname "$0")/.."
sections=${SECTIONS:-publish open preview}
profile=${PROFILE:-release}
steps=${STEPS:-5}
years=${YEARS:-100}
PY=$PWD/tests/interop/.venv/bin/python
[ -x "$PY" ] || { echo "tests/interop/.venv missing: run scripts/setup-test-deps.sh" >&2; exit 1; }
if [ "$profile" = release ]; then cargo build --release -q -p granary; else cargo build -q -p granary; fi
G=$PWD/target/$profile/granary
tmp=$(mktemp -d -p "${BENCH_TMP:-/tmp}")
pids=()
mp=""
cleanup() {
  [ -n "$mp" ] && { umount -l "$mp" 2>/dev/null || true; }
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
t() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -1; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
echo "commit $(git rev-parse --short HEAD), $profile build; machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

if [[ " $sections " == *" publish "* ]]; then
sample=$("$PY" -c "import esmvaltool_sample_data, os; print(os.path.dirname(esmvaltool_sample_data.__file__))")/data/timeseries
echo "== publish-dir, 326 real CMIP6 files ($(du -sh "$sample" | cut -f1))"
: > "$tmp/with"; : > "$tmp/without"
for i in 1 2 3; do
  for mode in with without; do
    rm -rf "$tmp/d"
    flag=(); [ "$mode" = without ] && flag=(--no-chunk-index)
    sync
    t "$G" --data-dir "$tmp/d" --socket "$tmp/none.sock" publish-dir "$sample" \
      --report "$tmp/r.json" "${flag[@]}" >> "$tmp/$mode"
  done
done
w=$(cut -d' ' -f1 "$tmp/with" | median); wo=$(cut -d' ' -f1 "$tmp/without" | median)
wr=$(cut -d' ' -f2 "$tmp/with" | sort -n | tail -1); wor=$(cut -d' ' -f2 "$tmp/without" | sort -n | tail -1)
printf "%-30s %8s %10s %10s\n" "" seconds files/s "peak RSS"
printf "%-30s %8.2f %10.0f %6d MiB\n" "with chunk index (default)" "$w" "$(echo "326 / $w" | bc -l)" $((wr / 1024))
printf "%-30s %8.2f %10.0f %6d MiB\n" "--no-chunk-index" "$wo" "$(echo "326 / $wo" | bc -l)" $((wor / 1024))
printf "ratio with/without: %.2fx (target <= 1.3x)\n" "$(echo "$w / $wo" | bc -l)"

fi

if [[ " $sections " == *" open "* ]]; then
[ "$(id -u)" = 0 ] || { echo "the open section needs root (FUSE mount)" >&2; exit 1; }
echo "== a $years-file dataset opened by another application on the node"
"$PY" tests/interop/python/datasets_bench.py make "$tmp/tree" "$years"
mkdir -p "$tmp/n"
$G --data-dir "$tmp/n" --socket "$tmp/n/g.sock" daemon --http 127.0.0.1:0 > "$tmp/n/out" 2> "$tmp/n/err" &
pids+=($!)
for _ in $(seq 200); do grep -qs '^ready' "$tmp/n/out" && break; sleep 0.05; done
http=$(sed -n 's#^gateway http://##p' "$tmp/n/out" | head -1 | tr -d /)
$G --data-dir "$tmp/n" --socket "$tmp/n/g.sock" publish-dir "$tmp/tree" --report "$tmp/r2.json" > /dev/null 2>&1
id=CMIP6.CMIP.CCCma.CanESM5.historical.r1i1p1f1.Amon.tas.gn.v20190429
curl -sf "http://$http/esg-search/search?type=File&dataset_id=$id&format=application/solr%2Bjson&limit=1000" \
  | "$PY" -c "import json,sys; [print(d['url'][0].split('|')[0]) for d in json.load(sys.stdin)['response']['docs']]" \
  > "$tmp/urls"
curl -sf "http://$http/esg-search/search?type=File&dataset_id=$id&format=application/solr%2Bjson&limit=1000" \
  | "$PY" -c "import json,sys; [print(u.split('|')[0].removesuffix('.html')) for d in json.load(sys.stdin)['response']['docs'] for u in d['url'] if u.endswith('|OPENDAP')]" \
  > "$tmp/urls.opendap"
echo "$(wc -l < "$tmp/urls") files, $(du -sh "$tmp/tree" | cut -f1)"
mp=$tmp/mnt; mkdir -p "$mp"
$G --data-dir "$tmp/n" --socket "$tmp/n/g.sock" mount /cmip6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/Amon/tas/gn "$mp" > "$tmp/m.out" 2> "$tmp/m.err" &
pids+=($!)
for _ in $(seq 200); do grep -qs '^ready' "$tmp/m.out" && break; sleep 0.05; done
grep -q '^ready' "$tmp/m.out" || { cat "$tmp/m.err" >&2; exit 1; }
"$PY" tests/interop/python/datasets_bench.py open "http://$http" "$id" "$mp" "$tmp/urls" > "$tmp/open.jsonl"
"$PY" - "$tmp/open.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'way':<8} {'open s':>8} {'1 step s':>9} {'10% s':>7} {'all s':>8} {'HTTP open':>10} {'HTTP 1 step':>12} {'HTTP 10%':>9} {'bytes 10%':>10} {'HTTP all':>9}")
for r in rows:
    print(f"{r['way']:<8} {r['open_s']:>8.2f} {r['one_step_s']:>9.3f} {r['subset_s']:>7.3f} {r['all_s']:>8.2f} {r['open_requests']:>10} {r['one_step_requests']:>12} {r['subset_requests']:>9} {r['subset_bytes']:>10} {r['all_requests']:>9}")
PY
fi

if [[ " $sections " == *" preview "* ]]; then
  echo "== preview"
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
