#!/usr/bin/env bash
# Mutation check of the forwarder's PIT and Content Store and of the manifest
# verifier: does the test suite notice when the code is changed?
#
#   bash bench/mutants.sh [list]
#
# Needs cargo-mutants (`cargo install cargo-mutants --locked`). Runs in place
# (no copy of the tree, the usual target/ is reused): do not edit the sources
# while it runs; it restores every file it mutates. `list` only counts the
# mutants. Results go to target/mutants/ (outcomes.json, caught.txt, missed.txt,
# timeout.txt, unviable.txt); the summary is in bench/RESULTS.md ("Mutation check").
#
# Forwarder: the core functions of pit.rs and cs.rs (the regex below): which
# Interest an entry is, which Data satisfies it, timers, what a nonce loop is,
# what the CS admits, finds and evicts (132 mutants, ~10 min on two shared
# cores; Display impls, parsing and debug helpers are left out). Manifest:
# the whole of crates/manifest/src/lib.rs, verifier and publisher side (269
# mutants, ~35 min). Only the crates' own unit tests run (`-- --lib`); the
# forwarder's end-to-end tests live in crates/cli and are not part of it.
set -euo pipefail
cd "$(dirname "$0")/.."

FORWARDER_RE='Pit::(find|find_or_insert|remove_id|matches_into|expired|pop_due|next_timer)|PitKey::of|DeadNonceList::(add_hashed|contains_hashed|put|grow)|ContentStore::(insert|find_match|find_entry_counting|evict_one|evict_until|erase_prefix|set_config|admits|remove_id)'

run() {
    cargo mutants --in-place --no-shuffle --timeout 90 -j 1 "$@"
}

if [ "${1:-}" = list ]; then
    run --list -p granary-forwarder \
        --file crates/forwarder/src/pit.rs --file crates/forwarder/src/cs.rs --re "$FORWARDER_RE" | wc -l
    run --list -p granary-manifest --file crates/manifest/src/lib.rs | wc -l
    exit 0
fi

run -p granary-forwarder --file crates/forwarder/src/pit.rs --file crates/forwarder/src/cs.rs \
    --re "$FORWARDER_RE" -o target/mutants/forwarder -- --lib || true
run -p granary-manifest --file crates/manifest/src/lib.rs -o target/mutants/manifest -- --lib || true
for d in target/mutants/forwarder target/mutants/manifest; do
    echo "== $d"
    for k in caught missed timeout unviable; do
        printf '%-9s %s\n' "$k" "$(wc -l < "$d/mutants.out/$k.txt" 2>/dev/null || echo 0)"
    done
done
