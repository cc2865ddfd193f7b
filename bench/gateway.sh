#!/usr/bin/env bash
# The HTTP gateway (issues 17, 32), three measurements in one run:
#  1. /data of files the node holds (read from the repository, every segment
#     checked against the signed manifest) beside nginx serving the same bytes
#     from disk (Debian nginx, started here on loopback with a temporary
#     config; sendfile on): one MiB-sized file, and 1,000 files of 100 KB
#     fetched by one curl over one keep-alive connection (and one of them fetched
#     1,000 times: a popular file). HTTP/1.1, and HTTPS
#     when the daemon has `--https` (nginx with `ssl` on the same self-signed
#     certificate). Gbit/s, the ratio to nginx, and the peak RSS of the daemon
#     and of nginx's worker during each measurement (VmHWM, reset before it).
#  2. /api/search p50/p99 over HTTP at N catalog records (the real router and
#     catalog; crates/gateway/examples/search_bench.rs), then 100 concurrent
#     clients on /api/search, /esg-search/search (File, Dataset), /stac/search
#     and /api/search?type=dataset: requests/s and p99.
#  3. the WebSocket face against the Unix socket: NDNts fetch.mjs (same client,
#     same object) over ws:// and over the Unix socket.
#  Part 1 also times `granary get` of the same object over the Unix socket to
#  /dev/null: the fetch engine's own ceiling on this machine.
# Usage: [PARTS="1 2 3"] bash bench/gateway.sh [MiB] [RUNS] [RECORDS] [WS_MiB] [SMALL]
#   defaults: 1024 MiB, 3 runs, 1000000 records, 256 MiB for the WebSocket
#   part, 1000 small files of 100 KB
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/nginx.sh
mib=${1:-1024}
runs=${2:-3}
records=${3:-1000000}
wsmib=${4:-256}
small=${5:-1000}
cargo build --release -q -p granary
cargo build --release -q -p granary-gateway --example search_bench
G=$PWD/target/release/granary
NTS=$PWD/tests/interop/ndnts/fetch.mjs
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

# Small files, published under /bench/small (nginx serves the same tree).
mkdir -p "$tmp/www/small"
for i in $(seq "$small"); do head -c 100000 /dev/urandom > "$tmp/www/small/f$i.bin"; done
chmod -R a+rX "$tmp/www"
$G --data-dir "$tmp/d" --socket "$tmp/g.sock" publish-dir "$tmp/www/small" --others-under /bench/small >/dev/null 2>&1 || true
# HTTPS, when the daemon has it (`daemon --https IP:PORT`, a self-signed
# certificate made in the data directory, its path printed).
https=; NGINX_TLS=; tport=
if $G daemon --help 2>/dev/null | grep -q -- '--https'; then
  hport=$(free_port)
  kill $gpid; wait $gpid 2>/dev/null || true
  $G --data-dir "$tmp/d" --socket "$tmp/g.sock" daemon --http 127.0.0.1:0 --https 127.0.0.1:$hport --listen ws://127.0.0.1:0 > "$tmp/dout" 2>"$tmp/derr" & gpid=$!; pids+=($gpid)
  for _ in $(seq 200); do grep -q ready "$tmp/dout" && break; sleep 0.05; done
  http=$(sed -n 's|^gateway http://\(.*\)/$|\1|p' "$tmp/dout")
  ws=$(sed -n 's|^listening ws://||p' "$tmp/dout")
  cert=$(grep -o '/[^ ]*\.pem' "$tmp/dout" "$tmp/derr" | head -1 | cut -d: -f2-)
  key=$(ls "$(dirname "$cert")"/*key*.pem 2>/dev/null | head -1)
  if [ -n "$cert" ] && [ -n "$key" ]; then
    https=127.0.0.1:$hport; tport=$(free_port)
    cp "$cert" "$tmp/nginx/cert.pem"; cp "$key" "$tmp/nginx/key.pem"
    NGINX_TLS="  server { listen 127.0.0.1:$tport ssl http2; ssl_certificate $tmp/nginx/cert.pem; ssl_certificate_key $tmp/nginx/key.pem; root $tmp/www; }"
  else
    echo "HTTPS: the daemon has --https but no certificate and key were found ($cert): HTTPS rows skipped"
  fi
else
  echo "HTTPS: this build's daemon has no --https: HTTPS rows skipped"
fi

# nginx on loopback, serving the same bytes.
nport=$(free_port)
nginx_start "$tmp/nginx" "$tmp/www" "$nport" "$NGINX_TLS"

# Correctness first: both serve the same bytes.
[ "$(curl -s "http://$http/data/bench/obj" | sha256sum | cut -d' ' -f1)" = "$want" ] || { echo "gateway: wrong bytes" >&2; exit 1; }
[ "$(curl -s "http://127.0.0.1:$nport/obj" | sha256sum | cut -d' ' -f1)" = "$want" ] || { echo "nginx: wrong bytes ($(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$nport/obj"))" >&2; cat "$tmp/nginx/error.log" >&2; exit 1; }
nworker=$(pgrep -P "$(cat "$tmp/nginx/nginx.pid")" | head -1)

parts=${PARTS:-1 2 3}
# Waits until the daemon is idle (below 5% of a core over a second; at most
# 120 s): the repository indexes what was just published in the background.
settle() {
  local a b
  for _ in $(seq 120); do
    a=$(awk '{print $14+$15}' "/proc/$gpid/stat"); sleep 1; b=$(awk '{print $14+$15}' "/proc/$gpid/stat")
    [ $((b - a)) -lt 5 ] && return
  done
}
settle
# Peak RSS (VmHWM) since the last reset, MiB; `reset_peak PID` starts a new peak.
reset_peak() { echo 5 > "/proc/$1/clear_refs" 2>/dev/null || true; }
peak() { awk '/VmHWM/{printf "%.0f", $2/1024}' "/proc/$1/status" 2>/dev/null || echo '?'; }
# curl config fetching every small file once, in order, to /dev/null (one
# curl, so one keep-alive connection).
small_cfg() {
  local base=$1 path=$2 out=$3
  : > "$out"
  for i in $(seq "$small"); do printf 'url = "%s%s/f%s.bin"\noutput = "/dev/null"\n' "$base" "$path" "$i" >> "$out"; done
}
# The same for one popular file asked $small times (what many clients of one
# dataset do; the gateway's worker route: lookup and manifest cached).
hot_cfg() {
  local base=$1 path=$2 out=$3
  : > "$out"
  for _ in $(seq "$small"); do printf 'url = "%s%s/f1.bin"\noutput = "/dev/null"\n' "$base" "$path" >> "$out"; done
}
if [[ " $parts " == *" 1 "* ]]; then
echo
echo "1. /data vs nginx on loopback (curl -o /dev/null); peak RSS of each server during the measurement"
bytes=$((mib << 20))
sbytes=$((small * 100000))
schemes="http"; [ -n "$https" ] && schemes="http https"
# Correctness of the small files: a sample compared byte for byte.
for i in 1 $((small / 2)) "$small"; do
  cmp -s <(curl -s "http://$http/data/bench/small/f$i.bin") "$tmp/www/small/f$i.bin" || { echo "gateway: wrong bytes for small file $i" >&2; exit 1; }
done
printf "%-6s %-5s %-30s %-34s %9s %9s %9s\n" run proto what server seconds "Gbit/s" "peak MiB"
for r in $(seq "$runs"); do
  for proto in $schemes; do
    if [ "$proto" = http ]; then gbase="http://$http"; nbase="http://127.0.0.1:$nport"; k=; else gbase="https://$https"; nbase="https://127.0.0.1:$tport"; k=--cacert; fi
    copt=(); [ "$proto" = https ] && copt=(--cacert "$tmp/nginx/cert.pem" --http2)
    for what in big small hot; do
      for who in gateway nginx; do
        if [ $who = gateway ]; then pid=$gpid; base=$gbase; dpath=/data/bench; else pid=$nworker; base=$nbase; dpath=; fi
        reset_peak "$pid"
        if [ $what = big ]; then
          label="$mib MiB file"; n=$bytes
          if [ $who = gateway ]; then url="$base/data/bench/obj"; else url="$base/obj"; fi
          secs=$(curl -s "${copt[@]}" -o /dev/null -w '%{time_total}' "$url")
        else
          if [ $what = small ]; then
            label="$small x 100 KB, keep-alive"; n=$sbytes
            small_cfg "$base" "$dpath/small" "$tmp/small.cfg"
            [ $who = nginx ] && small_cfg "$base" "/small" "$tmp/small.cfg"
          else
            label="one 100 KB file x $small, keep-alive"; n=$sbytes
            hot_cfg "$base" "$dpath/small" "$tmp/small.cfg"
            [ $who = nginx ] && hot_cfg "$base" "/small" "$tmp/small.cfg"
          fi
          t0=$(date +%s.%N)
          curl -s "${copt[@]}" -K "$tmp/small.cfg"
          secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{ printf "%.3f", b-a }')
        fi
        gbps=$(awk -v b=$n -v s="$secs" 'BEGIN{ printf "%.2f", b*8/s/1e9 }')
        if [ $who = gateway ]; then server="granary /data (manifest-verified)"; else server="nginx (sendfile)"; fi
        printf "%-6s %-5s %-30s %-34s %9s %9s %9s\n" "$r" "$proto" "$label" "$server" "$secs" "$gbps" "$(peak "$pid")"
        eval "s_${who}=$secs"
      done
      awk -v g="$s_gateway" -v n="$s_nginx" 'BEGIN{ printf "       gateway/nginx throughput: %.2f\n", n/g }'
    done
  done
  t0=$(date +%s.%N)
  $G --data-dir "$tmp/d" --socket "$tmp/g.sock" get --no-dedup -q /bench/obj -o /dev/null
  printf "%-6s %-5s %-30s %-34s %9s\n" "$r" ndn "$mib MiB file" "granary get -o /dev/null (Unix)" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{ printf "%.3f", b-a }')"
done
fi

if [[ " $parts " == *" 2 "* ]]; then
echo
echo "2. /api/search over HTTP"
"$PWD/target/release/examples/search_bench" "$records" 200 100 20
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
