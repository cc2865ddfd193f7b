"""esgf-pyclient (pyesgf, unmodified from PyPI) against a Granary gateway.

Usage: esgf_client.py BASE_URL OUT_DIR [facet=value ...]

Searches datasets with the given constraints (distrib=False), prints the hit
count and facet counts, lists each dataset's files through pyesgf's file
context, downloads each file's HTTPServer URL into OUT_DIR/<n> (checking the
SHA-256 pyesgf reports) and prints one JSON document on standard output.
"""

import hashlib
import json
import os
import sys
import urllib.request
import warnings

from pyesgf.search import SearchConnection

warnings.simplefilter("ignore")


def main():
    base, out = sys.argv[1], sys.argv[2]
    constraints = dict(a.split("=", 1) for a in sys.argv[3:])
    conn = SearchConnection(base + "/esg-search", distrib=False, cache=None)
    ctx = conn.new_context(facets="*", **constraints)
    report = {"hit_count": ctx.hit_count, "facet_counts": ctx.facet_counts, "datasets": []}
    os.makedirs(out, exist_ok=True)
    n = 0
    for ds in ctx.search():
        d = {"dataset_id": ds.dataset_id, "number_of_files": ds.number_of_files, "files": []}
        for f in ds.file_context().search():
            url = f.download_url
            path = os.path.join(out, str(n))
            n += 1
            with urllib.request.urlopen(url) as r, open(path, "wb") as w:
                body = r.read()
                w.write(body)
            digest = hashlib.sha256(body).hexdigest()
            d["files"].append({
                "filename": f.filename,
                "size": f.size,
                "checksum": f.checksum,
                "checksum_type": f.checksum_type,
                "url": url,
                "path": path,
                "sha256_ok": f.checksum is None or f.checksum == digest,
            })
        report["datasets"].append(d)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
