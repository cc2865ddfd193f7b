#!/usr/bin/env bash
# Content-defined chunking: publishing cost and chunking speed, in one run.
# Usage: bash bench/cas.sh [MIB] [ROUNDS]   (default: 1024 5)
#  1. chunking throughput in memory (FastCDC, Rabin 31-byte window, SHA-256
#     for scale): crates/store/examples/chunk_speed.rs;
#  2. `granary put` of one MIB-MiB file (no daemon, fsync, signed manifest):
#     plain ingest (fixed 8 KiB, no hash index) vs FastCDC + hash index vs
#     Rabin + hash index, alternating, ROUNDS times each, each into a fresh
#     data directory; wall time, CPU time (user+sys), peak RSS, and the
#     median ratio to plain.
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-1024}
rounds=${2:-5}
cargo build --release -q -p granary
cargo build --release -q -p granary-store --example chunk_speed
G=$PWD/target/release/granary
work=$(mktemp -d -p "${BENCH_DIR:-$PWD/target}")
trap 'rm -rf "$work"' EXIT
echo "== chunking throughput (256 MiB in memory, best of 3)"
"$PWD/target/release/examples/chunk_speed" 256 3
echo
echo "== publish ${mib} MiB: disk $(df -h "$work" | tail -1 | awk '{print $1, $2}'); source from /dev/urandom, page cache warm"
src="$work/src"
head -c $((mib << 20)) /dev/urandom > "$src"
cat "$src" > /dev/null
m() { sync; /usr/bin/time -f "%e %M %U %S" "$@" 2>&1 >/dev/null | tail -1; }
declare -A times
printf "%-6s %-34s %9s %9s %9s %11s %10s\n" round what seconds cpu-s MB/s "peak RSS" segments
for r in $(seq "$rounds"); do
  for what in plain fastcdc rabin; do
    case $what in
      plain) args=(--chunking fixed --no-index) ;;
      fastcdc) args=(--chunking fastcdc) ;;
      rabin) args=(--chunking rabin) ;;
    esac
    d="$work/d-$what"
    rm -rf "$d"
    # Same preparation before every run: this VM returns freed pages to its
    # host within seconds (virtio-balloon free page reporting) and the next
    # writer of page cache pays a host fault per page, so runs alternate
    # and the medians are compared.
    sleep 1
    read -r s k u sy <<<"$(m "$G" --data-dir "$d" --socket "$work/none.sock" put "$src" "/bench/$what" "${args[@]}")"
    segs=$("$G" --data-dir "$d" stat "/bench/$what" | python3 -c 'import sys,json; t=sys.stdin.read(); m=json.loads(t[:t.rindex("path ")]); print(m.get("segments") or (m["size"]+m["segment_size"]-1)//m["segment_size"])')
    times[$what]="${times[$what]:-} $s"
    printf "%-6s %-34s %9.2f %9.2f %9.0f %7.1f MiB %10s\n" "$r" "$what (${args[*]})" "$s" "$(awk -v u="$u" -v s="$sy" 'BEGIN{print u+s}')" "$(awk -v b=$((mib << 20)) -v s="$s" 'BEGIN{print b/s/1e6}')" "$(awk -v k="$k" 'BEGIN{print k/1024}')" "$segs"
    rm -rf "$d"
  done
done
vals() { tr ' ' '\n' | grep -v '^$'; }
med() { vals | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
p=$(echo "${times[plain]}" | med); f=$(echo "${times[fastcdc]}" | med); rb=$(echo "${times[rabin]}" | med)
echo
echo "median seconds: plain $p, fastcdc+index $f, rabin+index $rb"
awk -v p="$p" -v f="$f" -v r="$rb" 'BEGIN{printf "ratio to plain ingest: fastcdc+index %.2fx (target <= 1.3x), rabin+index %.2fx\n", f/p, r/p}'
# The same comparison two other ways, to show how much the noise moves it:
# each round's own ratio (median over rounds), and the fastest run of each.
paste <(echo "${times[plain]}" | vals) <(echo "${times[fastcdc]}" | vals) |
  awk '{print $2/$1}' | sort -g | awk '{a[NR]=$1} END{printf "per-round fastcdc/plain ratios: %.2f-%.2fx, median %.2fx\n", a[1], a[NR], a[int((NR+1)/2)]}'
bp=$(echo "${times[plain]}" | vals | sort -g | head -1)
bf=$(echo "${times[fastcdc]}" | vals | sort -g | head -1)
awk -v p="$bp" -v f="$bf" 'BEGIN{printf "fastest runs: plain %.2f s, fastcdc+index %.2f s, ratio %.2fx\n", p, f, f/p}'
