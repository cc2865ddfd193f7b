"""Virtual Zarr of a published dataset, read with xarray through fsspec's reference
filesystem (no kerchunk): every value equal to `xr.open_mfdataset` of the original
files, and selecting one time step reads only the chunks holding it (counted on the
gateway's /metrics).

A dataset the gateway refuses (422) must say why, the same text in the body's `error`
and in the `X-Granary-Refused` header (percent-encoded).

usage: zarr_virtual.py compress SRC_DIR DST_DIR [STEPS [FIRST_ONLY]]
       zarr_virtual.py BASE_URL DATASET_ID ORIGINAL_DIR [DATASET_ID ORIGINAL_DIR ...]
       zarr_virtual.py all BASE_URL ROOT   (every dataset directory under ROOT; prints
                                            {"opened": [...], "refused": {id: reason}})
"""

import glob
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

import numpy as np
import xarray as xr


def data_requests(base):
    text = urllib.request.urlopen(base + "/metrics").read().decode()
    n = 0
    for line in text.splitlines():
        if line.startswith("granary_gateway_requests_total{") and 'route="/data/{*name}"' in line:
            n += int(float(line.rsplit(" ", 1)[1]))
    return n


def check(base, ds_id, original):
    url = f"{base}/api/zarr/{ds_id}"
    try:
        refs = json.load(urllib.request.urlopen(url))
    except urllib.error.HTTPError as e:
        raise SystemExit(f"{url}: {e.code} {e.read().decode()}")
    assert refs["version"] == 1, refs.keys()
    for k, v in refs["refs"].items():
        if isinstance(v, list):
            assert v[0].startswith(base + "/data/"), v
    # zarr 3 reads through an async store: the HTTP filesystem must be async too.
    opts = {"fo": url, "remote_protocol": "http", "remote_options": {"asynchronous": True}}
    v = xr.open_dataset(
        "reference://",
        engine="zarr",
        backend_kwargs={"consolidated": False, "storage_options": opts},
        chunks=None,
    )
    files = sorted(glob.glob(f"{original}/*.nc"))
    assert files, original
    o = xr.open_mfdataset(files, combine="by_coords", data_vars="minimal", coords="minimal",
                          compat="override")
    name = ds_id.split(".")[7]
    assert set(o.data_vars) <= set(v.data_vars) | set(v.coords), (set(o.data_vars), set(v.variables))
    for var in o.variables:
        a, b = v[var].values, o[var].values
        assert a.shape == b.shape, (var, a.shape, b.shape)
        if a.dtype.kind in "fc":
            assert np.array_equal(a, b, equal_nan=True), var
        else:
            bad = np.argwhere(a != b)
            if len(bad):
                print({k: r for k, r in refs["refs"].items() if k.startswith(var + "/")}, file=sys.stderr)
            assert not len(bad), (var, a.dtype, b.dtype, bad[:3].tolist(), a[tuple(bad[0])], b[tuple(bad[0])])
    # One time step: only the chunks of `name` holding it.
    za = json.loads(refs["refs"][f"{name}/.zarray"])
    step = za["shape"][0] // 2
    t0 = step // za["chunks"][0]
    want = [k for k in refs["refs"] if re.fullmatch(rf"{name}/{t0}(\.\d+)*", k)]
    total = [k for k in refs["refs"] if re.fullmatch(rf"{name}/\d+(\.\d+)*", k)]
    v2 = xr.open_dataset(
        "reference://",
        engine="zarr",
        backend_kwargs={"consolidated": False, "storage_options": opts},
        chunks=None,
    )
    before = data_requests(base)
    got = v2[name].isel(time=step).values
    after = data_requests(base)
    assert np.array_equal(got, o[name].isel(time=step).values, equal_nan=True)
    assert after - before == len(want), (after - before, len(want), len(total))
    assert len(want) < len(total) or len(total) == 1, (len(want), len(total))
    print(json.dumps({"dataset": ds_id, "files": len(files), "shape": za["shape"],
                      "chunks_total": len(total), "data_requests_one_step": after - before}))


def refused(base, ds_id):
    """The reason of a 422 for DATASET_ID (None when the reference set is served),
    checked to be the same in the body and in X-Granary-Refused."""
    url = f"{base}/api/zarr/{ds_id}"
    try:
        urllib.request.urlopen(url).read()
        return None
    except urllib.error.HTTPError as e:
        body = json.loads(e.read().decode())
        assert e.code == 422, (url, e.code, body)
        header = urllib.parse.unquote(e.headers["X-Granary-Refused"], errors="strict")
        assert header == body["error"], (header, body)
        assert body["error"].startswith("not available: "), body
        return body["error"]


def survey(base, root):
    import os

    opened, refusals = [], {}
    dirs = sorted({os.path.dirname(f) for f in glob.glob(f"{root}/**/*.nc", recursive=True)})
    for d in dirs:
        ds_id = os.path.relpath(d, root).replace(os.sep, ".")
        why = refused(base, ds_id)
        if why is not None:
            refusals[ds_id] = why
            continue
        check(base, ds_id, d)
        opened.append(ds_id)
    print(json.dumps({"opened": opened, "refused": refusals}))


def compress(src, dst, steps=12, first_only=False):
    """Rewrites the dataset at SRC into DST chunked (STEPS time steps), deflated and
    shuffled, as netCDF-4 files written by libnetcdf (FIRST_ONLY: the first file so,
    the others copied as they are)."""
    import os
    import shutil

    os.makedirs(dst, exist_ok=True)
    for i, f in enumerate(sorted(glob.glob(f"{src}/*.nc"))):
        if first_only and i > 0:
            shutil.copy(f, dst)
            continue
        with xr.open_dataset(f, decode_times=False) as d:
            name = [v for v in d.data_vars if d[v].ndim == 4][0]
            chunks = (steps,) + d[name].shape[1:]
            enc = {name: {"zlib": True, "complevel": 4, "shuffle": True, "chunksizes": chunks}}
            d.to_netcdf(os.path.join(dst, os.path.basename(f)), encoding=enc, format="NETCDF4")


def main():
    if sys.argv[1] == "compress":
        steps = int(sys.argv[4]) if len(sys.argv) > 4 else 12
        compress(sys.argv[2], sys.argv[3], steps, len(sys.argv) > 5 and sys.argv[5] == "1")
        return
    if sys.argv[1] == "all":
        survey(sys.argv[2].rstrip("/"), sys.argv[3])
        return
    base = sys.argv[1].rstrip("/")
    args = sys.argv[2:]
    assert args and len(args) % 2 == 0, "pairs of DATASET_ID ORIGINAL_DIR"
    for i in range(0, len(args), 2):
        check(base, args[i], args[i + 1])


if __name__ == "__main__":
    main()
