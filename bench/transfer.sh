#!/usr/bin/env bash
# Verified fetch of one repository object through the daemon: `granary get`
# (the fetch engine, CUBIC, manifest-verified, pwrite output) against an NDNts
# consumer (@ndn/segmented-object fetch via tests/interop/ndnts/fetch.mjs,
# UnixTransport to the same daemon, DigestSha256 verification of every
# segment), same object, same run. Wall time and peak RSS from GNU time, daemon
# CPU from /proc.
# Usage: [PUT_ARGS="--chunking fixed"] [SEGMENT_SIG=null] bash bench/transfer.sh [MiB] [RUNS] [DAEMON_ARGS...]
#   e.g. bash bench/transfer.sh 1024 2                 (CS on, default capacity)
#        bash bench/transfer.sh 1024 2 --cs-capacity 0 (every Data built by the repo)
#   SEGMENT_SIG=null: the repository serves the object's segments with a
#   NullSignature (`granary repo config --segment-signature null`): granary
#   get still checks every segment against the signed manifest; NDNts has no
#   way to check them and accepts them unchecked (fetch.mjs --accept-null).
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-1024}
runs=${2:-1}
shift $(( $# < 2 ? $# : 2 ))
cargo build --release -q -p granary
G=$PWD/target/release/granary
NTS=$PWD/tests/interop/ndnts/fetch.mjs
[ -x /usr/bin/time ] || { echo "GNU time missing: apt-get install time" >&2; exit 1; }
[ -d tests/interop/ndnts/node_modules/@ndn/segmented-object ] || { echo "NDNts missing: run scripts/setup-test-deps.sh" >&2; exit 1; }
tmp=$(mktemp -d -p "${BENCH_TMP:-/tmp}")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
hz=$(getconf CLK_TCK)
head -c $((mib << 20)) /dev/urandom > "$tmp/file"
want=$(sha256sum "$tmp/file" | cut -d' ' -f1)
$G --data-dir "$tmp/d" --socket "$tmp/g.sock" daemon "$@" > "$tmp/dout" 2>"$tmp/derr" & gpid=$!; pids+=($gpid)
for _ in $(seq 200); do grep -q ready "$tmp/dout" && break; sleep 0.05; done
$G --data-dir "$tmp/d" --socket "$tmp/g.sock" put "$tmp/file" /bench/obj ${PUT_ARGS:-} >/dev/null 2>&1
nts_args=()
ndnts_label="NDNts fetch (digest per segment)"
if [ "${SEGMENT_SIG:-digest}" = null ]; then
  $G --data-dir "$tmp/d" --socket "$tmp/g.sock" repo config --segment-signature null >/dev/null
  nts_args=(--accept-null)
  ndnts_label="NDNts fetch (Null: unchecked)"
fi
rm -f "$tmp/file"   # the repo holds it; keep the page cache for the repo's copy
cpu() { awk '{print $14+$15}' /proc/$gpid/stat; }
bytes=$((mib << 20))
echo "$mib MiB object, put args: ${PUT_ARGS:-(defaults)}, segment signature: ${SEGMENT_SIG:-digest}, daemon args: ${*:-(defaults)}; $(nproc) cores shared by consumer and daemon"
printf "%-8s %-34s %9s %9s %11s %12s\n" run consumer seconds "Gbit/s" "peak RSS" "daemon CPU s"
for r in $(seq "$runs"); do
  for who in granary ndnts; do
    out="$tmp/out.$who"
    t0=$(cpu)
    if [ "$who" = granary ]; then
      /usr/bin/time -f "%e %M" -o "$tmp/time" $G --data-dir "$tmp/d" --socket "$tmp/g.sock" \
        get --no-dedup /bench/obj -o "$out" --json > "$tmp/json" 2> "$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
      label="granary get (cubic, manifest)"
    else
      /usr/bin/time -f "%e %M" -o "$tmp/time" node "$NTS" "$tmp/g.sock" /bench/obj "$out" --timeout 900 "${nts_args[@]}" \
        > "$tmp/json" 2> "$tmp/err" || { cat "$tmp/json" "$tmp/err" >&2; exit 1; }
      label=$ndnts_label
    fi
    t1=$(cpu)
    got=$(sha256sum "$out" | cut -d' ' -f1)
    [ "$got" = "$want" ] || { echo "$who: wrong bytes" >&2; exit 1; }
    rm -f "$out"
    read -r secs rss < "$tmp/time"
    gbps=$(awk -v b=$bytes -v s="$secs" 'BEGIN{ printf "%.2f", b*8/s/1e9 }')
    dcpu=$(awk -v t=$((t1-t0)) -v hz="$hz" 'BEGIN{ printf "%.1f", t/hz }')
    printf "%-8s %-34s %9s %9s %8.1f MiB %12s\n" "$r" "$label" "$secs" "$gbps" "$(awk -v k="$rss" 'BEGIN{print k/1024}')" "$dcpu"
    eval "s_$who=$secs"
    if [ "$who" = granary ]; then grep -E "^(Goodput|Retrans|Timeouts|RTT)" "$tmp/err" | sed 's/^/           /'; fi
  done
  awk -v g="$s_granary" -v n="$s_ndnts" 'BEGIN{ printf "         ratio (NDNts time / granary time): %.1fx\n", n/g }'
done
echo "daemon peak RSS (VmHWM): $(awk '/VmHWM/{print $2/1024 " MiB"}' /proc/$gpid/status)"
