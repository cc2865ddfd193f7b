#!/usr/bin/env bash
# What the netns testbed's emulation delivers against what it is configured
# to do: round trips over a 4 ms + 16 ms link and directly, loss each way,
# rate at 100 Mbit/s (tbf and relay), the bounded queue (relay, and tbf for
# comparison), carepo's Fig. 3 (2.5 / 0.5 Mbit/s, 20 ms each way, the LAN,
# an NDN fetch through the gateway). The tests in
# crates/cli/tests/it/netns_testbed.rs check the set-up and that traffic
# crosses; this runs them (the tbf queue one too) with the release binary
# and prints the figures they measure. Needs root (network namespaces).
#
#   bash bench/netns-testbed.sh
# Expected on an idle machine: RTT min within 1 ms of the configured delay,
# rates within a few % of the configured ones, the relay's queue p50 ≈
# delay + queue / rate (30 ms); a loaded machine stretches all of them.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 1; }
cargo build --release -q -p granary
GRANARY_NETNS_BIN="$PWD/target/release/granary" \
  cargo test --release -q -p granary --test it -- netns_testbed:: \
  --include-ignored --nocapture --test-threads=1 2>&1 |
  grep -E 'emulated|direct \(no relay\)|loss [0-9.]+:|rate by|carepo Fig|fetched' |
  grep -v '^linkem'
