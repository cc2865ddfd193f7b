#!/usr/bin/env bash
# Forwarder throughput over Unix sockets, 8 KiB Data, consumer and producer in
# separate processes: through `granary daemon`, and the same consumer/producer
# connected directly (no forwarder), in one run. Also CS-hit serving rate.
# Prints exchanges/s, Gbit/s, forwarder CPU µs per exchange and peak RSS.
# Usage: bash bench/forwarder.sh [SECONDS] [WINDOW]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
win=${2:-64}
[ -n "${NO_BUILD:-}" ] || cargo build --release -q -p granary -p granary-bench
G=target/release/granary
B=target/release/granary-bench-fwd
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
wait_ready() { for _ in $(seq 100); do grep -q ready "$1" 2>/dev/null && return 0; sleep 0.05; done; echo "timeout waiting for $1" >&2; exit 1; }

echo "machine: $(nproc) cores; ${secs}s per run; window $win per flow; 8 KiB Data"
printf "%-34s %12s %9s %14s %12s\n" "run" "exchanges/s" "Gbit/s" "fwd µs/exch" "fwd RSS MiB"

# Direct: consumer -> producer socket, no forwarder.
$B producer --listen "$tmp/direct.sock" > "$tmp/direct.out" & pids+=($!)
wait_ready "$tmp/direct.out"
for flows in 1 4; do
  r=$($B consumer --connect "$tmp/direct.sock" --prefix /bench --window "$win" --flows $flows --secs "$secs")
  printf "%-34s %12s %9s %14s %12s\n" "direct, $flows flow(s)" "$(cut -f1 <<<"$r")" "$(cut -f2 <<<"$r")" "-" "-"
  echo "direct $flows $r" >> "$tmp/results"
done

# Through the forwarder.
$G --data-dir "$tmp/d" --socket "$tmp/g.sock" daemon --cs-capacity 0 > "$tmp/daemon.out" 2>"$tmp/daemon.err" & gpid=$!; pids+=($gpid)
wait_ready "$tmp/daemon.out"
$B producer --connect "$tmp/g.sock" --prefix /bench > "$tmp/prod.out" & pids+=($!)
wait_ready "$tmp/prod.out"
for flows in 1 4; do
  t0=$(cpu_ticks $gpid)
  r=$($B consumer --connect "$tmp/g.sock" --prefix /bench --window "$win" --flows $flows --secs "$secs")
  t1=$(cpu_ticks $gpid)
  ex=$(cut -f1 <<<"$r")
  # CPU ticks include the 0.5 s warm-up; count its exchanges too.
  total=$(cut -f4 <<<"$r")
  us=$(awk -v t=$((t1-t0)) -v hz="$hz" -v n="$total" 'BEGIN{ if (n>0) printf "%.1f", t/hz*1e6/n; else print "-" }')
  rss=$(awk '/VmHWM/{printf "%.1f", $2/1024}' /proc/$gpid/status)
  printf "%-34s %12s %9s %14s %12s\n" "granary forwarder, $flows flow(s)" "$ex" "$(cut -f2 <<<"$r")" "$us" "$rss"
  echo "fwd $flows $r" >> "$tmp/results"
done
kill $gpid; wait $gpid 2>/dev/null || true

# CS hits: a daemon with a cache, 1000 names fetched over and over.
$G --data-dir "$tmp/d2" --socket "$tmp/g2.sock" daemon --cs-capacity 100000 > "$tmp/daemon2.out" 2>/dev/null & gpid=$!; pids+=($gpid)
wait_ready "$tmp/daemon2.out"
$B producer --connect "$tmp/g2.sock" --prefix /bench > "$tmp/prod2.out" & pids+=($!)
wait_ready "$tmp/prod2.out"
$B consumer --connect "$tmp/g2.sock" --prefix /bench --window "$win" --flows 1 --secs 1 --repeat > /dev/null
t0=$(cpu_ticks $gpid)
r=$($B consumer --connect "$tmp/g2.sock" --prefix /bench --window "$win" --flows 1 --secs "$secs" --repeat)
t1=$(cpu_ticks $gpid)
us=$(awk -v t=$((t1-t0)) -v hz="$hz" -v n="$(cut -f4 <<<"$r")" 'BEGIN{ printf "%.1f", t/hz*1e6/n }')
rss=$(awk '/VmHWM/{printf "%.1f", $2/1024}' /proc/$gpid/status)
printf "%-34s %12s %9s %14s %12s\n" "granary CS hits, 1 flow" "$(cut -f1 <<<"$r")" "$(cut -f2 <<<"$r")" "$us" "$rss"
hits=$($G --socket "$tmp/g2.sock" cs info)
echo "cs: $hits"

awk '$1=="direct"{d[$2]=$3} $1=="fwd"{f[$2]=$3} END{for (k in f) if (d[k]>0) printf "forwarder / direct, %s flow(s): %.2f\n", k, f[k]/d[k]}' "$tmp/results"
