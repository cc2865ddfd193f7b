#!/usr/bin/env bash
# Federation benchmark. Three daemons on loopback, each with its own data directory
# and TCP faces: sites A (/site/a) and B (/site/b) and a consumer C, all on one
# throw-away PostgreSQL cluster as the shared location catalog (fsync on).
#  1. Time to first byte of `get -o -` by C (a 1 MiB file, a new one each run, CS
#     erased): with a location lookup (C routes only the node prefixes: NoRoute, the
#     catalog, hinted Interests) and without (C also routes /cmip6 to A). Medians.
#  2. Failover: C fetches a FAIL_MIB file that A and B both hold (A nearer: route
#     cost 10 against 20) into a FIFO; A is killed (SIGKILL) once a third of the
#     bytes came out. Seconds lost = that fetch's time minus the same fetch with no
#     kill (and the longest pause in the output after the kill); segments fetched
#     twice = `located.refetched` of `get --json`.
#  3. (run before 2, which kills A) `granary replicate --to /site/b` of a REP_MIB file (B fetches it from A), beside
#     B's plain `get` of the same version; then a second file whose first half B
#     already holds (its own `put` of that half).
#  4. The location catalog at LOC_N locations of LOC_NODES nodes on PostgreSQL:
#     registration rate in batches and lookup p50, with the server's CPU
#     (crates/catalog/examples/location_bench.rs, the catalog's own code).
# Wall time and peak RSS from GNU time; every output is compared with the original.
# Usage: bash bench/federation.sh [REP_MIB=1024] [FAIL_MIB=256] [RUNS=5]
#   env LOC_N=10000000 LOC_NODES=20 LOAD_S=300 BATCH=10000; PARTS="1 2 3 4";
#   NO_BUILD=1 skips the release build; GRANARY=path/to/granary (parts 1-3);
#   KEEP_JSON=DIR keeps part 3's replicate reports there
# Needs PostgreSQL (scripts/setup-test-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
rep_mib=${1:-1024}
fail_mib=${2:-256}
runs=${3:-5}
parts=${PARTS:-1 2 3 4}
if [ -z "${NO_BUILD:-}" ]; then
  cargo build --release -q -p granary
  cargo build --release -q -p granary-catalog --example location_bench
fi
G=${GRANARY:-$PWD/target/release/granary}
[ -x /usr/bin/time ] || { echo "GNU time missing: apt-get install time" >&2; exit 1; }
PGBIN=/usr/lib/postgresql/15/bin
[ -x "$PGBIN/initdb" ] || PGBIN=$(dirname "$(command -v initdb)")
echo "commit $(git rev-parse --short HEAD); $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"

tmp=$(mktemp -d -p "${BENCH_TMP:-/tmp}" granary-fed-XXXXXX)
chmod 755 "$tmp"
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -c "$1"; else sh -c "$1"; fi; }
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -d "$tmp/pg/data" ] && as_pg "$PGBIN/pg_ctl -D $tmp/pg/data -m immediate -w stop >/dev/null 2>&1" || true
  rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mibrss() { awk -v k="$1" 'BEGIN{ printf "%.0f MiB", k/1024 }'; }
gbps() { awk -v b="$1" -v s="$2" 'BEGIN{ printf "%.2f", b*8/s/1e9 }'; }
median() { sort -g | awk '{ a[NR]=$1 } END { print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2) }'; }
json() { python3 -c "import json,sys; v=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }

if [[ " $parts " =~ " "[123]" " ]]; then
  mkdir -p "$tmp/pg"
  if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$tmp/pg"; fi
  pgport=$(free_port)
  as_pg "$PGBIN/initdb -D $tmp/pg/data -A trust -U postgres >$tmp/pg/initdb.log 2>&1"
  as_pg "$PGBIN/pg_ctl -D $tmp/pg/data -l $tmp/pg/server.log -w -o '-p $pgport -c listen_addresses=127.0.0.1 -k $tmp/pg' start >/dev/null"
  "$PGBIN/psql" -q -h 127.0.0.1 -p "$pgport" -U postgres -c "CREATE DATABASE granary" postgres
  url="postgres://postgres@127.0.0.1:$pgport/granary"
  declare -A port pid
  node() { local n=$1; shift; "$G" --data-dir "$tmp/$n" --socket "$tmp/$n.sock" "$@"; }
  start() {
    local n=$1 prefix=$2
    port[$n]=$(free_port)
    # The daemon itself is the background job ($! its pid: part 2 kills it).
    GRANARY_LOG=warn "$G" --data-dir "$tmp/$n" --socket "$tmp/$n.sock" --catalog "$url" daemon \
      --listen "tcp://127.0.0.1:${port[$n]}" --node-prefix "$prefix" --http off > "$tmp/$n.out" 2> "$tmp/$n.err" &
    pid[$n]=$!; pids+=($!)
    for _ in $(seq 200); do grep -q '^ready' "$tmp/$n.out" 2>/dev/null && return; sleep 0.05; done
    echo "daemon $n did not start:" >&2; cat "$tmp/$n.err" >&2; exit 1
  }
  start a /site/a; start b /site/b; start c /site/c
  node b route add /site/a "tcp4://127.0.0.1:${port[a]}" > /dev/null
  node a route add /site/b "tcp4://127.0.0.1:${port[b]}" > /dev/null
  node c route add /site/a "tcp4://127.0.0.1:${port[a]}" --cost 10 > /dev/null
  node c route add /site/b "tcp4://127.0.0.1:${port[b]}" --cost 20 > /dev/null
  head -c 1048576 /dev/urandom > "$tmp/first.bin"
  node a put "$tmp/first.bin" /cmip6/first > /dev/null 2>&1
  key=$(node a key list | tr -s ' \t' '\n\n' | grep '/KEY/' | grep -v '/self/' | head -1)
  node a key export "$key" > "$tmp/a.cert"
  node b key trust "$tmp/a.cert" > /dev/null 2>&1
  node c key trust "$tmp/a.cert" > /dev/null 2>&1
  cs_erase() { for n in a b c; do [ -e "/proc/${pid[$n]}" ] && node "$n" cs erase / > /dev/null 2>&1 || true; done; }
fi

if [[ " $parts " =~ " 1 " ]]; then
  # Time from the start of `get` to its first byte on standard output.
  ttfb() {
    python3 - "$@" <<'EOF'
import subprocess, sys, time
t = time.monotonic()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
first = p.stdout.read(1)
t1 = time.monotonic()
rest = p.stdout.read()
err = p.stderr.read()
if p.wait() != 0 or not first:
    sys.stderr.write(err.decode()); sys.exit(1)
print(f"{(t1 - t) * 1000:.1f} {len(first) + len(rest)}")
EOF
  }
  # The route case's names have a route (to A); the lookup case's have none.
  node c route add /cmip6/ttfb/route "tcp4://127.0.0.1:${port[a]}" --cost 10 > /dev/null
  for case in lookup route; do
    : > "$tmp/ttfb.$case"
    for r in $(seq "$runs"); do
      head -c 1048576 /dev/urandom > "$tmp/t.bin"
      node a put "$tmp/t.bin" "/cmip6/ttfb/$case/f$r" > /dev/null 2>&1
      cs_erase
      read -r ms n < <(ttfb "$G" --data-dir "$tmp/c" --socket "$tmp/c.sock" --catalog "$url" \
        get "/cmip6/ttfb/$case/f$r" -o - --no-publish --no-dedup --quiet)
      [ "$n" = 1048576 ] || { echo "ttfb $case: $n bytes" >&2; exit 1; }
      echo "$ms" >> "$tmp/ttfb.$case"
    done
  done
  l=$(median < "$tmp/ttfb.lookup"); w=$(median < "$tmp/ttfb.route")
  echo "1. time to first byte (1 MiB, $runs runs, median ms): lookup $l (all: $(tr '\n' ' ' < "$tmp/ttfb.lookup")), route $w (all: $(tr '\n' ' ' < "$tmp/ttfb.route")); lookup costs $(awk -v a="$l" -v b="$w" 'BEGIN{printf "%+.1f", a-b}') ms"
fi

if [[ " $parts " =~ " 3 " ]]; then
  bytes=$((rep_mib << 20))
  head -c "$bytes" /dev/urandom > "$tmp/rep.bin"
  want=$(sha256sum "$tmp/rep.bin" | cut -d' ' -f1)
  node a put "$tmp/rep.bin" /bench/rep > /dev/null 2>&1
  cs_erase
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$G" --data-dir "$tmp/b" --socket "$tmp/b.sock" get /bench/rep --fwhint /site/a -o "$tmp/rep.out" --no-publish --quiet
  read -r get_s get_rss < "$tmp/time"
  [ "$(sha256sum "$tmp/rep.out" | cut -d' ' -f1)" = "$want" ] || { echo "get: wrong bytes" >&2; exit 1; }
  rm -f "$tmp/rep.out"
  cs_erase
  b_cpu0=$(awk '{ print ($14 + $15) / 100 }' "/proc/${pid[b]}/stat")
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$G" --data-dir "$tmp/a" --socket "$tmp/a.sock" replicate /bench/rep --to /site/b --json > "$tmp/rep.json"
  read -r rep_s _ < "$tmp/time"
  b_cpu=$(awk -v c0="$b_cpu0" '{ printf "%.2f", ($14 + $15) / 100 - c0 }' "/proc/${pid[b]}/stat")
  node b get /bench/rep -o "$tmp/rep.out" --no-publish --quiet --no-locate
  [ "$(sha256sum "$tmp/rep.out" | cut -d' ' -f1)" = "$want" ] || { echo "replica: wrong bytes" >&2; exit 1; }
  rm -f "$tmp/rep.out"
  # Half present: B publishes the first half itself, then A asks it to hold the whole.
  head -c $((bytes / 2)) /dev/urandom > "$tmp/h1.bin"
  head -c $((bytes / 2)) /dev/urandom > "$tmp/h2.bin"
  node b put "$tmp/h1.bin" /bench/b-half > /dev/null 2>&1
  cat "$tmp/h1.bin" "$tmp/h2.bin" > "$tmp/rep.bin"; rm -f "$tmp/h1.bin" "$tmp/h2.bin"
  node a put "$tmp/rep.bin" /bench/rep2 > /dev/null 2>&1
  cs_erase
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$G" --data-dir "$tmp/a" --socket "$tmp/a.sock" replicate /bench/rep2 --to /site/b --json > "$tmp/rep2.json"
  read -r half_s _ < "$tmp/time"
  local_mib=$(tail -1 "$tmp/rep2.json" | json 'round(v["dedup"]["local"]["bytes"] / 1048576)')
  # Where a replication's time goes: the fetch (its statistics) and the rest
  # (the replica's ingest and the location registration), on B.
  split() { tail -1 "$1" | json '"fetch %.2f s + keep %.2f s" % (v["phases"]["fetch"], v["seconds"] - v["phases"]["fetch"])'; }
  [ -n "${KEEP_JSON:-}" ] && cp "$tmp/rep.json" "$tmp/rep2.json" "$KEEP_JSON/" 
  b_rss=$(awk '/VmHWM/ { print $2 }' "/proc/${pid[b]}/status")
  rm -f "$tmp/rep.bin"
  echo "3. $rep_mib MiB A -> B: plain get by B ${get_s} s ($(gbps "$bytes" "$get_s") Gbit/s, peak RSS $(mibrss "$get_rss")); replicate --to ${rep_s} s [$(split "$tmp/rep.json")] ($(gbps "$bytes" "$rep_s") Gbit/s, $(awk -v a="$get_s" -v b="$rep_s" 'BEGIN{printf "%.2f", a/b}')x get; B's daemon CPU ${b_cpu} s, peak RSS $(mibrss "$b_rss")); half present (${local_mib} MiB from B's own chunks): ${half_s} s [$(split "$tmp/rep2.json")] ($(gbps "$bytes" "$half_s") Gbit/s of the file)"
fi

if [[ " $parts " =~ " 2 " ]]; then
  head -c $((fail_mib << 20)) /dev/urandom > "$tmp/big.bin"
  want=$(sha256sum "$tmp/big.bin" | cut -d' ' -f1)
  node a put "$tmp/big.bin" /cmip6/big > /dev/null 2>&1
  node a replicate /cmip6/big --to /site/b > /dev/null 2>&1
  # C's get writes into a FIFO read here: A is killed once a third of the bytes came
  # out (in order, verified), the bytes are hashed as they come, and the longest
  # pause in the output after the kill is noted.
  mkfifo "$tmp/big.fifo"
  fetch() {
    python3 - "$1" "$tmp/big.fifo" "$G" --data-dir "$tmp/c" --socket "$tmp/c.sock" --catalog "$url" \
      get /cmip6/big -o "$tmp/big.fifo" --no-publish --no-dedup --quiet --json <<'EOF2'
import hashlib, json, os, signal, subprocess, sys, time
kill_pid, fifo, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
t0 = time.monotonic()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
h, n, t_kill, last, gap = hashlib.sha256(), 0, None, None, 0.0
total = None
with open(fifo, "rb") as f:
    while True:
        b = f.read(1 << 20)
        if not b:
            break
        now = time.monotonic()
        if t_kill is not None:
            gap = max(gap, now - last)
        last = now
        h.update(b)
        n += len(b)
        if kill_pid and t_kill is None and n >= int(os.environ["KILL_AT"]):
            os.kill(kill_pid, signal.SIGKILL)
            t_kill = last = time.monotonic()
out, err = p.communicate()
if p.returncode != 0:
    sys.stderr.write(err.decode()); sys.exit(1)
v = json.loads(out)
loc = v["located"]
print(f"{time.monotonic() - t0:.2f} {h.hexdigest()} {n} {(t_kill or t0) - t0:.2f} {gap:.2f} "
      f"{loc['hint_switches']} {loc['refetched']} {v['stats']['segments']}")
EOF2
  }
  cs_erase
  export KILL_AT=0
  read -r base_s got _ _ _ base_sw _ _ < <(fetch 0)
  [ "$got" = "$want" ] || { echo "failover base: wrong bytes" >&2; exit 1; }
  cs_erase
  export KILL_AT=$(((fail_mib << 20) / 3))
  read -r fail_s got _ t_kill gap sw ref segs < <(fetch "${pid[a]}")
  [ "$got" = "$want" ] || { echo "failover: wrong bytes" >&2; exit 1; }
  echo "2. failover ($fail_mib MiB): no kill ${base_s} s (hint switches $base_sw); A killed at +${t_kill} s (a third of the bytes out): ${fail_s} s, seconds lost $(awk -v a="$fail_s" -v b="$base_s" 'BEGIN{printf "%.2f", a-b}'), longest pause in the output after the kill ${gap} s; hint switches $sw; segments fetched twice $ref of $segs"
  rm -f "$tmp/big.fifo" "$tmp/big.bin"
fi

if [[ " $parts " =~ " 4 " ]]; then
  # The daemons and their cluster are done: the catalog bench has the machine.
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true; pids=()
  echo "4. location catalog (PostgreSQL 15, fsync on):"
  LOAD_S=${LOAD_S:-300} BATCH=${BATCH:-10000} target/release/examples/location_bench "${LOC_N:-10000000}" "${LOC_NODES:-20}" \
    | sed 's/^/   /'
fi
