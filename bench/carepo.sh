#!/usr/bin/env bash
# carepo's experiment (seed 001, Fig. 3, Table VI) on the netns testbed:
# server —(2.5 Mbit/s down / 0.5 Mbit/s up, 20 ms each way)— gateway — LAN
# with client1 and client2. Two versions of a generated data set packed with
# tar; client1 fetches version 1, client2 version 2: first by name only
# (`granary get --no-dedup`), then with dedup fetch (client1 publishes what
# it fetched; client2 asks client1 by hash first). Prints the times side by
# side with peak RSS of each `granary get`, and the saving next to carepo's
# 38%. Needs root (network namespaces).
#
#   bash bench/carepo.sh [FILES] [FILE_KIB] [CHANGED]
# Defaults: 40 files of ~96 KiB (a ~4 MB tar), 4 changed, one removed, one
# added between the versions. The same experiment with a sweep over the number
# of changed files, a report and plots: `granary testbed run
# experiments/carepo.toml --out DIR` (docs/experiments/carepo).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 1; }
cargo build --release -q -p granary -p granary-bench
target/release/granary-bench-carepo --granary target/release/granary \
  --files "${1:-40}" --file-kib "${2:-96}" --changed "${3:-4}"
