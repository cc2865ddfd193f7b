#!/usr/bin/env bash
# NDNLPv2 link reliability on the emulated WAN of bench/netns-goodput.sh
# (consumer — router — producer, 100 Mbit/s, 20 ms RTT): the same fetches with
# plain UDP faces (`--udp-reliability false`) and with link reliability (the default) on all three
# nodes, with 0.5% loss per datagram each way and without random loss, in one
# run. Prints goodput (Mbit/s) per segment size and pipeline for the four
# scenarios and writes bench/netns-reliability-<scenario>.csv. Needs root.
#
#   bash bench/netns-reliability.sh [FILE_MIB]     (default 32)
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-32}
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 1; }
cargo build --release -q -p granary -p granary-bench
B=target/release/granary-bench-netns-goodput
G=target/release/granary
for sc in lossy-plain lossy-reliable clean-reliable clean-plain; do
  loss=0; [ "${sc%%-*}" = lossy ] && loss=0.5%
  flags="--udp-reliability false"; [ "${sc##*-}" = reliable ] && flags=--udp-reliability
  echo "== $sc: loss $loss, daemon flags '${flags}', ${MIB} MiB"
  $B --granary $G --loss $loss --file-mib "$MIB" --small-mib 1 \
     --pipelines fixed:64,aimd,cubic --daemon-args="$flags" \
     --csv bench/netns-reliability-$sc.csv >/dev/null
done
python3 - <<'PY'
import csv
for sc in ("lossy-plain", "lossy-reliable", "clean-plain", "clean-reliable"):
    rows = list(csv.DictReader(open(f"bench/netns-reliability-{sc}.csv")))
    sizes = sorted({int(r["segment_size"]) for r in rows})
    print(f"\n{sc}: goodput Mbit/s (timeouts)")
    print("| pipeline | " + " | ".join(f"{s // 1024} KiB" for s in sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    for k in ("fixed", "aimd", "cubic"):
        cells = []
        for s in sizes:
            m = [r for r in rows if int(r["segment_size"]) == s and r["pipeline"] == k]
            cells.append(f'{float(m[0]["goodput_mbps"]):.1f} ({m[0]["timeouts"]})' if m else "–")
        print(f"| {'fixed 64' if k == 'fixed' else k.upper()} | " + " | ".join(cells) + " |")
PY
