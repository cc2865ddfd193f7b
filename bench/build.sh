#!/usr/bin/env bash
# What building Granary costs a developer, per commit: a clean release build of the
# `granary` binary (wall and CPU time from GNU time, peak RSS of the build), the
# binary's size and how much of it is debug info, a clean debug build, and the
# edit-compile loop (touch crates/cli/src/main.rs, rebuild the debug binary).
# Each commit is built in its own git worktree with its own empty target directory,
# so nothing is shared between them; the builds run one after the other.
# Usage: bash bench/build.sh [REV …]   (default: HEAD)
set -euo pipefail
cd "$(dirname "$0")/.."
revs=("$@")
[ ${#revs[@]} -eq 0 ] && revs=(HEAD)
[ -x /usr/bin/time ] || { echo "GNU time missing: apt-get install time" >&2; exit 1; }
tmp=$(mktemp -d -p "${BENCH_TMP:-/tmp}")
cleanup() { for w in "$tmp"/wt-*; do [ -d "$w" ] && git worktree remove --force "$w"; done; rm -rf "$tmp"; }
trap cleanup EXIT
timed() { # LABEL CMD… : runs CMD, prints "wall cpu rss"
  /usr/bin/time -f '%e %U %S %M' -o "$tmp/time" "${@:2}" > "$tmp/$1.log" 2>&1 ||
    { echo "$1 failed:" >&2; tail -20 "$tmp/$1.log" >&2; exit 1; }
  awk '{ printf "%.0f %.0f %.1f\n", $1, $2 + $3, $4 / 1048576 }' "$tmp/time"
}
echo "$(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), $(rustc --version)"
printf "%-9s %-18s %-18s %9s %9s %-18s %-14s\n" commit "release wall/CPU s" "release build GiB" "bin MiB" "debug MiB" "debug wall/CPU s" "edit-cli s"
for rev in "${revs[@]}"; do
  short=$(git rev-parse --short "$rev")
  wt="$tmp/wt-$short"
  git worktree add -q --detach "$wt" "$rev"
  export CARGO_TARGET_DIR="$tmp/target-$short"
  read -r rw rc rr < <(cd "$wt" && timed "release-$short" cargo build --release --locked -p granary)
  bin="$CARGO_TARGET_DIR/release/granary"
  size=$(stat -c %s "$bin")
  dbg=$(size -A "$bin" | awk '$1 ~ /^\.debug/ { s += $2 } END { print s + 0 }')
  read -r dw dc _ < <(cd "$wt" && timed "debug-$short" cargo build --locked -p granary)
  touch "$wt/crates/cli/src/main.rs"
  read -r ew _ _ < <(cd "$wt" && timed "edit-$short" cargo build --locked -p granary)
  printf "%-9s %-18s %-18s %9.1f %9.1f %-18s %-14s\n" "$short" "$rw / $rc" "$rr" \
    "$(awk -v s="$size" 'BEGIN{print s/1048576}')" "$(awk -v s="$dbg" 'BEGIN{print s/1048576}')" "$dw / $dc" "$ew"
  rm -rf "$CARGO_TARGET_DIR"
done
