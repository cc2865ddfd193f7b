#!/usr/bin/env bash
# `granary mount` (issue 19) beside its peers, same object, same run:
#  1. sequential read of one MIB-MiB file from a remote node (TCP loopback):
#     `dd` through the mount vs `granary get` of the same object vs reading
#     the file directly (page cache) vs sshfs (only if sshfs and sshd are
#     installed: a throw-away sshd on 127.0.0.1);
#  2. random 4 KiB preads through a fresh mount: p50/p99 cold (fetched from
#     the producer) and warm (the same offsets again);
#  3. publish mode: `cp` of the file into the mount vs `granary put`;
#  4. a version the node holds (issue 48): `dd` through a mount on the producer node
#     itself (the node's file, decision 0100) vs `granary get` of the same object by
#     another application on that node (its own data directory, the node's socket),
#     RUNS alternating runs, with the Data the node sent during the mount's read.
# Each measurement gets a fresh consumer node (empty content store) and a
# fresh mount (empty block cache). Peak RSS of the mount process beside.
# Needs root and /dev/fuse.
#   bash bench/mount.sh [MIB] [RANDOM_READS] [all|publish|held]   (default: 1024 400 all)
# `publish` runs only section 3 (RUNS=3 alternating runs of each, median), `held`
# only section 4. NO_BUILD=1 skips the build, GRANARY=/path/to/granary measures
# another build.
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-1024}
nrand=${2:-400}
only=${3:-all}
[ "$(id -u)" = 0 ] || { echo "needs root (FUSE mounts)" >&2; exit 1; }
[ -r /dev/fuse ] || { echo "/dev/fuse missing" >&2; exit 1; }
[ -n "${NO_BUILD:-}" ] || cargo build --release -q -p granary
G=${GRANARY:-$PWD/target/release/granary}
PY=$PWD/tests/interop/.venv/bin/python
[ -x "$PY" ] || PY=python3
tmp=$(mktemp -d -p "${BENCH_TMP:-/tmp}")
pids=()
mounts=()
cleanup() {
  for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null || true; done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# start_daemon DIR [ARGS...]: a node with its data in DIR (pid in $dpid).
start_daemon() {
  local d=$1; shift
  mkdir -p "$d"
  $G --data-dir "$d" --socket "$d/g.sock" daemon "$@" > "$d/out" 2> "$d/err" &
  dpid=$!
  for _ in $(seq 200); do grep -qs '^ready' "$d/out" && break; sleep 0.05; done
  pids+=("$dpid")
}
g() { local d=$1; shift; $G --data-dir "$d" --socket "$d/g.sock" "$@"; }

# A consumer node routed to the producer, trusting its key.
consumer() {
  local d=$1
  start_daemon "$d"
  g "$d" route add /bench "tcp4://$ptcp" > /dev/null
  g "$d" key trust "$tmp/p.cert" > /dev/null
}

# mount_at DIR MP [ARGS...]: mounts /bench of node DIR at MP (pid in $mpid).
mount_at() {
  local d=$1 mp=$2; shift 2
  mkdir -p "$mp"
  $G --data-dir "$d" --socket "$d/g.sock" mount /bench "$mp" "$@" > "$mp.out" 2> "$mp.err" &
  mpid=$!
  for _ in $(seq 200); do grep -qs '^ready' "$mp.out" && break; sleep 0.05; done
  grep -q '^ready' "$mp.out" || { cat "$mp.err" >&2; exit 1; }
  mounts+=("$mp")
}
unmount_pid() { kill "$1"; for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.05; done; }
hwm() { awk '/VmHWM/{printf "%.1f MiB", $2/1024}' "/proc/$1/status"; }
rate() { awk -v b=$((mib << 20)) -v s="$1" 'BEGIN{ printf "%.2f", b*8/s/1e9 }'; }
now() { date +%s.%N; }

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) (shared with other builds: figures are noisy)"
head -c $((mib << 20)) /dev/urandom > "$tmp/file"
want=$(sha256sum "$tmp/file" | cut -d' ' -f1)
if [ "$only" = held ]; then
  start_daemon "$tmp/h"
  g "$tmp/h" put "$tmp/file" /bench/obj ${PUT_ARGS:-} > /dev/null 2>&1
  g "$tmp/h" key export > "$tmp/h.cert" 2>/dev/null
  $G --data-dir "$tmp/app" --socket "$tmp/h/g.sock" key trust "$tmp/h.cert" > /dev/null 2>&1
  data_out() { g "$tmp/h" status | awk '$1 == "data" { for (i = 1; i < NF; i++) if ($i == "out") print $(i + 1) }'; }
  echo "$mib MiB object /bench/obj held by the node; mount on the node vs get by another app on it"
  printf "%-4s %-44s %9s %9s %12s\n" run reader seconds "Gbit/s" "node Data"
  ss=(); ms=()
  for r in $(seq "${RUNS:-3}"); do
    t0=$(now)
    $G --data-dir "$tmp/app" --socket "$tmp/h/g.sock" get -q /bench/obj -o "$tmp/got" > /dev/null 2>&1
    t1=$(now)
    [ "$(sha256sum "$tmp/got" | cut -d' ' -f1)" = "$want" ] || { echo "get: wrong bytes" >&2; exit 1; }
    rm -f "$tmp/got"
    s_get=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
    printf "%-4s %-44s %9s %9s %12s\n" "$r" "granary get (another app on the node)" "$s_get" "$(rate "$s_get")" "-"
    mp=$tmp/mh$r
    mount_at "$tmp/h" "$mp"
    d0=$(data_out)
    t0=$(now)
    dd if="$mp/obj" of=/dev/null bs=1M status=none
    t1=$(now)
    d1=$(data_out)
    s_mnt=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
    printf "%-4s %-44s %9s %9s %12s\n" "$r" "dd bs=1M through a mount on the node" "$s_mnt" "$(rate "$s_mnt")" "$((d1 - d0))"
    [ "$(sha256sum "$mp/obj" | cut -d' ' -f1)" = "$want" ] || { echo "mount: wrong bytes" >&2; exit 1; }
    unmount_pid "$mpid"
    ss+=("$s_get"); ms+=("$s_mnt")
  done
  med() { printf "%s\n" "$@" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
  s_get=$(med "${ss[@]}"); s_mnt=$(med "${ms[@]}")
  awk -v g="$s_get" -v m="$s_mnt" 'BEGIN{ printf "medians: get %.2f s, mount %.2f s; mount / get throughput: %.2fx\n", g, m, g/m }'
  echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi
if [ "$only" != publish ]; then
start_daemon "$tmp/p" --listen tcp://127.0.0.1:0
ptcp=$(sed -n 's#^listening tcp://##p' "$tmp/p/out" | head -1)
g "$tmp/p" put "$tmp/file" /bench/obj ${PUT_ARGS:-} > /dev/null 2> "$tmp/put.err"
chunking=$(grep -o '(fastcdc[^,]*\|(fixed[^,]*\|(rabin[^,]*' "$tmp/put.err" | tr -d '(' || true)
key=$(g "$tmp/p" key list | tr ' ' '\n' | grep '/KEY/' | grep -v /self/ | head -1)
g "$tmp/p" key export "$key" > "$tmp/p.cert"
echo "$mib MiB object /bench/obj ($chunking), producer node over TCP loopback"

# Warm the producer (its page cache and content store) once, for everyone.
consumer "$tmp/w"; g "$tmp/w" get --no-dedup --no-publish -q /bench/obj -o "$tmp/warm" > /dev/null; rm -f "$tmp/warm"

echo
echo "== sequential read"
printf "%-44s %9s %9s %12s\n" reader seconds "Gbit/s" "peak RSS"
consumer "$tmp/c1"
t0=$(now)
/usr/bin/time -f "%M" -o "$tmp/rss" $G --data-dir "$tmp/c1" --socket "$tmp/c1/g.sock" get --no-dedup --no-publish -q /bench/obj -o "$tmp/got" > /dev/null
t1=$(now)
[ "$(sha256sum "$tmp/got" | cut -d' ' -f1)" = "$want" ] || { echo "get: wrong bytes" >&2; exit 1; }
rm -f "$tmp/got"
s_get=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
printf "%-44s %9s %9s %8.1f MiB\n" "granary get (new node)" "$s_get" "$(rate "$s_get")" "$(awk -v k="$(cat "$tmp/rss")" 'BEGIN{print k/1024}')"

consumer "$tmp/c2"
mp=$tmp/m2
mount_at "$tmp/c2" "$mp"
t0=$(now)
dd if="$mp/obj" of=/dev/null bs=1M status=none
t1=$(now)
s_mnt=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
printf "%-44s %9s %9s %12s\n" "dd bs=1M of=/dev/null through the mount" "$s_mnt" "$(rate "$s_mnt")" "$(hwm "$mpid")"
got=$(sha256sum "$mp/obj" | cut -d' ' -f1)
[ "$got" = "$want" ] || { echo "mount: wrong bytes" >&2; exit 1; }
unmount_pid "$mpid"

t0=$(now)
dd if="$tmp/file" of=/dev/null bs=1M status=none
t1=$(now)
s_dir=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
printf "%-44s %9s %9s %12s\n" "dd bs=1M of=/dev/null, the file (page cache)" "$s_dir" "$(rate "$s_dir")" "-"

if command -v sshfs > /dev/null && [ -x /usr/sbin/sshd ]; then
  mkdir -p "$tmp/ssh" "$tmp/sshfs"; chmod 700 "$tmp/ssh"
  ssh-keygen -q -t ed25519 -N '' -f "$tmp/ssh/host"
  ssh-keygen -q -t ed25519 -N '' -f "$tmp/ssh/user"
  cp "$tmp/ssh/user.pub" "$tmp/ssh/authorized_keys"
  mkdir -p /run/sshd
  /usr/sbin/sshd -f /dev/null -o ListenAddress=127.0.0.1:22022 -o HostKey="$tmp/ssh/host" \
    -o AuthorizedKeysFile="$tmp/ssh/authorized_keys" -o PidFile="$tmp/ssh/pid" -o StrictModes=no \
    -o "Subsystem=sftp internal-sftp" -o PermitRootLogin=prohibit-password -D &
  pids+=($!)
  sleep 0.5
  sshfs -p 22022 -o IdentityFile="$tmp/ssh/user" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
    "root@127.0.0.1:$tmp" "$tmp/sshfs"
  mounts+=("$tmp/sshfs")
  t0=$(now)
  dd if="$tmp/sshfs/file" of=/dev/null bs=1M status=none
  t1=$(now)
  s_ssh=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
  printf "%-44s %9s %9s %12s\n" "dd bs=1M of=/dev/null through sshfs (loopback)" "$s_ssh" "$(rate "$s_ssh")" "-"
  umount "$tmp/sshfs" || umount -l "$tmp/sshfs"
else
  echo "sshfs: skipped (sshfs and openssh-server are not installed; apt-get install sshfs openssh-server)"
fi
awk -v g="$s_get" -v m="$s_mnt" 'BEGIN{ printf "ratio mount / granary get throughput: %.2fx\n", g/m }'

echo
echo "== random 4 KiB preads ($nrand offsets, fresh node and mount)"
consumer "$tmp/c3"
mp=$tmp/m3
mount_at "$tmp/c3" "$mp"
"$PY" - "$mp/obj" "$tmp/file" "$nrand" <<'EOF'
import os, random, sys, time
m, orig, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
size = os.path.getsize(orig)
rng = random.Random(1)
offs = [rng.randrange(0, size - 4096) for _ in range(n)]
fm = os.open(m, os.O_RDONLY); fo = os.open(orig, os.O_RDONLY)
def run(label):
    lat = []
    for o in offs:
        t = time.perf_counter()
        b = os.pread(fm, 4096, o)
        lat.append(time.perf_counter() - t)
        assert b == os.pread(fo, 4096, o)
    lat.sort()
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e3
    print(f"{label:<44} p50 {p(0.5):8.3f} ms   p99 {p(0.99):8.3f} ms")
run("cold (each read fetched from the producer)")
run("warm (same offsets: page cache)")
# Warm in the block cache only: drop the kernel's pages of the file.
os.posix_fadvise(fm, 0, 0, os.POSIX_FADV_DONTNEED)
run("warm (block cache, page cache dropped)")
EOF
echo "mount peak RSS: $(hwm "$mpid")"
unmount_pid "$mpid"

fi
echo
echo "== publish: cp into the mount vs granary put (local repository)"
start_daemon "$tmp/pub"
mp=$tmp/mpub
mkdir -p "$mp"
$G --data-dir "$tmp/pub" --socket "$tmp/pub/g.sock" mount --publish /bench "$mp" > "$mp.out" 2> "$mp.err" &
mpid=$!
for _ in $(seq 200); do grep -qs '^ready' "$mp.out" && break; sleep 0.05; done
grep -q '^ready' "$mp.out" || { cat "$mp.err" >&2; exit 1; }
mounts+=("$mp")
runs=${RUNS:-1}
cps=(); puts=()
for r in $(seq "$runs"); do
  t0=$(now); cp "$tmp/file" "$mp/viamount$r"; t1=$(now)
  s_cp=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
  g "$tmp/pub" ls /bench | grep -q "^/bench/viamount$r/v=" || { echo "cp: not published" >&2; exit 1; }
  t0=$(now); g "$tmp/pub" put "$tmp/file" "/bench/viaput$r" > /dev/null 2>&1; t1=$(now)
  s_put=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
  echo "run $r: cp into the mount (streamed, published on close) $s_cp s   granary put (daemon ingest) $s_put s"
  cps+=("$s_cp"); puts+=("$s_put")
  # Keep the disk bounded: only the last run's versions stay.
  rm -f "$mp/viamount$r"; g "$tmp/pub" rm "/bench/viaput$r" > /dev/null 2>&1
done
med() { printf "%s\n" "$@" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
s_cp=$(med "${cps[@]}"); s_put=$(med "${puts[@]}")
echo "cp into the mount (published on close):        $s_cp s  $(rate "$s_cp") Gbit/s  mount peak RSS $(hwm "$mpid")"
echo "granary put (daemon ingest):                   $s_put s  $(rate "$s_put") Gbit/s"
awk -v c="$s_cp" -v p="$s_put" 'BEGIN{ printf "ratio cp-through-mount time / put time: %.2fx\n", c/p }'
unmount_pid "$mpid"
