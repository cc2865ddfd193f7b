#!/usr/bin/env bash
# Packet-layer and signature benchmarks, side by side with `openssl speed` on
# the same machine in the same run. Usage: bash bench/packet.sh [SECONDS]
# Prints a table; the ratio column is Granary / OpenSSL.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-2}
cargo build --release -q -p granary-bench
bin=target/release/granary-bench-packet
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(openssl version | cut -d' ' -f1-2)"
taskset -c 0 "$bin" "$secs" > "$out/granary.tsv"
taskset -c 0 openssl speed -seconds "$secs" ecdsap256 ed25519 rsa2048 > "$out/openssl.txt" 2>/dev/null
taskset -c 0 openssl speed -seconds "$secs" -bytes 8192 -evp sha256 > "$out/sha.txt" 2>/dev/null
taskset -c 0 openssl speed -seconds "$secs" -bytes 8192 -hmac sha256 > "$out/hmac.txt" 2>/dev/null || true
python3 - "$out" <<'PY'
import re, sys, os
d = sys.argv[1]
g = {}
for line in open(os.path.join(d, "granary.tsv")):
    k, v, note = line.rstrip("\n").split("\t")
    g[k] = (float(v), note)
o = {}
txt = open(os.path.join(d, "openssl.txt")).read()
m = re.search(r"rsa\s+2048 bits\s+\S+\s+\S+\s+([\d.]+)\s+([\d.]+)", txt)
if m: o["rsa"] = (float(m.group(1)), float(m.group(2)))
m = re.search(r"ecdsa \(nistp256\)\s+\S+\s+\S+\s+([\d.]+)\s+([\d.]+)", txt)
if m: o["ecdsa"] = (float(m.group(1)), float(m.group(2)))
m = re.search(r"EdDSA \(Ed25519\)\s+\S+\s+\S+\s+([\d.]+)\s+([\d.]+)", txt)
if m: o["ed25519"] = (float(m.group(1)), float(m.group(2)))
def bps(fn):
    t = open(os.path.join(d, fn)).read()
    m = re.search(r"^(?:sha256|hmac\(sha256\))\s+.*?([\d.]+)k\s*$", t, re.M)
    return float(m.group(1)) * 1000 / 8192 if m else None  # openssl prints 1000s of bytes/s
print(f"{'figure':<24}{'granary ops/s':>15}{'openssl ops/s':>15}{'ratio':>8}  note")
def row(k, ref=None):
    v, note = g[k]
    if ref:
        print(f"{k:<24}{v:>15,.0f}{ref:>15,.0f}{v/ref:>8.2f}  {note}")
    else:
        print(f"{k:<24}{v:>15,.0f}{'':>15}{'':>8}  {note}")
for k in ["data8k.decode", "data8k.encode", "data8k.encode+digest", "interest.decode", "interest.encode", "name.parse_uri", "cs.insert+find"]:
    row(k)
for alg in ["ecdsa", "ed25519", "rsa"]:
    ref = o.get(alg, (None, None))
    row(f"sign.{alg}", ref[0]); row(f"verify.{alg}", ref[1]); row(f"data8k.sign.{alg}")
row("hmac.8k", bps("hmac.txt")); row("sha256.8k", bps("sha.txt"))
PY
