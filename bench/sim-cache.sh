#!/usr/bin/env bash
# `granary sim cache`: simulation speed (requests/s on one core) and the climate seed's
# Fig. 7 sweeps (cache hit ratio, α = 1.15), on the forwarder's own Content Store.
#
#   bash bench/sim-cache.sh [OUT_DIR]      (default: bench/sim-cache)
#
# Writes OUT_DIR/speed.csv, OUT_DIR/fig7a.{csv,svg}, OUT_DIR/fig7b.{csv,svg},
# OUT_DIR/fig7c.svg. Files are objects of 1000 chunks fetched in order by each consumer
# (the seed's files are 1–1.4 GB; 1000 chunks keeps the runs short, and the cache sizes
# are scaled by the same factor: the seed's 40,000-chunk gateway cache holds about a
# quarter of one 1.3 GB file at 8 KiB per chunk, here 4 files' worth of 1000 chunks
# since consumers also request other files).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/sim-cache}
bin=target/release/granary
[ -x "$bin" ] || cargo build --release -p granary
mkdir -p "$out"
echo "# sim cache on $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)"

# Speed: pure IRM over 100,000 objects, 3 M requests per run, one core.
taskset -c 0 "$bin" sim cache --objects 100000 --cache 100,1000,10000 --requests 3000000 \
  > "$out/speed.csv" 2>/dev/null
echo "requests/s on one core (policy, cache, M requests/s):"
awk -F, 'NR>1 {printf "  %s %s %.2f\n", $1, $6, $11/1e6}' "$out/speed.csv"

# Fig. 7 (a): hit ratio against cache size, catalogs of 2 and 5 files, 10 consumers.
"$bin" sim cache --chunks 1000 --objects 2,5 --consumers 10 --requests 20000 \
  --cache 250,500,1000,1500,2000,3000,4000,5000 --x cache --out "$out/a" 2>/dev/null
# Fig. 7 (b) and (c): 10–40 files, 10–30 consumers, a cache of 4000 chunks.
"$bin" sim cache --chunks 1000 --objects 10,20,40 --consumers 10,20,30 --requests 20000 \
  --cache 4000 --x consumers --out "$out/b" 2>/dev/null
"$bin" sim cache --chunks 1000 --objects 10,20,40 --consumers 10,20,30 --requests 20000 \
  --cache 4000 --x objects --out "$out/c" 2>/dev/null
mv "$out/a/cache.csv" "$out/fig7a.csv"; mv "$out/a/cache.svg" "$out/fig7a.svg"
mv "$out/b/cache.csv" "$out/fig7b.csv"; mv "$out/b/cache.svg" "$out/fig7b.svg"
mv "$out/c/cache.svg" "$out/fig7c.svg"; rm -rf "$out/a" "$out/b" "$out/c"
for f in fig7a fig7b; do
  echo "$f (policy, objects, consumers, cache, hit ratio):"
  awk -F, 'NR>1 {printf "  %s %s %s %s %.3f\n", $1, $3, $5, $6, $9}' "$out/$f.csv"
done
