#!/usr/bin/env bash
# Forwarder efficiency over Unix sockets, 8 KiB Data, consumer and producer in
# separate processes (granary-bench-fwd), all in one run:
#  - direct (consumer connected to the producer, no forwarder) beside
#    `granary daemon` with the Content Store off: exchanges/s, the ratio, and
#    forwarder CPU µs per exchange (the daemon's utime + stime / exchanges);
#  - CS hits (1000 names fetched over and over);
#  - 1 vs 2 forwarding threads: the daemon pinned to one core (`taskset`;
#    tokio then starts one worker) beside the default (one per core), and
#    the default threads with the PIT and CS split over 2 shards
#    (`--shards 2`: two faces forward at once instead of taking turns at
#    one lock);
#  - the pipelines alone, in one process on in-process faces
#    (granary-bench-fwd-core), 1 vs 2 threads and 1 vs 2 shards;
#  - PIT bytes per entry: a silent producer, N Interests left pending, the
#    daemon's RSS growth / N;
#  - CS bytes per entry beyond the packet: N small Data fetched once through
#    a daemon with the CS on and one with it off; (RSS difference) / N minus
#    the Data's wire size.
# With INSTR=1 it also counts instructions per exchange with callgrind (the
# VM has no hardware counters for `perf stat -e instructions`): two runs of
# 2,000 and 10,000 exchanges, the difference in the daemon's instructions /
# 8,000, so start-up does not count. INSTR_BEFORE=/path/to/granary adds the
# same count for another build (e.g. the commit before a change).
# GRANARY=/path/to/granary measures another build of the daemon (same load generator).
# Usage: bash bench/forwarder.sh [SECONDS] [WINDOW]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
win=${2:-64}
[ -n "${NO_BUILD:-}" ] || cargo build --release -q -p granary -p granary-bench
G=${GRANARY:-$PWD/target/release/granary}
B=$PWD/target/release/granary-bench-fwd
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
rss_kib() { awk '/VmRSS/{print $2}' "/proc/$1/status"; }
wait_ready() { for _ in $(seq 1200); do grep -q ready "$1" 2>/dev/null && return 0; sleep 0.05; done; echo "timeout waiting for $1" >&2; exit 1; }
n=0
# start_daemon NAME [taskset cpus|-] [daemon args…]: sets $gpid, socket $tmp/NAME.sock
start_daemon() {
  local name=$1 cpus=$2; shift 2
  local pre=()
  [ "$cpus" = "-" ] || pre=(taskset -c "$cpus")
  "${pre[@]}" "$G" --data-dir "$tmp/$name.d" --socket "$tmp/$name.sock" daemon --no-catalog "$@" \
    > "$tmp/$name.out" 2>"$tmp/$name.err" & gpid=$!; pids+=($gpid)
  wait_ready "$tmp/$name.out"
}
start_producer() { # SOCKET [args…]
  local s=$1; shift
  n=$((n+1))
  $B producer --connect "$s" --prefix /bench "$@" > "$tmp/prod$n.out" & pids+=($!)
  wait_ready "$tmp/prod$n.out"
}
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); ${secs}s per run; window $win per flow; 8 KiB Data; commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates bench || echo '+changes')"
printf "%-40s %12s %9s %14s %12s\n" "run" "exchanges/s" "Gbit/s" "fwd µs/exch" "fwd RSS MiB"
row() { printf "%-40s %12s %9s %14s %12s\n" "$@"; }

# Direct: consumer -> producer socket, no forwarder.
$B producer --listen "$tmp/direct.sock" > "$tmp/direct.out" & pids+=($!)
wait_ready "$tmp/direct.out"
for flows in 1 4; do
  r=$($B consumer --connect "$tmp/direct.sock" --prefix /bench --window "$win" --flows $flows --secs "$secs")
  row "direct, $flows flow(s)" "$(cut -f1 <<<"$r")" "$(cut -f2 <<<"$r")" "-" "-"
  echo "direct $flows $(cut -f1 <<<"$r")" >> "$tmp/results"
done
stop_all

# measure LABEL KEY FLOWS [consumer args…]: a consumer run against $gpid.
measure() {
  local label=$1 key=$2 flows=$3; shift 3
  local t0 t1 r us
  t0=$(cpu_ticks $gpid)
  r=$($B consumer --connect "$sock" --prefix /bench --window "$win" --flows "$flows" --secs "$secs" "$@")
  t1=$(cpu_ticks $gpid)
  # CPU ticks include the 0.5 s warm-up; count its exchanges too.
  us=$(awk -v t=$((t1-t0)) -v hz="$hz" -v n="$(cut -f4 <<<"$r")" 'BEGIN{ if (n>0) printf "%.2f", t/hz*1e6/n; else print "-" }')
  row "$label" "$(cut -f1 <<<"$r")" "$(cut -f2 <<<"$r")" "$us" "$(awk '/VmHWM/{printf "%.1f", $2/1024}' /proc/$gpid/status)"
  echo "$key $flows $(cut -f1 <<<"$r") $us" >> "$tmp/results"
}

# Through the forwarder, CS off: default threads (one per core) and one
# shard (the default), one thread, then default threads and 2 shards.
for run in "- 1" "1 1" "- 2"; do
  read -r cpus shards <<<"$run"
  start_daemon fwd "$cpus" --cs-capacity 0 --shards "$shards"
  sock=$tmp/fwd.sock
  start_producer "$sock"
  threads=$([ "$cpus" = "-" ] && nproc || echo 1)
  for flows in 1 4; do
    measure "forwarder, $threads thread(s), $shards shard(s), $flows flow(s)" "fwd${threads}t${shards}s" $flows
  done
  stop_all
done

# The pipelines alone: consumers and producers on in-process faces in one
# process (granary-bench-fwd-core: no sockets, so no kernel copies or
# wake-ups), 4 flows; 1 worker on one core, then 2 workers on two cores with
# 1 and 2 shards. The CPU column is the whole process's (apps included). The
# glibc settings are the daemon's (crates/cli/src/alloc.rs).
C=$PWD/target/release/granary-bench-fwd-core
for run in "0 1 1" "0,1 2 1" "0,1 2 2"; do
  read -r cpus threads shards <<<"$run"
  r=$(GLIBC_TUNABLES=glibc.malloc.trim_threshold=67108864:glibc.malloc.mmap_threshold=4194304 \
    taskset -c "$cpus" "$C" --threads "$threads" --shards "$shards" --flows 4 --window "$win" --secs "$secs")
  row "in-process, $threads thread(s), $shards shard(s), 4 flows" "$(cut -f1 <<<"$r")" "-" "$(cut -f2 <<<"$r") (all)" "-"
done

# CS hits: a daemon with a cache, 1000 names fetched over and over.
start_daemon cs - --cs-capacity 100000
sock=$tmp/cs.sock
start_producer "$sock"
$B consumer --connect "$sock" --prefix /bench --window "$win" --flows 1 --secs 1 --repeat > /dev/null
measure "CS hits, 1 flow" cs 1 --repeat
echo "  cs: $($G --socket "$sock" cs info)"
stop_all

awk '$1=="direct"{d[$2]=$3} $1~/^fwd/{f[$1" "$2]=$3} END{for (k in f) { split(k, a, " "); if (d[a[2]]>0) { split(substr(a[1],4), ts, "t"); printf "forwarder / direct, %s thread(s), %s shard(s), %s flow(s): %.2f\n", ts[1], substr(ts[2],1,length(ts[2])-1), a[2], f[k]/d[a[2]] } }}' "$tmp/results" | sort

# PIT bytes per entry: N Interests pending at a silent producer.
N=${PIT_ENTRIES:-200000}
start_daemon pit - --cs-capacity 0 --no-repo
sock=$tmp/pit.sock
start_producer "$sock" --silent
sleep 0.5
r0=$(rss_kib $gpid)
$B consumer --connect "$sock" --prefix /bench --window "$N" --count "$N" --lifetime 120000 --hold 4 --secs 60 > "$tmp/pit.res" &
cons=$!
sleep 3
r1=$(rss_kib $gpid)
pit=$($G --socket "$sock" status | awk '/pit entries/{print $3}')
wait $cons
name_b=$(( ${#N} + 18 ))
awk -v a="$r0" -v b="$r1" -v n="$pit" 'BEGIN{ printf "PIT: %d entries pending, RSS +%.1f MiB: %.0f bytes per entry (Interest of ~40 bytes, name ~20 bytes, included)\n", n, (b-a)/1024, (b-a)*1024/n }'
stop_all

# CS bytes per entry beyond the packet: the same fetch of N small Data with
# the CS on and off.
N=${CS_ENTRIES:-100000}
for cap in 0 $((N * 2)); do
  start_daemon "cs$cap" - --cs-capacity "$cap" --no-repo
  sock=$tmp/cs$cap.sock
  start_producer "$sock" --size 100
  sleep 0.5
  $B consumer --connect "$sock" --prefix /bench --window "$win" --count "$N" --hold 2 --secs 60 > "$tmp/cs$cap.res" &
  cons=$!
  sleep 1
  while kill -0 $cons 2>/dev/null && [ "$(awk '{print $4}' "$tmp/cs$cap.res" 2>/dev/null)" = "" ]; do
    rss=$(rss_kib $gpid); sleep 0.5
  done
  echo "$cap $(rss_kib $gpid) $($G --socket "$sock" cs info | tr ' ' '\n' | awk -F= '/^entries/{print $2}') $(cut -f5 "$tmp/cs$cap.res")" >> "$tmp/csmem"
  wait $cons || true
  stop_all
done
awk 'NR==1{off=$2} NR==2{on=$2; n=$3; w=$4} END{ printf "CS: %d entries of %d-byte Data, RSS +%.1f MiB over the same run with the CS off: %.0f bytes per entry beyond the packet\n", n, w, (on-off)/1024, (on-off)*1024/n - w }' "$tmp/csmem"

# Instructions per exchange (callgrind), optional.
instr() { # BINARY -> instructions per exchange
  local bin=$1 out=() mallocs=() cnt
  for cnt in 2000 10000; do
    # A previous run's `ready` line or socket must not be taken for this one's.
    rm -f "$tmp/cg.out" "$tmp/cg.sock"
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$cnt" "$bin" --data-dir "$tmp/cg.d$cnt" --socket "$tmp/cg.sock" daemon --no-catalog --no-repo --cs-capacity 0 > "$tmp/cg.out" 2>/dev/null & gpid=$!; pids+=($gpid)
    wait_ready "$tmp/cg.out"
    start_producer "$tmp/cg.sock"
    $B consumer --connect "$tmp/cg.sock" --prefix /bench --window "$win" --count $cnt --secs 600 > /dev/null
    kill -TERM $gpid; wait $gpid 2>/dev/null || true
    stop_all
    out+=("$(awk '/^totals:|^summary:/{print $2; exit}' "$tmp/cg.$cnt")")
    # malloc calls in the whole daemon (its callers' call counts summed).
    mallocs+=("$(callgrind_annotate --tree=caller "$tmp/cg.$cnt" 2>/dev/null | awk '/^ *$/{n=0} /< /{ if (match($0, /\([0-9,]+x\)/)) { c=substr($0, RSTART+1, RLENGTH-3); gsub(",", "", c); n+=c } } /\* .*malloc\.c:malloc /{print n; exit}')")
    rm -rf "$tmp/cg.d$cnt" "$tmp/cg.$cnt"*
  done
  awk -v a="${out[0]}" -v b="${out[1]}" -v ma="${mallocs[0]:-0}" -v mb="${mallocs[1]:-0}" 'BEGIN{ printf "%.0f (malloc calls per exchange: %.3f)", (b-a)/8000, (mb-ma)/8000 }'
}
if [ -n "${INSTR:-}" ]; then
  echo "instructions per exchange (callgrind, CS off): $(instr "$G")"
  if [ -n "${INSTR_BEFORE:-}" ]; then
    echo "instructions per exchange, $INSTR_BEFORE: $(instr "$INSTR_BEFORE")"
  fi
fi
