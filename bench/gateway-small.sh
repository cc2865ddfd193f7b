#!/usr/bin/env bash
# `/data` of many small files the node holds, beside nginx serving the same bytes
# (issue 44): three passes of one keep-alive curl over N files of 100 KB after each
# daemon start — a first sight (every lookup made and every version's signed manifest
# read and verified), the same files again at once (lookups and manifests kept), and
# again after the lookups' time to live (12 s later: lookups made again, manifests
# still kept) — each followed by nginx over the same files. Per pass: gateway and
# nginx seconds, their throughput ratio, and the daemon's CPU per file
# (/proc/<pid>/stat). Medians per pass over the starts at the end.
# Usage: bash bench/gateway-small.sh [STARTS] [FILES] [GRANARY]
#   defaults: 5 starts, 300 files, target/release/granary (built if not given)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/nginx.sh
starts=${1:-5}
files=${2:-300}
G=${3:-}
if [ -z "$G" ]; then cargo build --release -q -p granary; G=$PWD/target/release/granary; fi
command -v curl >/dev/null || { echo "curl missing" >&2; exit 1; }
tmp=$(mktemp -d -p "${BENCH_TMP:-/tmp}")
gpid=
cleanup() {
  [ -f "$tmp/nginx/nginx.pid" ] && kill "$(cat "$tmp/nginx/nginx.pid")" 2>/dev/null || true
  [ -n "$gpid" ] && kill "$gpid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now() { date +%s.%N; }

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start; $G"
mkdir -p "$tmp/www/small" "$tmp/nginx"
chmod 755 "$tmp" "$tmp/www"   # nginx's worker runs as www-data
for i in $(seq "$files"); do head -c 100000 /dev/urandom > "$tmp/www/small/f$i.bin"; done
chmod -R a+rX "$tmp/www"
$G --data-dir "$tmp/d" --socket "$tmp/g.sock" publish-dir "$tmp/www/small" --others-under /bench/small > /dev/null 2> "$tmp/puberr" \
  || { cat "$tmp/puberr" >&2; exit 1; }

nport=$(free_port)
nginx_start "$tmp/nginx" "$tmp/www" "$nport"

cfg() {
  local base=$1 out=$2
  : > "$out"
  for i in $(seq "$files"); do printf 'url = "%s/f%s.bin"\noutput = "/dev/null"\n' "$base" "$i" >> "$out"; done
}
cfg "http://127.0.0.1:$nport/small" "$tmp/n.cfg"
# Every file is in the page cache for both servers before each start: a first sight
# measures the lookup and the verification, not the disk.
warm() { find "$tmp/d" "$tmp/www" -type f -exec cat {} + > /dev/null; }
cpu() { awk '{print $14 + $15}' "/proc/$gpid/stat"; }
tick=$(getconf CLK_TCK)

printf "%-6s %-9s %9s %9s %14s %18s\n" start pass gateway nginx "gateway/nginx" "daemon µs/file"
for s in $(seq "$starts"); do
  warm
  $G --data-dir "$tmp/d" --socket "$tmp/g.sock" daemon --http 127.0.0.1:0 > "$tmp/dout" 2> "$tmp/derr" & gpid=$!
  for _ in $(seq 200); do grep -q ready "$tmp/dout" && break; sleep 0.05; done
  http=$(sed -n 's|^gateway http://\(.*\)/$|\1|p' "$tmp/dout")
  [ -n "$http" ] || { echo "the daemon did not start" >&2; cat "$tmp/derr" >&2; exit 1; }
  cfg "http://$http/data/bench/small" "$tmp/g.cfg"
  # Both servers answer with the right bytes (checked on a file the passes do not
  # ask first: nothing is cached by the check but that one lookup).
  cmp -s <(curl -s "http://127.0.0.1:$nport/small/f$files.bin") "$tmp/www/small/f$files.bin" || { echo "nginx: wrong bytes" >&2; exit 1; }
  sleep 1
  for pass in first again after-ttl; do
    [ $pass = after-ttl ] && sleep 12
    c0=$(cpu); t0=$(now)
    curl -s -K "$tmp/g.cfg"
    t1=$(now); c1=$(cpu)
    curl -s -K "$tmp/n.cfg"
    t2=$(now)
    awk -v s="$s" -v p=$pass -v a="$t0" -v b="$t1" -v c="$t2" -v c0="$c0" -v c1="$c1" -v n="$files" -v hz="$tick" \
      'BEGIN{ printf "%-6s %-9s %9.3f %9.3f %14.2f %18.0f\n", s, p, b-a, c-b, (c-b)/(b-a), (c1-c0)/hz*1e6/n }' | tee -a "$tmp/rows"
  done
  cmp -s <(curl -s "http://$http/data/bench/small/f1.bin") "$tmp/www/small/f1.bin" || { echo "gateway: wrong bytes" >&2; exit 1; }
  kill "$gpid"; wait "$gpid" 2>/dev/null || true; gpid=
done
echo "medians over $starts starts (load now $(cut -d' ' -f1-3 /proc/loadavg)):"
median() { sort -n | awk '{ v[NR] = $1 } END { printf "%s %s %s\n", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
for pass in first again after-ttl; do
  read -r r lo hi < <(awk -v p=$pass '$2 == p { print $5 }' "$tmp/rows" | median)
  read -r c _ _ < <(awk -v p=$pass '$2 == p { print $6 }' "$tmp/rows" | median)
  printf "  %-9s gateway/nginx %s (%s-%s), daemon %s µs/file\n" $pass "$r" "$lo" "$hi" "$c"
done
