#!/usr/bin/env bash
# Two builds of the daemon side by side, interleaved (A, B, A, B, …) so that
# both see the same load on a shared machine: forwarder CPU µs per 8 KiB
# exchange (the daemon's utime + stime / exchanges) and exchanges/s, one
# consumer run of SECONDS per round, same load generator as bench/forwarder.sh.
# Usage: bash bench/forwarder-ab.sh GRANARY_A GRANARY_B [ROUNDS] [FLOWS] [cs]
#   cs: the Content Store on and 1000 names fetched over and over (CS hits).
# SECONDS_PER_RUN (default 3) and WINDOW (default 64) come from the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
a=$1 b=$2 rounds=${3:-3} flows=${4:-1} mode=${5:-}
secs=${SECONDS_PER_RUN:-3} win=${WINDOW:-64}
B=$PWD/target/release/granary-bench-fwd
hz=$(getconf CLK_TCK)
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
wait_ready() { for _ in $(seq 1200); do grep -q ready "$1" 2>/dev/null && return 0; sleep 0.05; done; echo "timeout waiting for $1" >&2; exit 1; }
cap=0 extra=()
if [ "$mode" = cs ]; then cap=100000 extra=(--repeat); fi
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); ${secs}s per run; window $win; $flows flow(s); ${mode:-CS off}"
printf "%-6s %-40s %12s %12s %6s\n" round build exchanges/s "fwd µs/exch" load
for r in $(seq "$rounds"); do
  for g in "$a" "$b"; do
    rm -rf "$tmp/d" "$tmp/s.sock" "$tmp"/*.out
    "$g" --data-dir "$tmp/d" --socket "$tmp/s.sock" daemon --no-catalog --cs-capacity "$cap" > "$tmp/d.out" 2>/dev/null & gp=$!; pids=($gp)
    wait_ready "$tmp/d.out"
    "$B" producer --connect "$tmp/s.sock" --prefix /bench > "$tmp/p.out" & pids+=($!)
    wait_ready "$tmp/p.out"
    if [ "$mode" = cs ]; then
      "$B" consumer --connect "$tmp/s.sock" --prefix /bench --window "$win" --secs 1 --repeat > /dev/null
    fi
    t0=$(awk '{print $14+$15}' "/proc/$gp/stat")
    res=$("$B" consumer --connect "$tmp/s.sock" --prefix /bench --window "$win" --flows "$flows" --secs "$secs" "${extra[@]}")
    t1=$(awk '{print $14+$15}' "/proc/$gp/stat")
    us=$(awk -v t=$((t1-t0)) -v hz="$hz" -v n="$(cut -f4 <<<"$res")" 'BEGIN{ if (n>0) printf "%.2f", t/hz*1e6/n; else print "-" }')
    printf "%-6s %-40s %12s %12s %6s\n" "$r" "$g" "$(cut -f1 <<<"$res")" "$us" "$(cut -d' ' -f1 /proc/loadavg)"
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=()
  done
done
