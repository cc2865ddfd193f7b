#!/usr/bin/env bash
# The fault-injection suite at full size (issue #27): 10,000 operations (puts, some
# racing on one version; gets by another application over NDN and by the publisher;
# renames; removals; publish-dirs) against a real daemon, 100 faults (SIGKILL of the
# daemon and of clients, PostgreSQL stopped and started, the node's file system filled,
# bytes flipped in stored files), then recovery and the invariant check over the history
# (tests/faults/README.md). Prints the report; exit 1 on any violation. Root (the
# disk-full fault mounts a loop file system); PostgreSQL from scripts/setup-test-deps.sh.
# Usage: bash bench/faults.sh [OPS] [FAULTS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
ops=${1:-10000}
faults=${2:-100}
seed=${3:-}
cargo build --release -q -p granary -p granary-faults
args=(--bin "$PWD/target/release/granary" --ops "$ops" --faults "$faults" --workers 4 --pg)
[ "$(id -u)" = 0 ] && args+=(--disk)
[ -n "$seed" ] && args+=(--seed "$seed")
/usr/bin/time -f "harness peak RSS %M KiB, %e s" target/release/granary-faults "${args[@]}"
