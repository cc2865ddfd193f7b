#!/usr/bin/env bash
# What a user sees for a file: default `granary put` of a MiB-sized random file, then
# default `granary get` of it on the same node (no flags anywhere), wall time of each
# from GNU time, the output compared with the original. One daemon per build; with
# several builds the rounds are interleaved (A, B, A, B, …) so that they share the
# machine's load, and every round starts from the same state (the previous version
# removed, `sync`, 1 s pause: see "Machine" in RESULTS.md). PREP=cold instead starts
# each round as a user's first run on this VM does: page cache dropped, the source
# read back in, 3 s for the freed memory to go back to the host (root only).
# Usage: bash bench/put-get.sh [MiB] [ROUNDS] [GRANARY …]   (default: this checkout's
# release build, 128 MiB, 5 rounds)
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-128}
rounds=${2:-5}
shift $(( $# < 2 ? $# : 2 ))
builds=("$@")
if [ ${#builds[@]} -eq 0 ]; then
  cargo build --release -q -p granary
  builds=("$PWD/target/release/granary")
fi
[ -x /usr/bin/time ] || { echo "GNU time missing: apt-get install time" >&2; exit 1; }
tmp=$(mktemp -d -p "${BENCH_TMP:-/tmp}")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
head -c $((mib << 20)) /dev/urandom > "$tmp/file"
want=$(sha256sum "$tmp/file" | cut -d' ' -f1)
for k in "${!builds[@]}"; do
  "${builds[$k]}" --data-dir "$tmp/d$k" --socket "$tmp/s$k" daemon > "$tmp/out$k" 2> "$tmp/err$k" & pids+=($!)
done
for k in "${!builds[@]}"; do
  for _ in $(seq 400); do grep -q ready "$tmp/out$k" && break; sleep 0.05; done
  grep -q ready "$tmp/out$k" || { echo "daemon $k did not start" >&2; cat "$tmp/err$k" >&2; exit 1; }
done
echo "$mib MiB random file, default put then default get on the same node; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg); commit $(git rev-parse --short HEAD)"
printf "%-6s %-34s %8s %8s %8s %8s\n" round build "put s" "get s" "total s" "Gbit/s"
gbps() { awk -v b=$((mib << 20)) -v s="$1" 'BEGIN{ printf "%.2f", b*8/s/1e9 }'; }
for r in $(seq "$rounds"); do
  for k in "${!builds[@]}"; do
    G=("${builds[$k]}" --data-dir "$tmp/d$k" --socket "$tmp/s$k")
    "${G[@]}" rm /bench/obj > /dev/null 2>&1 || true
    rm -f "$tmp/got"; sync
    if [ "${PREP:-}" = cold ]; then
      echo 1 > /proc/sys/vm/drop_caches; cat "$tmp/file" > /dev/null; sleep 3
    else
      sleep 1
    fi
    /usr/bin/time -f "%e" -o "$tmp/tp" "${G[@]}" put "$tmp/file" /bench/obj > /dev/null 2> "$tmp/e" || { cat "$tmp/e" >&2; exit 1; }
    /usr/bin/time -f "%e" -o "$tmp/tg" "${G[@]}" get /bench/obj -o "$tmp/got" > /dev/null 2> "$tmp/e" || { cat "$tmp/e" >&2; exit 1; }
    [ "$(sha256sum "$tmp/got" | cut -d' ' -f1)" = "$want" ] || { echo "build $k: wrong bytes" >&2; exit 1; }
    p=$(cat "$tmp/tp"); g=$(cat "$tmp/tg"); t=$(awk -v a="$p" -v b="$g" 'BEGIN{print a+b}')
    echo "$k $p $g $t" >> "$tmp/all"
    printf "%-6s %-34s %8s %8s %8s %8s\n" "$r" "${builds[$k]}" "$p" "$g" "$t" "$(gbps "$t")"
  done
done
echo "medians:"
for k in "${!builds[@]}"; do
  med() { awk -v k="$k" -v c="$1" '$1==k{print $c}' "$tmp/all" | sort -n | awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
  t=$(med 4)
  printf "  %s: put %s s, get %s s, put + get %s s: %s Gbit/s\n" "${builds[$k]}" "$(med 2)" "$(med 3)" "$t" "$(gbps "$t")"
done
