#!/usr/bin/env bash
# The runner cargo uses for test binaries in scripts/test.sh: runs the binary as
# cargo would, with libtest's per-test times (`--report-time`; RUSTC_BOOTSTRAP is set
# for the test process only, to unlock that one reporting flag of the stable
# libtest — nothing is compiled with it), and appends "seconds<TAB>test" for each
# finished test to $GRANARY_TEST_TIMES, from which test.sh prints the slowest ten.
set -uo pipefail
bin="$1"; shift
log="${GRANARY_TEST_TIMES:-/dev/null}"
RUSTC_BOOTSTRAP=1 "$bin" "$@" -Z unstable-options --report-time 2>&1 |
  while IFS= read -r line; do
    printf '%s\n' "$line"
    if [[ $line =~ ^test\ (.+)\ \.\.\.\ (ok|FAILED|ignored)\ \<([0-9.]+)s\>$ ]]; then
      printf '%s\t%s %s\n' "${BASH_REMATCH[3]}" "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" >> "$log"
    fi
  done
exit "${PIPESTATUS[0]}"
