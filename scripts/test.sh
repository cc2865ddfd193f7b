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
phase "cargo test: build"
# Every test binary runs under scripts/test-runner.sh, which records each test's time.
runner="target.'cfg(all())'.runner='$PWD/scripts/test-runner.sh'"
times=$(mktemp)
faults_log=$(mktemp)
trap 'rm -f "$times" "$faults_log"' EXIT
export GRANARY_TEST_TIMES="$times"
cargo test --workspace --locked --no-run --config "$runner" 2>&1 | tee "$faults_log"
# The fault-injection suite is one long test (about 100 s) that leaves a core idle much
# of the time: it runs beside the others, as its own process (cargo would run it after
# them). Its output follows theirs.
faults_bin=$(grep -o 'target/debug/deps/faults-[0-9a-f]*' "$faults_log" | tail -1 || true)
[ -x "$faults_bin" ] || { echo "the fault suite's test binary was not found" >&2; exit 1; }
phase "cargo test (the fault-injection suite beside it: $faults_bin)"
(cd tests/faults && bash ../../scripts/test-runner.sh "../../$faults_bin") > "$faults_log" 2>&1 &
faults_pid=$!
# The integration tests wait on daemons, links and databases much of the time: more
# test threads than cores keep both cores busy (no test asserts a time).
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-4}"
status=0
cargo test --workspace --locked --exclude granary-faults --config "$runner" || status=$?
faults_status=0
wait "$faults_pid" || faults_status=$?
phase "the fault-injection suite (granary-faults), exit $faults_status"
cat "$faults_log"
[ "$status" != 0 ] || status=$faults_status
phase "the ten slowest tests (seconds; the machine's load decides these, nothing asserts them)"
bash scripts/slowest-tests.sh "$times"
phase "done, exit $status"
exit "$status"
