#!/usr/bin/env bash
# publish-dir throughput: N small netCDF files in a CMIP6 DRS tree, published and
# catalogued by `granary publish-dir` (no daemon: the embedded catalog), beside
# `cp -r` of the same tree on the same disk, in one run.
# Usage: bash bench/publish-dir.sh [N=10000]
# The tree is made from `granary example-data`: each example file is copied under
# new member ids (r<k>i1p1f1) until there are N files (their member_id attribute then
# disagrees with the path: the translator reports it, which costs what it costs).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
cargo build --release -q -p granary
G=$PWD/target/release/granary
base=$(mktemp -d -p "${BENCH_DIR:-$PWD/target}")
trap 'rm -rf "$base"' EXIT
"$G" example-data "$base/example" 2>/dev/null
python3 - "$base/example" "$base/tree" "$n" <<'PY'
import os, shutil, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = []
for d, _, fs in os.walk(src):
    files += [os.path.join(d, f) for f in fs if f.endswith('.nc')]
files.sort()
k, made = 1, 0
while made < n:
    for f in files:
        if made >= n:
            break
        rel = os.path.relpath(f, src).split('/')
        member = rel[5]
        new_member = f"r{k}i1p1f1"
        rel[5] = new_member
        rel[-1] = rel[-1].replace(f"_{member}_", f"_{new_member}_")
        out = os.path.join(dst, *rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        shutil.copyfile(f, out)
        made += 1
    k += 1
PY
files=$(find "$base/tree" -type f | wc -l)
bytes=$(du -sb "$base/tree" | cut -f1)
echo "tree: $files netCDF files, $((bytes / 1024)) KiB"
t() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -1; }
sync
read -r cp_s cp_rss < <(t cp -r "$base/tree" "$base/copy")
sync
read -r pd_s pd_rss < <(t "$G" --data-dir "$base/data" --socket "$base/none.sock" publish-dir "$base/tree" --report "$base/report.json")
printf "%-28s %8s %12s %10s\n" what "s" "files/s" "peak RSS"
printf "%-28s %8.2f %12.0f %8d MiB\n" "cp -r" "$cp_s" "$(echo "$files / $cp_s" | bc -l)" $((cp_rss / 1024))
printf "%-28s %8.2f %12.0f %8d MiB\n" "granary publish-dir" "$pd_s" "$(echo "$files / $pd_s" | bc -l)" $((pd_rss / 1024))
python3 -c "import json,sys; r=json.load(open('$base/report.json')); print('outcomes:', r['counts'], 'fixes:', r['fixes'])"
