#!/usr/bin/env bash
# The cost of a byte between nodes (issue 48): node B's default `granary get` of one
# file that node A holds, over TCP loopback, for each build given, rounds interleaved
# so that every build shares the machine's load. Each build has its own pair of nodes
# (A and B of the same build); each fetch starts cold (B without the object, both
# content stores erased) and its output is compared with the original.
# Per fetch: wall time, Gbit/s, and CPU seconds per GiB of `get` (getrusage of the
# child, GNU time), node A and node B (/proc/<pid>/stat utime+stime before and after;
# B's counters are read when `get` exits, before B keeps its copy in the background).
# Medians per build at the end, and each build's ratio to the first.
#   bash bench/between-nodes.sh [MiB] [ROUNDS] [GRANARY…]   (default: 512 3 target/release/granary)
# PERF=DIR: after the rounds, one more fetch per build under `perf record -g` for A, B
# and `get` (perf.data files and `perf report` summaries in DIR).
# GET_ARGS: extra `get` flags (default none: the defaults are what is measured).
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-512}
rounds=${2:-3}
shift 2 || true
builds=("$@")
[ ${#builds[@]} -gt 0 ] || { cargo build --release -q -p granary; builds=("$PWD/target/release/granary"); }
[ -x /usr/bin/time ] || { echo "GNU time missing: apt-get install time" >&2; exit 1; }
tmp=$(mktemp -d -p "${BENCH_TMP:-/tmp}")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
head -c $((mib << 20)) /dev/urandom > "$tmp/file"
want=$(sha256sum "$tmp/file" | cut -d' ' -f1)
bytes=$((mib << 20))
gib=$(awk -v b=$bytes 'BEGIN{ print b / 1073741824 }')
cpu() { awk '{ printf "%.3f", ($14 + $15) / 100 }' "/proc/$1/stat"; }
declare -A pid_a pid_b
for i in "${!builds[@]}"; do
  G=${builds[$i]}
  d=$tmp/b$i
  mkdir -p "$d"
  port=$((20000 + RANDOM % 20000))
  "$G" --data-dir "$d/a" --socket "$d/a.sock" daemon --listen "tcp://127.0.0.1:$port" > "$d/aout" 2> "$d/aerr" &
  pids+=($!); pid_a[$i]=$!
  "$G" --data-dir "$d/b" --socket "$d/b.sock" daemon > "$d/bout" 2> "$d/berr" &
  pids+=($!); pid_b[$i]=$!
  for _ in $(seq 1200); do grep -q ready "$d/aout" && grep -q ready "$d/bout" && break; sleep 0.05; done
  "$G" --data-dir "$d/a" --socket "$d/a.sock" put "$tmp/file" /bench/obj > /dev/null 2> "$d/puterr" || { cat "$d/puterr" >&2; exit 1; }
  "$G" --data-dir "$d/a" --socket "$d/a.sock" key export > "$d/a.cert" 2>/dev/null
  "$G" --data-dir "$d/b" --socket "$d/b.sock" key trust "$d/a.cert" > /dev/null 2>&1
  "$G" --data-dir "$d/b" --socket "$d/b.sock" route add /bench "tcp4://127.0.0.1:$port" > /dev/null
done
# fetch I [WRAP…]: one cold fetch by node B of build I; prints "s get_cpu a_cpu b_cpu".
fetch() {
  local i=$1; shift
  local G=${builds[$i]} d=$tmp/b$i
  local B=("$G" --data-dir "$d/b" --socket "$d/b.sock")
  "${B[@]}" rm /bench/obj > /dev/null 2>&1 || true
  "${B[@]}" cs erase /bench > /dev/null
  "$G" --data-dir "$d/a" --socket "$d/a.sock" cs erase /bench > /dev/null
  local a0 b0 a1 b1
  a0=$(cpu "${pid_a[$i]}"); b0=$(cpu "${pid_b[$i]}")
  /usr/bin/time -f "%e %U %S" -o "$tmp/time" "$@" "${B[@]}" get ${GET_ARGS:-} /bench/obj -o "$tmp/out" > /dev/null 2> "$tmp/err" \
    || { cat "$tmp/err" >&2; exit 1; }
  a1=$(cpu "${pid_a[$i]}"); b1=$(cpu "${pid_b[$i]}")
  [ "$(sha256sum "$tmp/out" | cut -d' ' -f1)" = "$want" ] || { echo "build $i: wrong bytes" >&2; exit 1; }
  rm -f "$tmp/out"
  # B keeps a copy in its repository in the background: let it finish first.
  for _ in $(seq 600); do "${B[@]}" ls /bench 2>/dev/null | grep -q /bench/obj && break; sleep 0.1; done
  local s gu gs
  read -r s gu gs < "$tmp/time"
  echo "$s $(awk -v u="$gu" -v s="$gs" 'BEGIN{print u+s}') $(awk -v x="$a0" -v y="$a1" 'BEGIN{print y-x}') $(awk -v x="$b0" -v y="$b1" 'BEGIN{print y-x}')"
}
echo "$mib MiB random file, node B <- TCP loopback <- node A, default get; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in "${!builds[@]}"; do echo "build $i: ${builds[$i]}"; done
printf "%-5s %-5s %7s %7s %8s %8s %8s %8s\n" round build s "Gbit/s" "get" "node A" "node B" "sum"
printf "%-5s %-5s %7s %7s %35s\n" "" "" "" "" "(CPU s per GiB)"
for r in $(seq "$rounds"); do
  for i in "${!builds[@]}"; do
    read -r s g a b < <(fetch "$i")
    echo "$s $g $a $b" >> "$tmp/res$i"
    awk -v r="$r" -v i="$i" -v s="$s" -v g="$g" -v a="$a" -v b="$b" -v by=$bytes -v gib="$gib" \
      'BEGIN{ printf "%-5s %-5s %7.2f %7.2f %8.2f %8.2f %8.2f %8.2f\n", r, i, s, by*8/s/1e9, g/gib, a/gib, b/gib, (g+a+b)/gib }'
  done
done
echo "medians (load now $(cut -d' ' -f1-3 /proc/loadavg)):"
med() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
for i in "${!builds[@]}"; do
  s=$(cut -d' ' -f1 "$tmp/res$i" | med); g=$(cut -d' ' -f2 "$tmp/res$i" | med)
  a=$(cut -d' ' -f3 "$tmp/res$i" | med); b=$(cut -d' ' -f4 "$tmp/res$i" | med)
  sum=$(awk '{print $2+$3+$4}' "$tmp/res$i" | med)
  echo "$s $sum" > "$tmp/med$i"
  read -r s0 sum0 < "$tmp/med0"
  awk -v i="$i" -v s="$s" -v g="$g" -v a="$a" -v b="$b" -v sum="$sum" -v s0="$s0" -v sum0="$sum0" -v by=$bytes -v gib="$gib" \
    'BEGIN{ printf "build %s: %.2f Gbit/s (%.2fx build 0); CPU s/GiB get %.2f, A %.2f, B %.2f, sum %.2f (%.2fx build 0)\n", i, by*8/s/1e9, s0/s, g/gib, a/gib, b/gib, sum/gib, sum/sum0 }'
done
if [ -n "${PERF:-}" ]; then
  mkdir -p "$PERF"
  for i in "${!builds[@]}"; do
    perf record -q -g -F 2000 -p "${pid_a[$i]}" -o "$PERF/a$i.data" 2>/dev/null & pa=$!
    perf record -q -g -F 2000 -p "${pid_b[$i]}" -o "$PERF/b$i.data" 2>/dev/null & pb=$!
    sleep 0.5
    fetch "$i" perf record -q -g -F 2000 -o "$PERF/get$i.data" -- > /dev/null
    kill -INT "$pa" "$pb"; wait "$pa" "$pb" 2>/dev/null || true
    for p in a b get; do
      perf report -i "$PERF/$p$i.data" --no-children --percent-limit 1.5 --stdio 2>/dev/null \
        | grep -E '^ +[0-9]' > "$PERF/$p$i.txt" || true
    done
    echo "perf of build $i in $PERF/{a,b,get}$i.{data,txt}"
  done
fi
