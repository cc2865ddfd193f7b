#!/usr/bin/env bash
# Repository serving rate per signing mode: a pipelined consumer fetches
# segments of one published file through the forwarder (CS disabled, so every
# Data is built from the file and signed per the file's policy).
# Usage: bash bench/repo-serve.sh [SECONDS] [WINDOW]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-3}
win=${2:-64}
cargo build --release -q -p granary -p granary-bench
G=$PWD/target/release/granary
B=$PWD/target/release/granary-bench-fwd
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
hz=$(getconf CLK_TCK)
head -c $((64 << 20)) /dev/urandom > "$tmp/file"
$G --data-dir "$tmp/d" key gen /bench/ed >/dev/null 2>&1
$G --data-dir "$tmp/d" key gen /bench/ec --type ecdsa >/dev/null 2>&1
$G --data-dir "$tmp/d" --socket "$tmp/g.sock" daemon --cs-capacity 0 > "$tmp/out" 2>/dev/null & gpid=$!; pids+=($gpid)
for _ in $(seq 100); do grep -q ready "$tmp/out" && break; sleep 0.05; done
echo "8 KiB segments of a 64 MiB file (page cache), CS off, window $win, ${secs}s, 2 cores shared by consumer and daemon"
printf "%-10s %12s %9s %16s\n" mode "segments/s" "Gbit/s" "daemon µs/seg"
for mode in digest manifest ed25519 ecdsa; do
  key=/bench/ed; [ "$mode" = ecdsa ] && key=/bench/ec
  $G --data-dir "$tmp/d" rm /bench/f0 >/dev/null 2>&1 || true
  $G --data-dir "$tmp/d" put "$tmp/file" /bench/f0 --sign "$mode" --key "$key" --chunking fixed >/dev/null 2>&1
  t0=$(awk '{print $14+$15}' /proc/$gpid/stat)
  r=$($B consumer --connect "$tmp/g.sock" --prefix /bench --window "$win" --flows 1 --secs "$secs" --repeat)
  t1=$(awk '{print $14+$15}' /proc/$gpid/stat)
  us=$(awk -v t=$((t1-t0)) -v hz="$hz" -v n="$(cut -f4 <<<"$r")" 'BEGIN{ printf "%.1f", t/hz*1e6/n }')
  printf "%-10s %12s %9s %16s\n" "$mode" "$(cut -f1 <<<"$r")" "$(cut -f2 <<<"$r")" "$us"
done
echo "(manifest and digest serve DigestSha256 segments; ed25519/ecdsa sign every segment when served)"
