#!/usr/bin/env bash
# The simulated figures of report.md (`granary sim vip`, release build).
#   bash docs/experiments/vip/sim.sh          (BIN=target/debug/granary: same figures)
set -euo pipefail
cd "$(dirname "$0")/../../.."
bin=${BIN:-target/release/granary}
out=docs/experiments/vip/sim
mkdir -p "$out"
echo "# commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
common=(--objects 5000 --alpha 0.75 --object-mb 5 --link-mbps 500 --slot 1 --duration 100 --warmup 20)
for t in abilene geant fattree; do
  "$bin" sim vip --topology "$t" "${common[@]}" --cache 5 --rate 2,4,6,8,10,12,14 --out "$out/$t" 2>/dev/null
done
# The diamond ablation: VIP with and without caches, against shortest-path LRU.
"$bin" sim vip --topology diamond --variants vip,lru+sp --objects 50 --object-mb 1 --link-mbps 100 \
  --cache 0,2,5 --rate 2,4,8 --duration 120 --warmup 20 --out "$out/diamond" 2>/dev/null
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
