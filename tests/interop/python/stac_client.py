"""pystac-client (PyPI) against a Granary gateway's STAC API.

Usage: stac_client.py STAC_URL SOURCE_ID [SOURCE_ID ...]

Opens the API (landing page, conformance), lists every item of collection
`cmip6` two at a time (POST search, following `next` links) and again by GET,
searches with a CQL2-JSON filter on `properties.cmip6:source_id` (as
intake-esgf's STAC back end sends it) for the given source ids, with a
`datetime` range, reads one item by id, and downloads every asset of the first
item, checking `file:size` and `file:checksum` (a SHA-256 multihash). Prints one
JSON object with what it found.
"""

import hashlib
import json
import sys

import requests
from pystac_client import Client


def main() -> None:
    url, sources = sys.argv[1], sys.argv[2:]
    client = Client.open(url)
    out = {
        "conforms": {
            c: client.conforms_to(c)
            for c in ["CORE", "ITEM_SEARCH", "FILTER", "COLLECTIONS"]
        },
        "collections": sorted(c.id for c in client.get_collections()),
    }

    # Every item, two per page, by POST and by GET.
    s = client.search(collections="cmip6", limit=2, method="POST")
    pages = list(s.pages())
    out["post_pages"] = [len(p.items) for p in pages]
    out["post_ids"] = [i.id for p in pages for i in p.items]
    out["matched"] = s.matched()
    g = client.search(collections=["cmip6"], limit=2, method="GET")
    out["get_ids"] = [i.id for i in g.items()]

    # Facets as intake-esgf sends them.
    flt = {
        "op": "and",
        "args": [
            {"op": "in", "args": [{"property": "properties.cmip6:source_id"}, sources]},
            {"op": "in", "args": [{"property": "properties.cmip6:retracted"}, [False]]},
        ],
    }
    out["filter_ids"] = sorted(
        i.id for i in client.search(collections="cmip6", limit=100, filter=flt).items()
    )
    # `or`, `=` and `between` on time.
    either = {
        "op": "or",
        "args": [
            {"op": "=", "args": [{"property": "cmip6:source_id"}, s]} for s in sources
        ],
    }
    out["or_ids"] = sorted(i.id for i in client.search(filter=either).items())
    late = {
        "op": "between",
        "args": [
            {"property": "datetime"},
            {"timestamp": "2005-01-01T00:00:00Z"},
            {"timestamp": "2006-01-01T00:00:00Z"},
        ],
    }
    out["between_ids"] = sorted(i.id for i in client.search(filter=late).items())
    out["datetime_ids"] = sorted(
        i.id for i in client.search(datetime="1800-01-01T00:00:00Z/1900-01-01T00:00:00Z").items()
    )
    out["ids_ids"] = [i.id for i in client.search(ids=out["post_ids"][:1]).items()]

    # One item by id, its assets downloaded and checked.
    first = out["post_ids"][0]
    item = client.get_collection("cmip6").get_item(first)
    checked = []
    for name, a in item.assets.items():
        body = requests.get(a.href, timeout=60).content
        want = a.extra_fields["file:checksum"]
        checked.append(
            {
                "name": name,
                "href": a.href,
                "size_ok": len(body) == a.extra_fields["file:size"],
                "checksum_ok": want == "1220" + hashlib.sha256(body).hexdigest(),
            }
        )
    out["item"] = {"id": item.id, "properties": item.properties, "assets": checked}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
