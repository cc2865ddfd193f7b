#!/usr/bin/env bash
# Runs every test: formatting, lints, unit tests, interop tests against real
# python-ndn and NDNts, fuzz-corpus regression. Installs test dependencies first.
set -euo pipefail
cd "$(dirname "$0")/.."
# A whole-workspace run gains little from incremental state and it costs gigabytes of
# disk (decision 0102); a developer's own `cargo test` keeps it.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# Each phase says how long it took (minutes:seconds since the start), so that a slow run
# shows where its time went.
phase() { printf '== [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }
bash scripts/setup-test-deps.sh
phase "cargo fmt --check"
cargo fmt --all -- --check
phase "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings
phase "architecture: crate layers and no module cycles (tools/archcheck)"
cargo run -q --locked -p archcheck
# The test binaries carry no line tables (panics still name file and line); a
# developer's own `cargo test` keeps them (decision 0111). One build serves every
# test: the debug profile is optimised (decision 0112), so the network-namespace and
# node-at-speed tests run the `granary` binary `cargo test` builds.
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-false}"
phase "cargo test"
# Every test binary runs under scripts/test-runner.sh, which records each test's time.
times=$(mktemp)
trap 'rm -f "$times"' EXIT
export GRANARY_TEST_TIMES="$times"
status=0
# `--tests`: unit tests of every library and binary and the integration tests; not
# the examples (clippy checks them) nor doc tests (there are none): each would be one
# more binary linked, or the crate parsed again by rustdoc.
cargo test --workspace --locked --tests \
  --config "target.'cfg(all())'.runner='$PWD/scripts/test-runner.sh'" || status=$?
phase "the ten slowest tests (seconds; the machine's load decides these, nothing asserts them)"
bash scripts/slowest-tests.sh "$times"
phase "done, exit $status"
exit "$status"
