#!/usr/bin/env bash
# Goodput of `granary get` over an emulated WAN, against pipeline type/size
# and segment size: the shape of seed 004's Fig. 4/5. Needs root (network
# namespaces). Two scenarios on a consumer — router — producer testbed whose
# consumer—router link is 100 Mbit/s with a 20 ms RTT:
#   clean : no random loss (only the bottleneck queue drops)
#   lossy : 0.5% loss per datagram each way (issue 5's link)
# Each scenario runs twice, side by side:
#   plain    : daemons with `--udp-reliability false` (the defaults before
#              link reliability was turned on), every pipeline, and NDNts's
#              fetch (@ndn/segmented-object, its default congestion control)
#              at 1-8 KiB -> bench/netns-goodput-<scenario>.csv
#   defaults : daemons with their defaults, `granary get` with no flags
#              (`default`) and CUBIC, per segment size and for `put`'s
#              default chunking (size 0 in the CSV), DEFAULT_MIB files
#              -> bench/netns-goodput-<scenario>-defaults.csv
# Plot: bench/netns-goodput.png (dashed: plain, solid: defaults).
#
#   bash bench/netns-goodput.sh [BIG_MIB] [SMALL_MIB] [DEFAULT_MIB]
# BIG_MIB (default 32) is fetched by adaptive pipelines and windows >= 16,
# SMALL_MIB (default 1) by windows < 16 (one segment per RTT is slow),
# DEFAULT_MIB (default 128) by the defaults rows (timed as the whole `get`
# process, so start-up is amortised as in a real transfer).
set -euo pipefail
cd "$(dirname "$0")/.."
BIG=${1:-32}
SMALL=${2:-1}
DEF=${3:-128}
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
cargo build --release -q -p granary -p granary-bench
B=target/release/granary-bench-netns-goodput
G=target/release/granary
NDNTS=tests/interop/ndnts
[ -d $NDNTS/node_modules/@ndn/segmented-object ] || bash scripts/setup-test-deps.sh
for scenario in clean lossy; do
  loss=0; [ $scenario = lossy ] && loss=0.5%
  echo "== $scenario: 100 Mbit/s, 20 ms RTT, loss $loss, files ${BIG}/${SMALL} MiB"
  $B --granary $G --loss $loss --file-mib "$BIG" --small-mib "$SMALL" \
     --daemon-args="--udp-reliability false" \
     --ndnts $NDNTS --csv bench/netns-goodput-$scenario.csv
  echo "== $scenario, defaults: ${DEF} MiB per fetch"
  $B --granary $G --loss $loss --file-mib "$DEF" --sizes 0,1024,2048,4096,8192,16384,32768 \
     --pipelines default,cubic --csv bench/netns-goodput-$scenario-defaults.csv
done

python3 - <<'PY'
import csv
for sc in ("clean", "lossy"):
    rows = list(csv.DictReader(open(f"bench/netns-goodput-{sc}.csv")))
    sizes = sorted({int(r["segment_size"]) for r in rows})
    keys = []
    for r in rows:
        k = r["pipeline"] + (":" + r["window"] if r["pipeline"] == "fixed" else "")
        if k not in keys:
            keys.append(k)
    print(f"\n{sc}: goodput Mbit/s (share of the 100 Mbit/s link)")
    print("| pipeline | " + " | ".join(f"{s // 1024} KiB" for s in sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    for k in keys:
        cells = []
        for s in sizes:
            m = [r for r in rows if int(r["segment_size"]) == s and
                 (r["pipeline"] + (":" + r["window"] if r["pipeline"] == "fixed" else "")) == k]
            cells.append(f'{float(m[0]["goodput_mbps"]):.1f}' if m else "–")
        print(f"| {k} | " + " | ".join(cells) + " |")
    g = {int(r["segment_size"]): float(r["goodput_mbps"]) for r in rows if r["pipeline"] == "cubic"}
    n = {int(r["segment_size"]): float(r["goodput_mbps"]) for r in rows if r["tool"] == "ndnts"}
    for s in sorted(n):
        if s in g and n[s] > 0:
            print(f"granary CUBIC / NDNts at {s // 1024} KiB: {g[s] / n[s]:.2f}")
    rss = [int(r["get_peak_rss_kib"]) for r in rows if r["tool"] == "granary"]
    nrss = [int(r["get_peak_rss_kib"]) for r in rows if r["tool"] == "ndnts"]
    print(f"peak RSS: granary get max {max(rss) // 1024} MiB" +
          (f", NDNts fetch max {max(nrss) // 1024} MiB" if nrss else ""))
    d = list(csv.DictReader(open(f"bench/netns-goodput-{sc}-defaults.csv")))
    dsizes = sorted({int(r["segment_size"]) for r in d})
    label = lambda s: "put default (FastCDC)" if s == 0 else f"{s // 1024} KiB"
    print(f"\n{sc}, defaults (link reliability on): goodput Mbit/s (timeouts)")
    print("| get | " + " | ".join(label(s) for s in dsizes) + " |")
    print("|---" * (len(dsizes) + 1) + "|")
    for k, title in (("default", "no flags"), ("cubic", "--pipeline-type cubic --no-dedup")):
        cells = []
        for s in dsizes:
            m = [r for r in d if int(r["segment_size"]) == s and r["pipeline"] == k]
            cells.append(f'{float(m[0]["goodput_mbps"]):.1f} ({m[0]["timeouts"]})' if m else "–")
        print(f"| {title} | " + " | ".join(cells) + " |")
PY

gnuplot <<'GP'
set terminal pngcairo size 1300,520 font ",10"
set output "bench/netns-goodput.png"
set datafile separator ","
set multiplot layout 1,2 title "granary get over an emulated WAN: 100 Mbit/s, 20 ms RTT (netns; consumer - router - producer)"
set logscale x 2
set xlabel "segment (Data payload) size, bytes"
set ylabel "goodput, Mbit/s"
set yrange [0:105]
set key top left
set grid
do for [sc in "clean lossy"] {
  f = "bench/netns-goodput-".sc.".csv"
  set title (sc eq "clean" ? "no random loss" : "0.5% loss per datagram, each way")
  d = "bench/netns-goodput-".sc."-defaults.csv"
  plot \
    "< awk -F, '$1==\"granary\" && $3==\"fixed\" && $4==1' ".f  using 2:6 with linespoints dashtype 2 title "plain: fixed 1", \
    "< awk -F, '$1==\"granary\" && $3==\"fixed\" && $4==4' ".f  using 2:6 with linespoints dashtype 2 title "plain: fixed 4", \
    "< awk -F, '$1==\"granary\" && $3==\"fixed\" && $4==16' ".f using 2:6 with linespoints dashtype 2 title "plain: fixed 16", \
    "< awk -F, '$1==\"granary\" && $3==\"fixed\" && $4==64' ".f using 2:6 with linespoints dashtype 2 title "plain: fixed 64", \
    "< awk -F, '$1==\"granary\" && $3==\"aimd\"' ".f  using 2:6 with linespoints dashtype 2 title "plain: AIMD", \
    "< awk -F, '$1==\"granary\" && $3==\"cubic\"' ".f using 2:6 with linespoints dashtype 2 title "plain: CUBIC", \
    "< awk -F, '$1==\"ndnts\"' ".f using 2:6 with linespoints dashtype 3 title "NDNts fetch", \
    "< awk -F, '$1==\"granary\" && $2>0 && $3==\"cubic\"' ".d using 2:6 with linespoints lw 2 title "defaults: CUBIC", \
    "< awk -F, '$1==\"granary\" && $2>0 && $3==\"default\"' ".d using 2:6 with linespoints lw 3 title "defaults: get, no flags"
}
unset multiplot
GP
echo "plot: bench/netns-goodput.png"
