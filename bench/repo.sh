#!/usr/bin/env bash
# Repository ingest and rename, side by side with cp on the same disk in one run.
# Usage: bash bench/repo.sh [SIZES_MIB...]   (default: 1024 4096)
# Prints median wall time (ROUNDS=3 interleaved rounds), range, MB/s, peak RSS
# for: cp, cp + fsync, granary put, put through a daemon; the speed ratios;
# and the time of granary mv for each size. Runs on the build disk (ext4 here), then —
# when root and mkfs.xfs are available (NO_XFS=1 turns it off) — again on an
# XFS file system made on a loop file on the same disk, where `granary put`
# reflinks the file into the store (no data written; one read pass to hash).
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("${@:-1024 4096}")
# shellcheck disable=SC2206
sizes=(${sizes[*]})
cargo build --release -q -p granary
G=$PWD/target/release/granary
base=$(mktemp -d -p "${BENCH_DIR:-$PWD/target}")
cleanup() { mountpoint -q "$base/xfs" 2>/dev/null && umount "$base/xfs"; rm -rf "$base"; }
trap cleanup EXIT
rounds=${ROUNDS:-3}
# Wall seconds and peak RSS (KiB) of one command, after flushing dirty pages
# so that one run's write-back is not charged to the next.
m() { sync; /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -1; }
med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
span() { tr ' ' '\n' | grep -v '^$' | sort -g | awk 'NR==1{lo=$1} {hi=$1} END{printf "%s–%s", lo, hi}'; }

# This machine is a VM with virtio-balloon free page reporting: pages freed
# in the guest go back to the host within seconds, and whoever writes new
# page cache next pays a host fault per page (a 1 GiB cp: ~3 s on reported
# pages, ~0.3 s on just-freed ones). So every command runs ROUNDS times,
# interleaved, each after the same preparation (previous output deleted,
# sync, 1 s pause), and the table gives medians and the range.
run() { # run DIR LABEL
  local work=$1 fs=$2
  echo "disk: $fs on $(df -h "$work" | tail -1 | awk '{print $1, $2}'); files made with /dev/urandom; page cache warm for the source; $rounds rounds, interleaved"
  printf "%-6s %-10s %-24s %10s %12s %10s %12s\n" fs size what "median s" "range s" "MB/s" "peak RSS"
  for mib in "${sizes[@]}"; do
    src="$work/src-$mib"
    head -c $((mib << 20)) /dev/urandom > "$src"
    cat "$src" > /dev/null
    bytes=$((mib << 20))
    declare -A T=() K=()
    for _ in $(seq "$rounds"); do
      sleep 1
      read -r s k <<<"$(m cp --reflink=never "$src" "$work/cp-$mib")"; rm -f "$work/cp-$mib"
      T[cp]+=" $s"; K[cp]=$k; sleep 1
      read -r s k <<<"$(m python3 -c 'import shutil,os,sys; shutil.copyfile(sys.argv[1],sys.argv[2]); f=os.open(sys.argv[2],os.O_RDONLY); os.fsync(f)' "$src" "$work/cp2-$mib")"; rm -f "$work/cp2-$mib"
      T[cpf]+=" $s"; K[cpf]=$k; sleep 1
      read -r s k <<<"$(m "$G" --data-dir "$work/gd" --socket "$work/none.sock" put "$src" "/bench/f$mib" --sign digest)"; rm -rf "$work/gd"
      T[put]+=" $s"; K[put]=$k; sleep 1
      # The same through a running daemon (it opens the file and streams it
      # in); the daemon's peak RSS.
      "$G" --data-dir "$work/gdd" daemon > "$work/dd.out" 2>/dev/null & dpid=$!
      for _ in $(seq 100); do grep -q ready "$work/dd.out" 2>/dev/null && break; sleep 0.05; done
      sync
      r=$(/usr/bin/time -f "%e %M" "$G" --data-dir "$work/gdd" put "$src" "/bench/f$mib" --sign digest 2>&1 >/dev/null | tail -1)
      drss=$(awk '/VmHWM/{print $2}' /proc/$dpid/status)
      kill $dpid; wait $dpid 2>/dev/null || true; rm -rf "$work/gdd"
      read -r s _ <<<"$r"
      T[daemon]+=" $s"; K[daemon]=$drss
    done
    row() { local s; s=$(echo "${T[$2]}" | med); printf "%-6s %-10s %-24s %10.2f %12s %10.0f %8.1f MiB\n" "$fs" "${mib}MiB" "$1" "$s" "$(echo "${T[$2]}" | span)" "$(awk -v b=$bytes -v s=$s 'BEGIN{print b/s/1e6}')" "$(awk -v k=${K[$2]} 'BEGIN{print k/1024}')"; }
    row "cp" cp; row "cp + fsync" cpf; row "granary put (fsync)" put; row "put via daemon" daemon
    c=$(echo "${T[cp]}" | med); cf=$(echo "${T[cpf]}" | med); p=$(echo "${T[put]}" | med); d=$(echo "${T[daemon]}" | med)
    awk -v c="$c" -v cf="$cf" -v p="$p" -v d="$d" -v fs="$fs" -v mib="$mib" 'BEGIN{printf "%-6s %-10s speed vs cp: put %.2fx, via daemon %.2fx; vs cp + fsync: put %.2fx, via daemon %.2fx (target >= 0.8x cp)\n", fs, mib "MiB", c/p, c/d, cf/p, cf/d}'
    # Rename of the stored version (no data touched).
    "$G" --data-dir "$work/gd" --socket "$work/none.sock" put "$src" "/bench/f$mib" --sign digest >/dev/null 2>&1
    mv_ms=$("$G" --data-dir "$work/gd" --socket "$work/none.sock" mv "/bench/f$mib" "/bench/renamed$mib" 2>&1 | sed -n 's/renamed in \(.*\) ms/\1/p')
    printf "%-6s %-10s %-24s %10s ms\n" "$fs" "${mib}MiB" "granary mv" "$mv_ms"
    rm -f "$src"; rm -rf "$work/gd"
  done
}

run "$base" "$(findmnt -no FSTYPE -T "$base" 2>/dev/null || stat -f -c %T "$base")"
if [ "${NO_XFS:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v mkfs.xfs >/dev/null; then
  max=0; for s in "${sizes[@]}"; do [ "$s" -gt "$max" ] && max=$s; done
  truncate -s $(( (3 * max + 1024) << 20 )) "$base/xfs.img"
  mkfs.xfs -q -f -m reflink=1 "$base/xfs.img"
  mkdir -p "$base/xfs" && mount -o loop "$base/xfs.img" "$base/xfs"
  echo
  run "$base/xfs" xfs
fi
