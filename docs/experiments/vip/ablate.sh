#!/usr/bin/env bash
# Ablations of report.md: VIP with one modelling choice changed at a time,
# beside the baselines, on Abilene and GEANT at the sweep's parameters.
#   bash docs/experiments/vip/ablate.sh            # release build
#   BIN=target/debug/granary bash docs/experiments/vip/ablate.sh
# Output: docs/experiments/vip/ablation/TOPOLOGY.csv (one row per run; the
# `ablation` column names what was changed). The reference row `vip` is VIP
# with the cache-set admission and five-slot EWMA scores it had before
# decisions 0099 and 0104 (`--vip-admit set --vip-score-decay ewma`); every
# ablation changes one thing from it, the score-decay rows one thing from
# admit-replace (VIP as it is now is score-decay-0.01).
set -euo pipefail
cd "$(dirname "$0")/../../.."
bin=${BIN:-target/release/granary}
out=docs/experiments/vip/ablation
rates=${RATES:-2,5,8,11,14}
mkdir -p "$out"
echo "# commit $(git rev-parse --short HEAD), load average $(cut -d' ' -f1-3 /proc/loadavg)"
common=(--objects 5000 --alpha 0.75 --object-mb 5 --link-mbps 500 --duration 100 --warmup 20 --rate "$rates")
for t in abilene geant; do
  csv="$out/$t.csv"
  : >"$csv"
  run() { # name, then sim vip options
    local name=$1
    shift
    "$bin" sim vip --topology "$t" "${common[@]}" "$@" 2>/dev/null |
      awk -v n="$name" 'NR == 1 { if (!h) print "ablation," $0; next } { print n "," $0 }' h="$(test -s "$csv" && echo 1)" >>"$csv"
  }
  run baselines --variants lru+sp,lfu+sp,bias+sp,lfu+pb --cache 5,50
  ewma=(--vip-score-decay ewma)
  set=(--vip-admit set "${ewma[@]}")
  run vip --variants vip "${set[@]}" --cache 5,50
  run admit-replace --variants vip --vip-admit replace "${ewma[@]}" --cache 5,50
  run drain-link --variants vip "${set[@]}" --vip-drain link --cache 5,50
  run drain-1 --variants vip "${set[@]}" --vip-drain 1 --cache 5,50
  run drain-0 --variants vip "${set[@]}" --vip-drain 0 --cache 5,50
  run replace-drain-1 --variants vip --vip-admit replace "${ewma[@]}" --vip-drain 1 --cache 5,50
  run vip-cache-sp --variants vip+sp "${set[@]}" --cache 5,50
  run lfu-cache-vip-fwd --variants lfu+vip "${set[@]}" --cache 5,50
  run links-fill --variants vip,lfu+vip "${set[@]}" --vip-links fill --cache 5,50
  run fill-replace --variants vip --vip-links fill --vip-admit replace "${ewma[@]}" --cache 5,50
  run slot-0.1 --variants vip "${set[@]}" --slot 0.1 --cache 5
  run score-decay-0.01 --variants vip --vip-admit replace --vip-score-decay 0.01 --cache 5,50
  run score-decay-0.001 --variants vip --vip-admit replace --vip-score-decay 0.001 --cache 5,50
  run score-decay-0.01-fill --variants vip --vip-admit replace --vip-score-decay 0.01 --vip-links fill --cache 5,50
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
