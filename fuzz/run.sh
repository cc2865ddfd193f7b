#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) on nightly Rust with
# cargo-fuzz, starting from the committed seeds in fuzz/corpus/<target>; new
# inputs go to fuzz/work/<target> (not committed). Crashes land in fuzz/artifacts/<target>/: copy them to
# fuzz/regressions/<target>/ once fixed so `cargo test` replays them forever.
#   cargo install cargo-fuzz && rustup toolchain install nightly
#   bash fuzz/run.sh 300
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-60}
targets=${TARGETS:-"tlv name uri interest data lp cert manifest_root manifest_tree repo_command mgmt"}
cargo +nightly fuzz build -O
for t in $targets; do
  mkdir -p "corpus/$t" "work/$t"
  echo "== $t (${secs}s)"
  cargo +nightly fuzz run -O "$t" "work/$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 2>&1 \
    | grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)|SUMMARY|panicked|ERROR' || true
done
