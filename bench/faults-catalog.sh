#!/usr/bin/env bash
# Catalog catch-up after a PostgreSQL outage with publishes going on.
#
# A throw-away PostgreSQL cluster, a daemon whose catalog is on it, and a publisher
# putting a small file through the daemon without pause. After WARM seconds PostgreSQL
# is stopped (fast shutdown) for OUTAGE seconds, then started again on the same port.
# Measured from the restart: when a search answers again, and when the catalog has
# caught up (the queue in <data-dir>/catalog-queue/ is empty and the catalog counts
# what `ls` lists); then the publisher stops and `granary catalog check` must be clean.
#
# Usage: bench/faults-catalog.sh [OUTAGE=60] [WARM=10]
#   GRANARY=path/to/granary (default target/release/granary, else target/debug/granary)
# Needs PostgreSQL (initdb, pg_ctl, psql: scripts/setup-test-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
OUTAGE=${1:-60}
WARM=${2:-10}
G=${GRANARY:-}
if [ -z "$G" ]; then
  if [ -x target/release/granary ]; then G=target/release/granary; else G=target/debug/granary; fi
fi
G=$(realpath "$G")
PGBIN=/usr/lib/postgresql/15/bin
[ -x "$PGBIN/initdb" ] || PGBIN=$(dirname "$(command -v initdb)")

work=$(mktemp -d /tmp/granary-faults-XXXXXX)
chmod 755 "$work"
pgdir=$work/pg
mkdir -p "$pgdir"
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -c "$1"; else sh -c "$1"; fi; }
[ "$(id -u)" = 0 ] && chown postgres:postgres "$pgdir"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pg_start() {
  as_pg "$PGBIN/pg_ctl -D $pgdir/data -l $pgdir/server.log -w -o '-p $port -c listen_addresses=127.0.0.1 -k $pgdir' start >/dev/null"
}
pg_stop() { as_pg "$PGBIN/pg_ctl -D $pgdir/data -m fast -w stop >/dev/null"; }
as_pg "$PGBIN/initdb -D $pgdir/data -A trust -U postgres >$pgdir/initdb.log 2>&1"
pg_start
"$PGBIN/psql" -q -h 127.0.0.1 -p "$port" -U postgres -c "CREATE DATABASE granary" postgres
url="postgres://postgres@127.0.0.1:$port/granary"

data=$work/data
sock=$work/g.sock
g() { "$G" --data-dir "$data" --socket "$sock" --catalog "$url" "$@"; }
daemon_pid=""; pub_pid=""
cleanup() {
  [ -n "$pub_pid" ] && kill "$pub_pid" 2>/dev/null || true
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  as_pg "$PGBIN/pg_ctl -D $pgdir/data -m immediate -w stop >/dev/null 2>&1" || true
  rm -rf "$work"
}
trap cleanup EXIT
GRANARY_LOG=warn "$G" --data-dir "$data" --socket "$sock" --catalog "$url" daemon --http off \
  >"$work/daemon.out" 2>"$work/daemon.log" &
daemon_pid=$!
for _ in $(seq 100); do grep -q '^ready' "$work/daemon.out" 2>/dev/null && break; sleep 0.1; done

head -c 65536 /dev/urandom >"$work/f.bin"
# The publisher: one put after another; each result's catalog state goes to puts.log.
(
  k=0
  while :; do
    k=$((k + 1))
    if out=$(g put --json "$work/f.bin" "/bench/faults/f$k" 2>/dev/null); then
      echo "$(date +%s.%N) $(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("catalog"))' 2>/dev/null)"
    else
      echo "$(date +%s.%N) put-failed"
    fi
  done
) >"$work/puts.log" &
pub_pid=$!

sleep "$WARM"
pg_stop
t_stop=$(date +%s.%N)
echo "PostgreSQL stopped; publishing goes on for ${OUTAGE} s" >&2
sleep "$OUTAGE"
pg_start
t_start=$(date +%s.%N)
echo "PostgreSQL started again" >&2

queue_len() { find "$data/catalog-queue" -maxdepth 1 -name '*.json' 2>/dev/null | wc -l; }
t_search=""; t_caught=""
while :; do
  now=$(date +%s.%N)
  # Listed first: versions published after the listing may be catalogued or not
  # yet; the catalog has caught up when the queue is empty and it holds at least
  # what ls listed.
  files=$(g ls | wc -l)
  if total=$(g search --json --all-versions --limit 0 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])' 2>/dev/null); then
    [ -z "$t_search" ] && t_search=$now
    [ -n "${VERBOSE:-}" ] && echo "$(date +%T.%N) queue $(queue_len) catalog $total files $files" >&2
    if [ "$(queue_len)" = 0 ] && [ "$total" -ge "$files" ]; then t_caught=$(date +%s.%N); break; fi
  fi
  if python3 -c "import sys; sys.exit(0 if $now - $t_start > 600 else 1)"; then
    echo "not caught up after 600 s" >&2; exit 1
  fi
  sleep 0.1
done
kill "$pub_pid"; wait "$pub_pid" 2>/dev/null || true; pub_pid=""
sleep 1
check=$(g catalog check --json) || { echo "catalog check not clean: $check" >&2; exit 1; }

python3 - "$work/puts.log" "$t_stop" "$t_start" "$t_search" "$t_caught" "$OUTAGE" <<'EOF'
import sys
log, t_stop, t_start, t_search, t_caught, outage = sys.argv[1:]
t_stop, t_start, t_search, t_caught = map(float, (t_stop, t_start, t_search, t_caught))
rows = [l.split() for l in open(log) if l.strip()]
during = [s for t, s in rows if t_stop <= float(t) < t_start]
print(f"outage                      {outage} s ({t_start - t_stop:.1f} s measured)")
print(f"puts in all                 {len(rows)}")
print(f"puts during the outage      {len(during)} ({during.count('queued')} queued, "
      f"{during.count('done')} done, {during.count('failed')} failed, {during.count('put-failed')} put errors)")
print(f"search answers again after  {t_search - t_start:.2f} s")
print(f"catalog caught up after     {t_caught - t_start:.2f} s")
EOF
echo "catalog check: clean ($(echo "$check" | python3 -c 'import json,sys; v=json.load(sys.stdin); print(v["files"], "stored,", v["catalogued"], "catalogued")'))"
