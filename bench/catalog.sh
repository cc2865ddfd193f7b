#!/usr/bin/env bash
# Catalog benchmark: N synthetic CMIP-like records (11 facets, Zipf-ish), build rate,
# index load, RSS, and p50/p99 of four query kinds, on SQLite and PostgreSQL side by side.
# Usage: bench/catalog.sh [N=1000000]   (RUNS=200 queries per kind)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --release -q -p granary-catalog --example catalog_bench -- "${1:-1000000}"
