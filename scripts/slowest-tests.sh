#!/usr/bin/env bash
# Prints the ten slowest tests from a times file ("seconds<TAB>test" per line, as
# scripts/test-runner.sh writes it). awk reads all of sort's output: with `head`, the
# pipe would close early, sort would die of SIGPIPE and pipefail would turn a green
# run into exit 141 once the file outgrows a pipe buffer (it did: ~700 tests).
set -euo pipefail
sort -t$'\t' -k1,1 -rn "$1" | awk -F'\t' 'NR <= 10 { printf "%9.1f  %s\n", $1, $2 }'
