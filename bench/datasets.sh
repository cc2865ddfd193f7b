#!/usr/bin/env bash
# Datasets (issue 33), release build, one run:
#  1. publish-dir of the 326 real CMIP6 files of esmvaltool-sample-data, with the
#     virtual-Zarr chunk index (the default) and without (--no-chunk-index); embedded
#     catalog, no daemon; median of 3 alternating runs each, peak RSS beside.
#  2. a dataset of YEARS monthly files (made by tests/interop/python/datasets_bench.py,
#     netCDF-4, deflate + shuffle, one chunk per time step) published through a daemon
#     with its gateway, then opened by another application on the node three ways:
#     virtual Zarr (GET /api/zarr/<id>), xr.open_mfdataset over `granary mount`, and
#     xr.open_mfdataset over the /data URLs of its ESGF File documents through fsspec.
#     Seconds to open, to read one time step and to read every value; HTTP requests
#     counted by the gateway (/metrics) for each.
# Usage: sudo bash bench/datasets.sh [YEARS=100]   (root for the FUSE mount)
set -euo pipefail
cd "$(dirname "$0")/.."
years=${1:-100}
cargo build --release -q -p granary
G=$PWD/target/release/granary
PY=$PWD/tests/interop/.venv/bin/python
sample=$("$PY" -c "import esmvaltool_sample_data, os; print(os.path.dirname(esmvaltool_sample_data.__file__))")/data/timeseries
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
median() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
echo "commit $(git rev-parse --short HEAD); machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "== 1. publish-dir, 326 real CMIP6 files ($(du -sh "$sample" | cut -f1))"
: > "$tmp/with"; : > "$tmp/without"
for i in 1 2 3; do
  for mode in with without; do
    rm -rf "$tmp/d"
    flag=(); [ "$mode" = without ] && flag=(--no-chunk-index)
    sync
    t "$G" --data-dir "$tmp/d" --socket "$tmp/none.sock" publish-dir "$sample" -q \
      --report "$tmp/r.json" "${flag[@]}" >> "$tmp/$mode"
  done
done
w=$(cut -d' ' -f1 "$tmp/with" | median); wo=$(cut -d' ' -f1 "$tmp/without" | median)
wr=$(cut -d' ' -f2 "$tmp/with" | sort -n | tail -1); wor=$(cut -d' ' -f2 "$tmp/without" | sort -n | tail -1)
printf "%-30s %8s %10s %10s\n" "" seconds files/s "peak RSS"
printf "%-30s %8.2f %10.0f %6d MiB\n" "with chunk index (default)" "$w" "$(echo "326 / $w" | bc -l)" $((wr / 1024))
printf "%-30s %8.2f %10.0f %6d MiB\n" "--no-chunk-index" "$wo" "$(echo "326 / $wo" | bc -l)" $((wor / 1024))
printf "ratio with/without: %.2fx (target <= 1.3x)\n" "$(echo "$w / $wo" | bc -l)"

echo
echo "== 2. a $years-file dataset opened by another application on the node"
"$PY" tests/interop/python/datasets_bench.py make "$tmp/tree" "$years"
mkdir -p "$tmp/n"
$G --data-dir "$tmp/n" --socket "$tmp/n/g.sock" daemon --http 127.0.0.1:0 > "$tmp/n/out" 2> "$tmp/n/err" &
pids+=($!)
for _ in $(seq 200); do grep -qs '^ready' "$tmp/n/out" && break; sleep 0.05; done
http=$(sed -n 's#^gateway http://##p' "$tmp/n/out" | head -1 | tr -d /)
$G --data-dir "$tmp/n" --socket "$tmp/n/g.sock" publish-dir "$tmp/tree" -q --report "$tmp/r2.json"
id=CMIP6.CMIP.CCCma.CanESM5.historical.r1i1p1f1.Amon.tas.gn.v20190429
curl -sf "http://$http/esg-search/search?type=File&dataset_id=$id&format=application/solr%2Bjson&limit=1000" \
  | "$PY" -c "import json,sys; [print(d['url'][0].split('|')[0]) for d in json.load(sys.stdin)['response']['docs']]" \
  > "$tmp/urls"
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
print(f"{'way':<8} {'open s':>8} {'1 step s':>9} {'all s':>8} {'HTTP open':>10} {'HTTP 1 step':>12} {'HTTP all':>9}")
for r in rows:
    print(f"{r['way']:<8} {r['open_s']:>8.2f} {r['one_step_s']:>9.3f} {r['all_s']:>8.2f} {r['open_requests']:>10} {r['one_step_requests']:>12} {r['all_requests']:>9}")
PY
