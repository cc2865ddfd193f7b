#!/usr/bin/env python3
"""Builds fuzz/corpus/<target>/ from the interop generators' output (python-ndn
and NDNts packets), so every fuzzer starts from real, valid packets.

Usage: python3 fuzz/make-seed-corpus.py GEN1.jsonl [GEN2.jsonl ...]
(make the .jsonl files with tests/interop/{python/gen_packets.py,ndnts/gen_packets.mjs})."""
import hashlib
import json
import os
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target: str, blob: bytes) -> None:
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(blob).hexdigest()), "wb") as f:
        f.write(blob)


for path in sys.argv[1:]:
    for line in open(path, encoding="utf-8"):
        r = json.loads(line)
        wire = bytes.fromhex(r["hex"])
        if len(wire) > 16384:
            continue
        put("tlv", wire)
        kind = r["kind"]
        put({"name": "name", "interest": "interest", "data": "data", "lp": "lp"}[kind], wire)
        if kind == "data" and r["fields"].get("content_type") == 2:
            put("cert", wire)
        if "uri" in r:
            put("uri", r["uri"].encode())
        if "alt_uri" in r:
            put("uri", r["alt_uri"].encode())
