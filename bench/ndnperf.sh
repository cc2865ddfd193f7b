#!/usr/bin/env bash
# ndnperf's producer table (Marchal, Cholez, Festor, ACM ICN 2016) reproduced with
# `granary perf serve` / `granary perf fetch` through a Granary daemon on this machine,
# with `openssl speed ecdsap256` in the same run.
#
#   bash bench/ndnperf.sh [SECONDS_PER_RUN] [WINDOW]      (defaults: 3, 64)
#
# For every signing mode (RSA-2048, ECDSA-P256, SHA-256, Ed25519, Null), payload
# (1, 4, 8 KiB and a 32 KiB "large packet"; the daemon runs with --max-packet 65536)
# and worker count (1, 2), one producer and one consumer run for SECONDS.
# Columns: end-to-end Data/s and Mbit/s of payload at the consumer, latency p50/p99,
# the producer's processing time per packet (Interest taken by a worker → signed Data
# ready), the producer's CPU (100 % = one core), Mbit/s per producer core
# (Mbit/s ÷ producer CPU), and the producer's capacity per core from its processing
# time alone (payload ÷ µs/packet). The seed's 8 KiB figures (NFD 0.4, Xeon E5-2630v3)
# are printed beside, divided by the cores they used. Two more rows re-parse the key
# for every packet (--no-key-cache), the seed's per-packet key lookup.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-3}
window=${2:-64}
bin=target/release/granary
[ -x "$bin" ] || cargo build --release -p granary
work=$(mktemp -d)
daemon_pid=
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "# ndnperf on $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)"
openssl speed -seconds "$secs" ecdsap256 2>/dev/null > "$work/openssl.txt"
ossl_sign=$(awk '/256 bits ecdsa \(nistp256\)/ {print $(NF-1)}' "$work/openssl.txt")
echo "openssl speed ecdsap256: $ossl_sign sign/s"

sock="$work/g.sock"
GRANARY_LOG=warn "$bin" --data-dir "$work/data" --socket "$sock" daemon --http off --max-packet 65536 > "$work/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 50); do grep -q '^ready' "$work/daemon.log" 2>/dev/null && break; sleep 0.1; done

# Seed figures at 8 KiB, Mbit/s per server core (table in the seed's conclusion:
# throughput ÷ server cores; SHA-256 on one core).
seed_per_core() {
  case $1 in
    sha256) echo "487 (1 core)";;
    rsa) echo "28.1 (394/14)";;
    ecdsa) echo "48.8 (439/9)";;
    *) echo "-";;
  esac
}

printf '| sign | payload | threads | Data/s | Mbit/s | p50 ms | p99 ms | producer µs/pkt | producer CPU %% | Mbit/s per producer core | capacity per core, Mbit/s | seed Mbit/s per core (8 KiB) |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|\n'
ecdsa_us=
null_cap=
run_one() { # sign payload threads [extra serve flags]
  local sign=$1 payload=$2 threads=$3; shift 3
  local prefix="/ndnperf/$sign/$payload/$threads${1:+/nokc}"
  "$bin" --socket "$sock" perf serve "$prefix" --sign "$sign" --payload "$payload" \
    --threads "$threads" --json "$@" > "$work/serve.json" 2>"$work/serve.err" &
  local spid=$!
  for _ in $(seq 100); do grep -q ready "$work/serve.json" 2>/dev/null && break; sleep 0.05; done
  "$bin" --socket "$sock" perf fetch "$prefix" --duration "$secs" --window "$window" --json \
    > "$work/fetch.json" 2>"$work/fetch.err" || true
  kill -INT "$spid"; wait "$spid" || true
  local f s dps mbit p50 p99 us cpu per_core cap seed
  f=$(tail -n1 "$work/fetch.json"); s=$(tail -n1 "$work/serve.json")
  read -r dps mbit p50 p99 < <(jq -r '[.data_per_s, .mbit_per_s, .latency_ms.p50, .latency_ms.p99] | @tsv' <<<"$f")
  read -r us cpu < <(jq -r '[(.producer_us_per_packet // 0), .cpu_percent] | @tsv' <<<"$s")
  per_core=$(awk -v m="$mbit" -v c="$cpu" 'BEGIN{printf "%.0f", (c>0 ? m/(c/100) : 0)}')
  cap=$(awk -v p="$payload" -v u="$us" 'BEGIN{printf "%.0f", (u>0 ? p*8/u : 0)}')
  seed="-"; [ "$payload" = 8192 ] && seed=$(seed_per_core "$sign")
  printf '| %s%s | %s | %s | %.0f | %.1f | %.2f | %.2f | %.1f | %.0f | %s | %s | %s |\n' \
    "$sign" "${1:+ (no key cache)}" "$payload" "$threads" "$dps" "$mbit" "$p50" "$p99" "$us" "$cpu" "$per_core" "$cap" "$seed"
  if [ -z "${1:-}" ] && [ "$sign" = ecdsa ] && [ "$payload" = 1024 ] && [ "$threads" = 1 ]; then ecdsa_us=$us; fi
  if [ "$sign" = null ] && [ "$payload" = 32768 ] && [ "$threads" = 1 ]; then null_cap=$cap; fi
}
for sign in rsa ecdsa sha256 ed25519 null; do
  for payload in 1024 4096 8192 32768; do
    for threads in 1 2; do
      run_one "$sign" "$payload" "$threads"
    done
  done
done
# The seed's per-packet key lookup (its "improve signing function" step).
for sign in rsa ecdsa; do
  run_one "$sign" 8192 1 --no-key-cache
done
echo
awk -v us="$ecdsa_us" -v o="$ossl_sign" 'BEGIN{r=1e6/us; printf "ECDSA per packet (1 KiB, 1 worker): %.0f packets/s from %.1f µs/packet = %.0f %% of openssl sign/s %s (target ≥ 90 %%)\n", r, us, 100*r/o, o}'
awk -v c="$null_cap" 'BEGIN{printf "Null, 32 KiB payload, 1 worker: producer capacity %.2f GB/s of payload per core (target ≥ 1 GB/s)\n", c/8000}'
