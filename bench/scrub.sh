#!/usr/bin/env bash
# `granary repo scrub` throughput: re-hashing one stored version against its
# per-segment hashes and manifest, on every core and on one, beside
# `sha256sum` of the same file (one whole-file SHA-256, one core), same run.
# The file is read from the page cache (it was just written); COLD=1 drops
# the page cache before each run (root; disturbs anything else running).
# Usage: [PUT_ARGS="--chunking fixed"] bash bench/scrub.sh [MiB] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-1024}
runs=${2:-3}
cargo build --release -q -p granary
G=$PWD/target/release/granary
[ -x /usr/bin/time ] || { echo "GNU time missing: apt-get install time" >&2; exit 1; }
tmp=$(mktemp -d -p "${BENCH_TMP:-/tmp}")
trap 'rm -rf "$tmp"' EXIT
head -c $((mib << 20)) /dev/urandom > "$tmp/file"
$G --data-dir "$tmp/d" --socket "$tmp/none.sock" put "$tmp/file" /bench/scrub ${PUT_ARGS:-} >/dev/null 2>&1
stored=$($G --data-dir "$tmp/d" stat /bench/scrub | sed -n 's/^path //p')
rm -f "$tmp/file"
bytes=$(stat -c %s "$stored")
cold() { if [ "${COLD:-0}" = 1 ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi; }
# One measurement: prints "GB/s RSS_MB".
measure() {
  cold
  /usr/bin/time -f '%e %M' -o "$tmp/t" "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  read -r secs kb < "$tmp/t"
  awk -v b="$bytes" -v s="$secs" -v k="$kb" 'BEGIN { printf "%.2f %.0f\n", b / (s > 0 ? s : 0.001) / 1e9, k / 1024 }'
}
echo "scrub of $((bytes >> 20)) MiB ($($G --data-dir "$tmp/d" stat /bench/scrub | sed -n 's/.*"chunking": "\(.*\)".*/\1/p')), $runs run(s), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), cache: $([ "${COLD:-0}" = 1 ] && echo cold || echo warm)"
printf '%-34s %10s %10s\n' "" "GB/s" "peak RSS MB"
for label in "granary repo scrub (all cores)" "granary repo scrub --threads 1" "sha256sum (whole file, 1 core)"; do
  for r in $(seq "$runs"); do
    case "$label" in
      *"all cores"*) measure $G --data-dir "$tmp/d" repo scrub ;;
      *"--threads 1"*) measure $G --data-dir "$tmp/d" repo scrub --threads 1 ;;
      *) measure sha256sum "$stored" ;;
    esac
  done | sort -n | awk -v l="$label" '{ g[NR] = $1; m[NR] = $2 } END { i = int((NR + 1) / 2); printf "%-34s %10s %10s\n", l, g[i], m[i] }'
done
