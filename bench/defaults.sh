#!/usr/bin/env bash
# What a user gets with no flags: default `granary put` on node A, then default
# `granary get` of the same file by three consumers: (1) the publisher (A's data
# directory: the verified local copy), (2) another application on node A (its own data
# directory, through A's socket), and, run as root, the same as another Unix user
# (`nobody`, decision 0103), (3) node B, whose daemon reaches A over TCP
# loopback; beside `cp` of the same file and beside `get --no-dedup` for (2) and (3)
# (dedup on must cost ≤ 10% when there is nothing to dedupe). Each case starts cold:
# B without the object, A's and B's content stores erased, and (run as root) the page
# cache dropped, `cp` included: what a first fetch of a version sees (COLD=0 keeps the
# page cache as the previous case left it).
# Wall time and peak RSS from GNU time; CPU seconds (and CPU seconds per GiB) of `get`
# (GNU time) and of daemons A and B (/proc/<pid>/stat, before and after); every output
# is compared with the original. bench/between-nodes.sh compares builds on node B's case.
# Usage: bash bench/defaults.sh [MiB] [RUNS]   (PUT_ARGS="--chunking …" to compare a chunking;
# NO_BUILD=1 skips the build, GRANARY=/path/to/granary measures another build)
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-1024}
runs=${2:-2}
[ -n "${NO_BUILD:-}" ] || cargo build --release -q -p granary
G=${GRANARY:-$PWD/target/release/granary}
[ -x /usr/bin/time ] || { echo "GNU time missing: apt-get install time" >&2; exit 1; }
tmp=$(mktemp -d -p "${BENCH_TMP:-/tmp}")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
port=$((20000 + RANDOM % 20000))
head -c $((mib << 20)) /dev/urandom > "$tmp/file"
want=$(sha256sum "$tmp/file" | cut -d' ' -f1)
A=("$G" --data-dir "$tmp/a" --socket "$tmp/a.sock")
B=("$G" --data-dir "$tmp/b" --socket "$tmp/b.sock")
C=("$G" --data-dir "$tmp/c" --socket "$tmp/a.sock")   # another application on node A
# Another user on node A (root only): `nobody`, its own data directory; the node's
# directory must be reachable (mktemp's is 0700).
U=()
if [ "$(id -u)" = 0 ] && command -v runuser > /dev/null && id nobody > /dev/null 2>&1; then
  chmod 755 "$tmp"
  mkdir -p "$tmp/u" && chown nobody "$tmp/u"
  U=(runuser -u nobody -- env HOME="$tmp/u" "$G" --data-dir "$tmp/u/d" --socket "$tmp/a.sock")
fi
"${A[@]}" daemon --listen "tcp://127.0.0.1:$port" > "$tmp/aout" 2> "$tmp/aerr" & pids+=($!); pid_a=$!
"${B[@]}" daemon > "$tmp/bout" 2> "$tmp/berr" & pids+=($!); pid_b=$!
for _ in $(seq 200); do grep -q ready "$tmp/aout" && grep -q ready "$tmp/bout" && break; sleep 0.05; done
/usr/bin/time -f "%e %M" -o "$tmp/time" "${A[@]}" put "$tmp/file" /bench/obj ${PUT_ARGS:-} > /dev/null 2> "$tmp/err" \
  || { cat "$tmp/err" >&2; exit 1; }
read -r put_s put_rss < "$tmp/time"
# B trusts A's publisher key and routes /bench to A.
"${A[@]}" key export > "$tmp/a.cert" 2>/dev/null || "${A[@]}" key export /granary/publisher > "$tmp/a.cert"
"${B[@]}" key trust "$tmp/a.cert" > /dev/null
"${C[@]}" key trust "$tmp/a.cert" > /dev/null
if [ ${#U[@]} -gt 0 ]; then chmod 644 "$tmp/a.cert"; "${U[@]}" key trust "$tmp/a.cert" --yes > /dev/null; fi
"${B[@]}" route add /bench "tcp4://127.0.0.1:$port" > /dev/null
bytes=$((mib << 20))
gbps() { awk -v b=$bytes -v s="$1" 'BEGIN{ printf "%.2f", b*8/s/1e9 }'; }
mibrss() { awk -v k="$1" 'BEGIN{ printf "%.0f MiB", k/1024 }'; }
# CPU seconds (user + system) a daemon has used so far.
cpu() { awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$1/stat"; }
# The page cache dropped (root only; COLD=0 keeps it).
cold=no
if [ "${COLD:-1}" != 0 ] && [ -w /proc/sys/vm/drop_caches ]; then cold=yes; fi
# The binary is read back at once: a user's first fetch finds `granary` cached, not
# the version it asks for.
drop() { if [ $cold = yes ]; then sync; echo 3 > /proc/sys/vm/drop_caches; cat "$G" > /dev/null; fi; }
echo "$mib MiB random file; default put took ${put_s} s ($(gbps "$put_s") Gbit/s, peak RSS $(mibrss "$put_rss")); $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg); page cache dropped before each case: $cold"
printf "%-4s %-46s %8s %8s %10s %8s\n" run case seconds "Gbit/s" "peak RSS" "vs cp"
for r in $(seq "$runs"); do
  out="$tmp/out"
  drop
  /usr/bin/time -f "%e %M" -o "$tmp/time" cp "$tmp/file" "$out"
  read -r cp_s cp_rss < "$tmp/time"
  rm -f "$out"
  printf "%-4s %-46s %8s %8s %10s %8s\n" "$r" "cp (same file, same disk)" "$cp_s" "$(gbps "$cp_s")" "$(mibrss "$cp_rss")" "1.00x"
  cases=(same app app-nodedup)
  [ ${#U[@]} -gt 0 ] && cases+=(user)
  # Whichever node-B case comes first after the node-A ones is the slower (cause not
  # isolated): with a fixed order, dedup on vs off measured +3..+22% with dedup first and
  # -6..+3% with it second. The order alternates run by run.
  if [ $((r % 2)) = 1 ]; then cases+=(two two-nodedup); else cases+=(two-nodedup two); fi
  for case in "${cases[@]}"; do
    dst="$out"
    case $case in
      same) cmd=("${A[@]}" get /bench/obj -o "$out"); label="publisher, same data dir: get (defaults)";;
      app) cmd=("${C[@]}" get /bench/obj -o "$out"); label="another app on node A: get (defaults)";;
      app-nodedup) cmd=("${C[@]}" get --no-dedup --no-publish /bench/obj -o "$out"); label="another app on node A: get --no-dedup";;
      user) cmd=("${U[@]}" get /bench/obj -o "$tmp/u/out"); dst="$tmp/u/out"; label="another user (nobody) on node A: get (defaults)";;
      two) cmd=("${B[@]}" get /bench/obj -o "$out"); label="node B <- TCP <- node A: get (defaults)";;
      two-nodedup) cmd=("${B[@]}" get --no-dedup --no-publish /bench/obj -o "$out"); label="node B <- TCP <- node A: get --no-dedup";;
    esac
    # B starts each run without the object: not in its repository (a default get
    # publishes it there) nor in its content store.
    "${B[@]}" rm /bench/obj > /dev/null 2>&1 || true
    "${B[@]}" cs erase /bench > /dev/null
    "${A[@]}" cs erase /bench > /dev/null
    drop
    a0=$(cpu "$pid_a"); b0=$(cpu "$pid_b")
    /usr/bin/time -f "%e %M %U %S" -o "$tmp/time" "${cmd[@]}" > /dev/null 2> "$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    a1=$(cpu "$pid_a"); b1=$(cpu "$pid_b")
    got=$(sha256sum "$dst" | cut -d' ' -f1)
    [ "$got" = "$want" ] || { echo "$case: wrong bytes" >&2; exit 1; }
    # A default get on B keeps a copy in B's repository in the background, read from the
    # output file: let that finish before the next case, so no measurement shares the
    # cores with it. (The --no-dedup baseline runs with --no-publish: the plain fetch
    # alone.)
    if [ "$case" = two ]; then
      for _ in $(seq 600); do "${B[@]}" ls /bench 2>/dev/null | grep -q /bench/obj && break; sleep 0.1; done
    fi
    rm -f "$dst"
    read -r s rss gu gs < "$tmp/time"
    eval "s_${case//-/_}=$s"
    printf "%-4s %-46s %8s %8s %10s %8s\n" "$r" "$label" "$s" "$(gbps "$s")" "$(mibrss "$rss")" "$(awk -v a="$s" -v c="$cp_s" 'BEGIN{ printf "%.2fx", c/a }')"
    # Where the CPU went during the fetch (the daemons' counters are read
    # when `get` exits, before B keeps its copy).
    awk -v g="$(awk -v u="$gu" -v s="$gs" 'BEGIN{print u+s}')" -v a="$(awk -v x="$a0" -v y="$a1" 'BEGIN{print y-x}')" \
        -v b="$(awk -v x="$b0" -v y="$b1" 'BEGIN{print y-x}')" -v w="$s" -v n="$(nproc)" \
        -v gib="$(awk -v b=$bytes 'BEGIN{ print b / 1073741824 }')" \
        'BEGIN{ printf "     CPU s: get %.2f, node A %.2f, node B %.2f; sum %.2f = %.0f%% of %d cores over %.2f s; per GiB: get %.2f, A %.2f, B %.2f, sum %.2f\n", g, a, b, g+a+b, (g+a+b)/(n*w)*100, n, w, g/gib, a/gib, b/gib, (g+a+b)/gib }'
  done
  awk -v d="$s_app" -v n="$s_app_nodedup" 'BEGIN{ printf "     dedup on vs --no-dedup (another app on A): %+.0f%% time\n", (d/n-1)*100 }'
  awk -v d="$s_two" -v n="$s_two_nodedup" 'BEGIN{ printf "     dedup on vs --no-dedup (node B): %+.0f%% time\n", (d/n-1)*100 }'
done
