#!/usr/bin/env bash
# The HTTP gateway (issue 17), three measurements in one run:
#  1. /data streaming of one published file (fetch engine on an in-process face,
#     every segment checked against the signed manifest) beside nginx serving the
#     same bytes from disk (Debian nginx, started here on loopback with a
#     temporary config; sendfile on). curl downloads to /dev/null; Gbit/s, and the
#     peak RSS of the daemon and of nginx's worker.
#  2. /api/search p50/p99 over HTTP at N catalog records (the real router and
#     catalog; crates/gateway/examples/search_bench.rs).
#  3. the WebSocket face against the Unix socket: NDNts fetch.mjs (same client,
#     same object) over ws:// and over the Unix socket.
#  Part 1 also times `granary get` of the same object over the Unix socket to
#  /dev/null: the fetch engine's own ceiling on this machine.
# Usage: [PARTS="1 2 3"] bash bench/gateway.sh [MiB] [RUNS] [RECORDS] [WS_MiB]
#   defaults: 1024 MiB, 3 runs, 200000 records, 256 MiB for the WebSocket part
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-1024}
runs=${2:-3}
records=${3:-200000}
wsmib=${4:-256}
cargo build --release -q -p granary
cargo build --release -q -p granary-gateway --example search_bench
G=$PWD/target/release/granary
NTS=$PWD/tests/interop/ndnts/fetch.mjs
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "nginx missing: run scripts/setup-test-deps.sh (apt nginx)" >&2; exit 1; }
command -v curl >/dev/null || { echo "curl missing" >&2; exit 1; }
tmp=$(mktemp -d -p "${BENCH_TMP:-/tmp}")
pids=()
cleanup() {
  [ -f "$tmp/nginx/nginx.pid" ] && kill "$(cat "$tmp/nginx/nginx.pid")" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start; commit $(git rev-parse --short HEAD)"
mkdir -p "$tmp/www" "$tmp/nginx"
chmod 755 "$tmp" "$tmp/www"   # nginx's worker runs as www-data
head -c $((mib << 20)) /dev/urandom > "$tmp/www/obj"
want=$(sha256sum "$tmp/www/obj" | cut -d' ' -f1)

# The node, with the gateway and a WebSocket listener.
$G --data-dir "$tmp/d" --socket "$tmp/g.sock" daemon --http 127.0.0.1:0 --listen ws://127.0.0.1:0 > "$tmp/dout" 2>"$tmp/derr" & gpid=$!; pids+=($gpid)
for _ in $(seq 200); do grep -q ready "$tmp/dout" && break; sleep 0.05; done
http=$(sed -n 's|^gateway http://\(.*\)/$|\1|p' "$tmp/dout")
ws=$(sed -n 's|^listening ws://||p' "$tmp/dout")
$G --data-dir "$tmp/d" --socket "$tmp/g.sock" put "$tmp/www/obj" /bench/obj >/dev/null 2>&1

# nginx on loopback, serving the same bytes.
nport=$(free_port)
cat > "$tmp/nginx/nginx.conf" <<CONF
daemon on;
worker_processes 1;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log;
events { worker_connections 64; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  client_body_temp_path $tmp/nginx/body;
  proxy_temp_path $tmp/nginx/proxy;
  fastcgi_temp_path $tmp/nginx/fastcgi;
  uwsgi_temp_path $tmp/nginx/uwsgi;
  scgi_temp_path $tmp/nginx/scgi;
  server { listen 127.0.0.1:$nport; root $tmp/www; }
}
CONF
"$NGINX" -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" -e "$tmp/nginx/error.log"
for _ in $(seq 100); do [ -f "$tmp/nginx/nginx.pid" ] && break; sleep 0.05; done

# Correctness first: both serve the same bytes.
[ "$(curl -s "http://$http/data/bench/obj" | sha256sum | cut -d' ' -f1)" = "$want" ] || { echo "gateway: wrong bytes" >&2; exit 1; }
[ "$(curl -s "http://127.0.0.1:$nport/obj" | sha256sum | cut -d' ' -f1)" = "$want" ] || { echo "nginx: wrong bytes ($(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$nport/obj"))" >&2; cat "$tmp/nginx/error.log" >&2; exit 1; }
nworker=$(pgrep -P "$(cat "$tmp/nginx/nginx.pid")" | head -1)

parts=${PARTS:-1 2 3}
if [[ " $parts " == *" 1 "* ]]; then
echo
echo "1. $mib MiB file over HTTP/1.1 on loopback (curl -o /dev/null)"
printf "%-5s %-44s %9s %9s\n" run server seconds "Gbit/s"
bytes=$((mib << 20))
for r in $(seq "$runs"); do
  for who in gateway nginx get; do
    if [ $who = gateway ]; then url="http://$http/data/bench/obj"; label="granary gateway /data (manifest-verified)"; elif [ $who = nginx ]; then url="http://127.0.0.1:$nport/obj"; label="nginx (sendfile, from disk/page cache)"; else label="granary get -o /dev/null (Unix socket)"; fi
    if [ $who = get ]; then
      t0=$(date +%s.%N)
      $G --data-dir "$tmp/d" --socket "$tmp/g.sock" get --no-dedup -q /bench/obj -o /dev/null
      secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{ printf "%.3f", b-a }')
    else
      secs=$(curl -s -o /dev/null -w '%{time_total}' "$url")
    fi
    gbps=$(awk -v b=$bytes -v s="$secs" 'BEGIN{ printf "%.2f", b*8/s/1e9 }')
    printf "%-5s %-44s %9s %9s\n" "$r" "$label" "$secs" "$gbps"
    eval "s_$who=$secs"
  done
  awk -v g="$s_gateway" -v n="$s_nginx" -v e="$s_get" 'BEGIN{ printf "      throughput ratio gateway/nginx: %.2f, gateway/granary get: %.2f\n", n/g, e/g }'
done
echo "daemon peak RSS (VmHWM): $(awk '/VmHWM/{print $2/1024 " MiB"}' /proc/$gpid/status); nginx worker: $(awk '/VmHWM/{print $2/1024 " MiB"}' /proc/$nworker/status 2>/dev/null || echo '?')"
fi

if [[ " $parts " == *" 2 "* ]]; then
echo
echo "2. /api/search over HTTP"
"$PWD/target/release/examples/search_bench" "$records" 200
fi

if [[ " $parts " == *" 3 "* ]]; then
echo
echo "3. WebSocket face vs Unix socket: NDNts fetch.mjs, $wsmib MiB object"
head -c $((wsmib << 20)) /dev/urandom > "$tmp/ws.obj"
wswant=$(sha256sum "$tmp/ws.obj" | cut -d' ' -f1)
$G --data-dir "$tmp/d" --socket "$tmp/g.sock" put "$tmp/ws.obj" /bench/ws >/dev/null 2>&1
rm -f "$tmp/ws.obj"
printf "%-5s %-36s %9s %9s\n" run transport seconds "Gbit/s"
for r in $(seq "$runs"); do
  for who in unix ws gateway-ndn; do
    case $who in
      unix) to="$tmp/g.sock"; label="Unix socket";;
      ws) to="ws://$ws"; label="WebSocket face (--listen ws://)";;
      gateway-ndn) to="ws://$http/ndn"; label="WebSocket face (gateway /ndn)";;
    esac
    t0=$(date +%s.%N)
    node "$NTS" "$to" /bench/ws "$tmp/ws.out" --timeout 900 > "$tmp/json" 2> "$tmp/err" || { cat "$tmp/json" "$tmp/err" >&2; exit 1; }
    t1=$(date +%s.%N)
    [ "$(sha256sum "$tmp/ws.out" | cut -d' ' -f1)" = "$wswant" ] || { echo "$who: wrong bytes" >&2; exit 1; }
    rm -f "$tmp/ws.out"
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{ printf "%.2f", b-a }')
    printf "%-5s %-36s %9s %9s\n" "$r" "$label" "$secs" "$(awk -v b=$((wsmib << 20)) -v s="$secs" 'BEGIN{ printf "%.2f", b*8/s/1e9 }')"
  done
done
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
