#!/usr/bin/env bash
# `granary sim vip`: simulated requests per CPU-second on GEANT (22 nodes), the paper's
# setting (5000 objects, Zipf 0.75, 5 MB objects, 500 Mb/s links, 5-object caches,
# 1 s VIP slots), for VIP and for shortest-path LRU. CPU time is user + system of the
# process (bash's `time`), on one core (taskset), the least of RUNS runs (default 5:
# the machine is shared).
#
#   bash bench/sim-vip.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/granary
[ -x "$bin" ] || cargo build --release -p granary
echo "# sim vip on $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TIMEFORMAT='%U %S'
echo "variant rate requests cpu_s M_requests_per_cpu_s"
for v in vip lru+sp; do
  for r in 14 50; do
    c=""
    for _ in $(seq "${RUNS:-5}"); do
      t=$( { time taskset -c 0 "$bin" sim vip --topology geant --variants "$v" --rate "$r" \
             --duration 100 --warmup 20 > "$tmp/out.csv" 2>/dev/null; } 2>&1 )
      c=$(awk -v t="$t" -v c="$c" 'BEGIN {split(t, a, " "); x = a[1] + a[2];
        print (c == "" || x < c) ? x : c}')
    done
    n=$(awk -F, 'NR==2 {print $14}' "$tmp/out.csv")
    awk -v v="$v" -v r="$r" -v n="$n" -v c="$c" 'BEGIN {
      printf "%s %s %d %.3f %.2f\n", v, r, n, c, n / c / 1e6}'
  done
done
