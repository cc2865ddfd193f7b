#!/usr/bin/env bash
# Ingest of one file three ways in one run, side by side:
#   (1) granary put FILE NAME                        local ingest into a data directory
#                                                    (no daemon on it, so put writes itself)
#   (2) ndn-python-repo 0.3's PutfileClient -> Granary's repo (granary daemon, /granary/repo)
#   (3) the same PutfileClient -> the reference ndn-python-repo 0.3 server (sqlite3, stock
#       settings) running as an app on a granary daemon, repo name /pyrepo
# Each network method gets a fresh daemon (default settings: CS 65536 packets / 512 MiB),
# so its peak RSS and CPU are its own. The client is tests/interop/python/repo_client.py
# (unmodified ndn-python-repo classes) with one timing hook that changes no packet: the
# time of the first and last segment Interest the client answers ("fetch" phase).
# Usage: bash bench/python-repo.sh [SIZE_MIB...]        (default: 64 1024)
# Env:   PYREPO_TIMEOUT (s, default 360) bounds each client run; PYREPO_LOG (default INFO,
#        as shipped) is the reference server's log level; GRANARY_DAEMON_ARGS extra daemon
#        flags (e.g. "--cs-capacity 0"); BENCH_DIR parent of the temp dir (default target/).
# Needs: bash scripts/setup-test-deps.sh (tests/interop/.venv with ndn-python-repo 0.3).
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("${@:-64 1024}")
# shellcheck disable=SC2206
sizes=(${sizes[*]})
timeout_s=${PYREPO_TIMEOUT:-360}
pylog=${PYREPO_LOG:-INFO}
root=$PWD
PY=$root/tests/interop/.venv/bin/python
if [ ! -x "$PY" ] || ! "$PY" -c 'import ndn_python_repo' 2>/dev/null; then
  echo "python-repo.sh: no ndn-python-repo in tests/interop/.venv; run: bash scripts/setup-test-deps.sh" >&2
  exit 2
fi
cargo build --release -q -p granary
G=$root/target/release/granary
mkdir -p "${BENCH_DIR:-$root/target}"
work=$(mktemp -d -p "${BENCH_DIR:-$root/target}" python-repo.XXXXXX)
pids=()
# Stops a process we started and its children (the client's pool workers), bounded.
stop() {
  local p=$1 sig=${2:-TERM} kids c
  kids=$(cat /proc/"$p"/task/*/children 2>/dev/null || true)
  for c in $kids; do stop "$c" "$sig"; done
  kill -"$sig" "$p" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || return 0; [ "$(awk '{print $3}' /proc/"$p"/stat 2>/dev/null)" = Z ] && return 0; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null || true
}
forget() { local p q=(); for p in "${pids[@]}"; do [ "$p" = "$1" ] || q+=("$p"); done; pids=("${q[@]}"); }
cleanup() {
  for p in "${pids[@]}"; do stop "$p"; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
hz=$(getconf CLK_TCK)
# Busy CPU seconds of the whole machine, to see what else ran during a measurement.
busy() { awk -v hz="$hz" '/^cpu /{printf "%.2f", ($2+$3+$4+$7+$8+$9)/hz}' /proc/stat; }
other() { awk -v b0="$1" -v b1="$2" -v mine="$3" 'BEGIN{o=b1-b0-mine; if (o < 0) o=0; printf "%.1f", o}'; }
cpu_s() { awk -v hz="$hz" '{printf "%.1f", ($14+$15)/hz}' /proc/"$1"/stat; }
hwm_mib() { awk '/VmHWM/{printf "%.1f", $2/1024}' /proc/"$1"/status; }
now() { date +%s.%N; }
mbps() { awk -v b="$1" -v s="$2" 'BEGIN{ if (s+0 > 0) printf "%.1f", b/s/1e6; else print "-" }'; }

# A granary daemon in $1 (data dir), socket $1/g.sock; sets $dpid.
start_daemon() {
  local d=$1
  # shellcheck disable=SC2086
  GRANARY_LOG=warn "$G" --data-dir "$d" --socket "$d/g.sock" daemon ${GRANARY_DAEMON_ARGS:-} \
    > "$d.out" 2> "$d.err" & dpid=$!; pids+=("$dpid")
  for _ in $(seq 200); do grep -qx ready "$d.out" 2>/dev/null && return 0; sleep 0.05; done
  echo "daemon did not start: $(cat "$d.err")" >&2; exit 1
}
wait_route() {   # socket prefix: until the FIB has an entry for exactly prefix (20 s)
  for _ in $(seq 200); do
    "$G" --socket "$1" route list 2>/dev/null | grep -q "^fib $2 " && return 0; sleep 0.1
  done
  echo "no route $2 after 20 s" >&2; return 1
}

# The client: repo_client.py put, timed by GNU time; writes $out.json (its JSON line),
# $out.t (first/last segment Interest answered, epoch s) and $out.time ("wall RSS_KiB cpu").
run_client() {  # socket repo file name out; sets $t0 (epoch s, after sync) and $t1
  local out=$5
  sync
  t0=$(now); b0=$(busy)
  /usr/bin/time -o "$out.time" -f "%e %M %U %S" "$PY" -c '
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import repo_client
from ndn_python_repo.clients import PutfileClient
t = {"n": 0}
serve = PutfileClient._on_interest
def timed(self, name, param, app_param):
    now = time.time()
    t.setdefault("first", now)
    t["last"] = now
    t["n"] += 1
    serve(self, name, param, app_param)
PutfileClient._on_interest = timed
rc = repo_client.main(["repo_client.py"] + sys.argv[3:])
with open(sys.argv[2], "w") as f:
    json.dump(t, f)
sys.exit(rc)
' "$root/tests/interop/python" "$out.t" "$1" put "$2" "$3" "$4" --timeout "$timeout_s" \
    > "$out.json" 2> "$out.err" & local tp=$!; pids+=("$tp")
  wait "$tp" || true
  t1=$(now); b1=$(busy); forget "$tp"
}
jget() { "$PY" -c 'import json,sys; v=json.load(open(sys.argv[1])).get(sys.argv[2]); print("" if v is None else v)' "$1" "$2" 2>/dev/null || true; }
jline() { "$PY" -c 'import json,sys; l=[x for x in open(sys.argv[1]) if x.startswith("{")]; v=json.loads(l[-1]).get(sys.argv[2]) if l else None; print("" if v is None else v)' "$1" "$2" 2>/dev/null || true; }

# Keychain for the reference server (it signs its replies with the default identity, as
# stock); HOME points at the temp dir so nothing under the real ~/.ndn is touched.
HOME_PYREPO=$work/home
mkdir -p "$HOME_PYREPO"
HOME=$HOME_PYREPO "$root/tests/interop/.venv/bin/pyndnsec" init >/dev/null 2>&1
HOME=$HOME_PYREPO "$root/tests/interop/.venv/bin/pyndnsec" key-gen /pyrepo-bench >/dev/null 2>&1

echo "disk: $(df -h "$work" | tail -1 | awk '{print $1, $2}'); $(nproc) cores; files from /dev/urandom, page cache warm; sync before each method"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (nothing else heavy should run meanwhile)"
echo "client: ndn-python-repo 0.3 PutfileClient (segment 8000 B, --cpu $(nproc), DigestSha256); reference server: sqlite3, log level $pylog"
rows=()
for mib in "${sizes[@]}"; do
  bytes=$((mib << 20))
  src=$work/src-$mib
  head -c "$bytes" /dev/urandom > "$src"
  cat "$src" > /dev/null
  sum=$(sha256sum "$src" | cut -d' ' -f1)
  segs=$(( (bytes + 7999) / 8000 ))

  # (1) granary put
  sync; b0=$(busy)
  read -r s1 k1 u1 y1 < <(/usr/bin/time -f "%e %M %U %S" "$G" --data-dir "$work/put-$mib" put "$src" "/bench/put$mib" 2>&1 >/dev/null | tail -1)
  o1=$(other "$b0" "$(busy)" "$(awk -v a="$u1" -v b="$y1" 'BEGIN{print a+b}')")
  rows+=("$mib|(1) granary put|$s1|$s1|-|-|$(awk -v k="$k1" 'BEGIN{printf "%.1f", k/1024}')|-|-|$(awk -v a="$u1" -v b="$y1" 'BEGIN{printf "%.1f", a+b}')|-|-|$o1|ok")
  rm -rf "$work/put-$mib"

  # (2) PutfileClient -> Granary's repo
  d=$work/g2-$mib; mkdir -p "$d"; start_daemon "$d"
  c=$work/c2-$mib
  dc0=$(cpu_s "$dpid")
  run_client "$d/g.sock" /granary/repo "$src" "/bench/g$mib" "$c"
  dh=$(hwm_mib "$dpid"); dc=$(cpu_s "$dpid")
  read -r s2 k2 u2 y2 < <(tail -1 "$c.time") || true
  o2=$(other "$b0" "$b1" "$(awk -v a="$u2" -v b="$y2" -v d0="$dc0" -v d1="$dc" 'BEGIN{print a+b+d1-d0}')")
  ok2=$(jline "$c.json" ok); st2="ok"
  f2=$(awk -v a="$(jget "$c.t" first)" -v b="$(jget "$c.t" last)" 'BEGIN{ if (a && b) printf "%.2f", b-a; else print "-" }')
  if [ "$ok2" != True ]; then st2="FAILED after $s2 s: $(jline "$c.json" error)"; s2=failed; f2=-; fi
  p2=$(awk -v a="$t0" -v b="$(jget "$c.t" first)" 'BEGIN{ if (b) printf "%.2f", b-a; else print "-" }')
  if [ "$ok2" = True ]; then   # byte check, outside the timing
    if "$G" --data-dir "$d" --socket "$d/g.sock" get "/bench/g$mib" -o "$work/back" >/dev/null 2>"$work/get.err" \
       && [ "$(sha256sum < "$work/back" | cut -d' ' -f1)" = "$sum" ]; then st2="ok, granary get sha256 matches"
    else st2="STORED BYTES DIFFER or get failed: $(tail -1 "$work/get.err")"; fi
    rm -f "$work/back"
  fi
  n2=$(jget "$c.t" n); [ "${n2:-0}" -gt "$segs" ] && st2="$st2; $n2 segment Interests for $segs segments"
  rows+=("$mib|(2) PutfileClient -> Granary repo|$s2|$s2|$f2|$p2|$(awk -v k="$k2" 'BEGIN{printf "%.1f", k/1024}')|$dh|-|$(awk -v a="$u2" -v b="$y2" 'BEGIN{printf "%.1f", a+b}')|$dc|-|$o2|$st2")
  stop "$dpid"; forget "$dpid"; rm -rf "$d"

  # (3) PutfileClient -> reference ndn-python-repo 0.3 server on a granary daemon
  d=$work/g3-$mib; mkdir -p "$d"; start_daemon "$d"
  cat > "$work/repo-$mib.conf" <<EOF
repo_config:
  repo_name: '/pyrepo'
  register_root: True
db_config:
  db_type: 'sqlite3'
  sqlite3:
    'path': '$work/pydb-$mib/sqlite3.db'
tcp_bulk_insert:
  addr: '127.0.0.1'
  port: '0'
  register_prefix: True
  prefixes:
  - '/test'
logging_config:
  level: '$pylog'
  file: '$work/pyrepo-$mib.log'
EOF
  HOME=$HOME_PYREPO NDN_CLIENT_TRANSPORT="unix://$d/g.sock" \
    "$PY" -m ndn_python_repo.cmd.main -c "$work/repo-$mib.conf" > "$work/pyrepo-$mib.out" 2>&1 & spid=$!; pids+=("$spid")
  wait_route "$d/g.sock" /pyrepo
  c=$work/c3-$mib
  dc0=$(cpu_s "$dpid"); sc0=$(cpu_s "$spid")
  run_client "$d/g.sock" /pyrepo "$src" "/bench/p$mib" "$c"
  dc1=$(cpu_s "$dpid"); sc1=$(cpu_s "$spid")
  read -r s3 k3 u3 y3 < <(tail -1 "$c.time") || true
  o3=$(other "$b0" "$b1" "$(awk -v a="$u3" -v b="$y3" -v d0="$dc0" -v d1="$dc1" -v s0="$sc0" -v s1="$sc1" 'BEGIN{print a+b+d1-d0+s1-s0}')")
  ok3=$(jline "$c.json" ok); st3="ok"
  # Durable: the server answers 200 once the segments are in its in-memory cache and
  # writes them to sqlite every 10 s (and not on SIGTERM: stopped earlier, the last
  # segments are lost); wait (30 s at most) until the logged write-backs cover every
  # segment.
  dur3=-
  if [ "$ok3" = True ] && { [ "$pylog" = INFO ] || [ "$pylog" = DEBUG ]; }; then
    for _ in $(seq 300); do
      n=$(awk '/Cache write back/{s+=$(NF-1)} END{print s+0}' "$work/pyrepo-$mib.log")
      if [ "$n" -ge "$segs" ]; then dur3=$(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.2f", b-a}'); break; fi
      sleep 0.1
    done
  elif [ "$ok3" = True ]; then
    sleep 11   # no write-back log lines to watch: one write-back period, then stop it
  fi
  sh3=$(hwm_mib "$spid"); sc3=$(cpu_s "$spid"); dh=$(hwm_mib "$dpid"); dc=$(cpu_s "$dpid")
  if [ "$ok3" != True ]; then
    el=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
    st3="STOPPED/FAILED after ${el} s: $(jline "$c.json" error)"
    if [ "$pylog" = INFO ] || [ "$pylog" = DEBUG ]; then   # progress from the server's log
      got=$(grep -c "Cache save" "$work/pyrepo-$mib.log" 2>/dev/null || true)
      fe=$(awk -v a="$(jget "$c.t" first)" -v b="$t1" 'BEGIN{ if (a) printf "%.1f", b-a; else print 0 }')
      st3="$st3; the server had received ${got:-0} of $segs segments, $(mbps "$(( ${got:-0} * 8000 ))" "$fe") MB/s over the $fe s since the first segment Interest"
    fi
  fi
  stop "$spid"; forget "$spid"
  f3=$(awk -v a="$(jget "$c.t" first)" -v b="$(jget "$c.t" last)" 'BEGIN{ if (a && b) printf "%.2f", b-a; else print "-" }')
  p3=$(awk -v a="$t0" -v b="$(jget "$c.t" first)" 'BEGIN{ if (b) printf "%.2f", b-a; else print "-" }')
  if [ "$ok3" = True ]; then   # byte check of what sqlite holds, outside the timing
    if v=$("$PY" - "$work/pydb-$mib/sqlite3.db" "/bench/p$mib" "$segs" "$sum" <<'EOF'
import hashlib, sqlite3, sys
from ndn.encoding import Component, Name, parse_data
db, name, segs, want = sys.argv[1], Name.from_str(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
parts = {}
for (v,) in sqlite3.connect(db).execute('SELECT value FROM data'):
    try:
        n, _, content, _ = parse_data(v)
    except Exception:
        continue                      # the server's bookkeeping rows
    if len(n) == len(name) + 1 and Name.is_prefix(name, n):
        parts[Component.to_number(n[-1])] = bytes(content)
if len(parts) != segs or set(parts) != set(range(segs)):
    print(f'{len(parts)} of {segs} segments in sqlite')
    sys.exit(1)
h = hashlib.sha256()
for i in range(segs):
    h.update(parts[i])
ok = h.hexdigest() == want
print(f'{len(parts)} rows, sha256 {"matches" if ok else "DIFFERS"}')
sys.exit(0 if ok else 1)
EOF
    ); then st3="ok, sqlite $v"; else st3="SQLITE CHECK FAILED: $v"; fi
  fi
  n3=$(jget "$c.t" n); [ "${n3:-0}" -gt "$segs" ] && st3="$st3; $n3 segment Interests for $segs segments"
  if [ "$ok3" != True ]; then s3=stopped; f3=-; fi
  rows+=("$mib|(3) PutfileClient -> ndn-python-repo|$s3|$dur3|$f3|$p3|$(awk -v k="$k3" 'BEGIN{printf "%.1f", k/1024}')|$dh|$sh3|$(awk -v a="$u3" -v b="$y3" 'BEGIN{printf "%.1f", a+b}')|$dc|$sc3|$o3|$st3")
  stop "$dpid"; forget "$dpid"; rm -rf "$d" "$work/pydb-$mib" "$src"
done

echo
echo "seconds: wall time of the command (1) or of the client until it saw status 200 (2, 3);"
echo "durable: until the bytes were fsynced/committed (Granary answers 200 only then; the reference"
echo "server answers 200 from its in-memory cache and commits to sqlite every 10 s); fetch: first to"
echo "last segment Interest the client answered; prep: client start to the first of them (python"
echo "start-up, reading the file, encoding every segment, registration, notify). RSS is peak"
echo "(VmHWM of daemon and server, GNU time %M of the client or put), CPU is user+sys seconds;"
echo "other: CPU seconds the rest of the machine used meanwhile (should be ~0)."
printf "%-7s %-36s %8s %8s %8s %8s %8s %8s %6s | %10s %10s %10s | %6s %6s %6s %5s | %s\n" \
  size method seconds MB/s durable MB/s fetch MB/s prep "client RSS" "daemon RSS" "server RSS" "CPU cl" daemon server other check
for r in "${rows[@]}"; do
  IFS='|' read -r mib m s dur f p k dh sh cc dc sc o st <<<"$r"
  b=$((mib << 20))
  printf "%-7s %-36s %8s %8s %8s %8s %8s %8s %6s | %8s Mi %8s Mi %8s Mi | %6s %6s %6s %5s | %s\n" "${mib}MiB" "$m" \
    "$s" "$(mbps "$b" "$s")" "$dur" "$(mbps "$b" "$dur")" "$f" "$(mbps "$b" "$f")" "$p" "$k" "$dh" "$sh" "$cc" "$dc" "$sc" "$o" "$st"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "ratios against (3), as speed (time of (3) / time of X):"
for mib in "${sizes[@]}"; do
  declare -A S=() D=() F=()
  for r in "${rows[@]}"; do
    IFS='|' read -r m2 m s dur f _ <<<"$r"
    [ "$m2" = "$mib" ] || continue
    k=${m:1:1}; S[$k]=$s; D[$k]=$dur; F[$k]=$f
  done
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a+0 > 0 && b+0 > 0) printf "%.1fx", a/b; else print "-" }'; }
  echo "  ${mib}MiB: (1) put: $(ratio "${S[3]}" "${S[1]}") vs (3) to 200, $(ratio "${D[3]}" "${S[1]}") vs (3) durable;" \
       "(2) Granary repo: $(ratio "${S[3]}" "${S[2]}") to 200, $(ratio "${D[3]}" "${S[2]}") durable, $(ratio "${F[3]}" "${F[2]}") fetch phase"
done
