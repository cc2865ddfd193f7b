#!/usr/bin/env bash
# Thirty sites on an emulated WAN (issue 47): 3 regions of 10 storage sites,
# a router per region (WAN round trips 20, 80 and 200 ms between regions,
# rate-limited links) and a campus (client) node per region for the
# consumers; every node but the routers on one PostgreSQL catalog whose
# primary and streaming standby this script runs (nominally in regions 0
# and 2; the nodes reach them on Unix sockets, a management network that
# does not cross the emulated links). A scaled-down day of CMIP6-like work:
# publication at 10 sites, the [[replication]] policy keeping 2 copies, 20
# consumers fetching Zipf-popular names, new versions (an eighth of a file
# changed) published mid-run, a publishing site killed (SIGKILL) and the
# primary failed over (stopped, the standby promoted 5 s later) mid-run.
# Prints the report: replication lag, WAN and access-link bytes against the
# bytes delivered, failover times, peak RSS per daemon, and the invariants
# across sites (nothing lost, nothing wrong served, 2 copies reached, every
# fetch served); exit 1 when one is broken.
#
# The topology is kept, the data scaled down to 2 shared cores: FILES files
# per publisher of 1, 2 and 4 MiB in turn.
#
#   sudo bash bench/federation30.sh [SITES_PER_REGION] [FILES] [CONSUME_SECS]
# (defaults 10, 4, 120). GRANARY=path uses that binary (default: the release
# build, made first). Driver: crates/measure/src/federation_wan.rs; its
# 6-site run is a test (crates/cli/tests/it/netns_federation.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
PER=${1:-10}
FILES=${2:-4}
SECS=${3:-120}
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 1; }
PGBIN=/usr/lib/postgresql/15/bin
[ -x $PGBIN/initdb ] || PGBIN=$(dirname "$(command -v initdb)")
T=${CARGO_TARGET_DIR:-target}/release
cargo build --release -q -p granary-bench --bin granary-bench-federation-wan
if [ -z "${GRANARY:-}" ]; then
  cargo build --release -q -p granary
  GRANARY=$T/granary
fi
W=$(mktemp -d /tmp/granary-fed30-XXXXXX)
chmod 755 "$W"                 # the postgres user goes through it
P=$W/primary S=$W/standby
mkdir -p $P $S
chown postgres:postgres $P $S
BENCH_PID=
cleanup() {
  # The driver's testbed removes its namespaces when it ends; a driver killed
  # before that leaves them to the next testbed (it deletes those of dead
  # runs), and here they go at once.
  if [ -n "$BENCH_PID" ]; then
    kill "$BENCH_PID" 2>/dev/null || true
    wait "$BENCH_PID" 2>/dev/null || true
    for ns in $(ip netns list | awk '{print $1}' | grep "^gtb${BENCH_PID}x" || true); do
      ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
      ip netns delete "$ns" 2>/dev/null || true
    done
  fi
  su postgres -c "$PGBIN/pg_ctl -D $S/data -m immediate -w stop" >/dev/null 2>&1 || true
  su postgres -c "$PGBIN/pg_ctl -D $P/data -m immediate -w stop" >/dev/null 2>&1 || true
  rm -rf "$W"
}
trap cleanup EXIT INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PP=$(free_port) SP=$(free_port)
su postgres -c "$PGBIN/initdb -D $P/data -A trust -U postgres" >$W/initdb.log 2>&1 || { cat $W/initdb.log; exit 1; }
su postgres -c "$PGBIN/pg_ctl -D $P/data -l $P/server.log -w -o '-p $PP -c listen_addresses=127.0.0.1 -k $P -c max_connections=300' start" >/dev/null
su postgres -c "$PGBIN/createdb -h $P -p $PP -U postgres fed30"
su postgres -c "$PGBIN/pg_basebackup -h 127.0.0.1 -p $PP -U postgres -D $S/data -R -X stream -c fast" >$W/basebackup.log 2>&1 || { cat $W/basebackup.log; exit 1; }
su postgres -c "$PGBIN/pg_ctl -D $S/data -l $S/server.log -w -o '-p $SP -c listen_addresses=127.0.0.1 -k $S -c max_connections=300' start" >/dev/null
URL="postgres://postgres@/fed30?host=$P&host=$S&port=$PP,$SP&target_session_attrs=read-write"
echo "== $((PER * 3)) sites in 3 regions, $FILES files per publisher (1/2/4 MiB), consumers for $SECS s; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
$T/granary-bench-federation-wan \
  --granary "$GRANARY" --url "$URL" --work "$W/run" \
  --pg-stop "su postgres -c '$PGBIN/pg_ctl -D $P/data -m fast -w stop' >/dev/null" \
  --pg-promote "su postgres -c '$PGBIN/pg_ctl -D $S/data -w promote' >/dev/null" \
  --sites-per-region "$PER" --files-per-publisher "$FILES" --consume-secs "$SECS" &
BENCH_PID=$!
wait $BENCH_PID
