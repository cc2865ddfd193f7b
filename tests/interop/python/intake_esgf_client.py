"""intake-esgf (PyPI) against a Granary gateway, end to end.

Usage: intake_esgf_client.py BASE TREE BACKEND [--stream] [facet=value ...]

BASE is the gateway (`https://127.0.0.1:PORT`; `http://…` only while developing:
intake-esgf builds `https://` URLs itself, so over plain HTTP the index's URL is
rewritten after construction). TREE is the directory holding the original files
in their DRS layout. BACKEND is `solr` (the `/esg-search` index) or `stac` (the
`/stac` API through intake-esgf's STAC back end).

Globus is switched off and only the gateway's index is on; HOME should point at a
scratch directory (intake-esgf writes ~/.esgf and ~/.config/intake-esgf). For
HTTPS, REQUESTS_CA_BUNDLE names the gateway's certificate.

Searches with the facets, loads every dataset with `to_dataset_dict()` (with
`--stream`, `prefer_streaming=True`: the File documents' OPENDAP links, opened by
xarray through libnetcdf's DAP2 client, nothing downloaded; for HTTPS, ~/.ncrc names
the certificate with `HTTP.SSL.CAINFO`), opens the original files of each dataset
with xarray and compares. Prints one JSON object:
{"datasets": {dataset id: {"files": n, "equal": bool, "variables": [...]}},
 "ids": [...], "downloaded": [local paths]}.
"""

import json
import sys
import warnings
from pathlib import Path

import intake_esgf
import numpy as np
import xarray as xr
from intake_esgf import ESGFCatalog


def same(a, b) -> bool:
    """Attribute values equal (arrays element by element)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    return a == b


def attrs_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)


def main() -> None:
    warnings.simplefilter("ignore", FutureWarning)
    base, tree, backend = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    stream = "--stream" in sys.argv[4:]
    search = {}
    for a in sys.argv[4:]:
        if a == "--stream":
            continue
        k, v = a.split("=", 1)
        search.setdefault(k, []).append(v)
    search = {k: v[0] if len(v) == 1 else v for k, v in search.items()}
    scheme, host = base.rstrip("/").split("://", 1)

    intake_esgf.conf.set(no_indices=True)
    intake_esgf.conf["requests_cache"]["expire_after"] = "DO_NOT_CACHE"
    if backend == "solr":
        intake_esgf.conf["solr_indices"][host] = True
    elif backend == "stac":
        intake_esgf.conf["stac_indices"][f"{host}/stac"] = True
    else:
        raise SystemExit(f"backend {backend!r}: expected solr or stac")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cat = ESGFCatalog()
    if scheme == "http":
        for ind in cat.indices:
            if hasattr(ind, "url") and ind.url.startswith("https://"):
                ind.url = "http://" + ind.url[len("https://") :]
        if backend == "stac":
            import intake_esgf.core.stac as stac

            orig_search = stac.search_cmip6

            def search_cmip6(session, base_url, *a, **k):
                return orig_search(session, base_url.replace("https://", "http://", 1), *a, **k)

            stac.search_cmip6 = search_cmip6
    cat.search(quiet=True, **search)
    ids = sorted(i for row in cat.df["id"] for i in row)
    # Where each dataset is read from (links when streaming, else local files).
    paths = cat.to_path_dict(prefer_streaming=stream, minimal_keys=False, quiet=True)
    dsd = cat.to_dataset_dict(
        quiet=True, add_measures=False, minimal_keys=False, prefer_streaming=stream
    )

    out = {"ids": ids, "datasets": {}, "downloaded": []}
    for p in sorted((Path.home() / ".esgf").rglob("*.nc")):
        out["downloaded"].append(str(p))
    for key, ds in dsd.items():
        row = cat.df[cat.df["key"] == key].iloc[0]
        (dataset_id,) = [i for i in row["id"]]
        inst = dataset_id.split("|")[0]
        comps = inst.split(".")
        originals = sorted((tree.joinpath(*comps)).glob("*.nc"))
        if not originals:
            raise SystemExit(f"{inst}: no original files under {tree}")
        if len(originals) == 1:
            orig = xr.open_dataset(originals[0])
        else:
            orig = xr.open_mfdataset(originals)
        variables = sorted(orig.data_vars)
        # Values, coordinates and variable attributes; the global attributes
        # differ only by the facets intake-esgf adds.
        equal = bool(ds.drop_attrs().equals(orig.drop_attrs())) and all(
            attrs_equal(ds[v].attrs, orig[v].attrs) for v in variables
        )
        equal = equal and all(same(ds.attrs.get(k), v) for k, v in orig.attrs.items())
        out["datasets"][inst] = {
            "sources": [str(p) for p in paths.get(key, [])],
            "files": len(originals),
            "equal": equal,
            "variables": variables,
            "shape": list(ds[comps[7]].shape) if comps[7] in ds else None,
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
