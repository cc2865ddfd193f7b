#!/usr/bin/env bash
# Runs every test: formatting, lints, unit tests, interop tests against real
# python-ndn and NDNts, fuzz-corpus regression. Installs test dependencies first.
set -euo pipefail
cd "$(dirname "$0")/.."
# A whole-workspace run gains little from incremental state and it costs gigabytes of
# disk (decision 0102); a developer's own `cargo test` keeps it.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
bash scripts/setup-test-deps.sh
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== architecture: crate layers and no module cycles (tools/archcheck)"
cargo run -q --locked -p archcheck
echo "== cargo build --release (the network-namespace tests and the node-at-speed tests run the release binary)"
cargo build --release --locked -p granary
export GRANARY_NETNS_BIN="$PWD/target/release/granary"
export GRANARY_RELEASE_BIN="$PWD/target/release/granary"
echo "== cargo test"
# Every test binary runs under scripts/test-runner.sh, which records each test's time.
times=$(mktemp)
trap 'rm -f "$times"' EXIT
export GRANARY_TEST_TIMES="$times"
status=0
cargo test --workspace --locked \
  --config "target.'cfg(all())'.runner='$PWD/scripts/test-runner.sh'" || status=$?
echo "== the ten slowest tests (seconds; the machine's load decides these, nothing asserts them)"
sort -t$'\t' -k1,1 -rn "$times" | head -10 | awk -F'\t' '{ printf "%9.1f  %s\n", $1, $2 }'
exit "$status"
