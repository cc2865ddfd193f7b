"""Client side of bench/datasets.sh.

usage: datasets_bench.py make DIR YEARS          a CMIP6 dataset of YEARS monthly files
       datasets_bench.py open BASE_URL DATASET_ID MOUNT_DIR DATA_URLS_FILE

`make` writes tas_Amon_CanESM5_historical_r1i1p1f1_gn_<Y>01-<Y>12.nc for YEARS years
(netCDF-4, 64 x 128 grid, one chunk per time step, deflate + shuffle, shared time
units), in its DRS directory under DIR.

`open` opens the dataset three ways and prints one JSON line per way with the seconds
to open, to read one time step, to read every value (a mean), and the HTTP requests the
gateway counted (/metrics) for each; then one (other) time step and a 10 % spatial
subset of it (the first tenth of the latitude rows), seconds and requests:
  zarr  - xr.open_dataset("reference://") over GET /api/zarr/<id> (virtual Zarr)
  mount - xr.open_mfdataset over the FUSE mount (`granary mount`)
  fsspec- xr.open_mfdataset over /data URLs opened with fsspec (HTTP range reads, h5netcdf)
"""

import json
import os
import sys
import time
import urllib.request

import numpy as np


def make(root, years):
    import netCDF4

    rel = "CMIP6/CMIP/CCCma/CanESM5/historical/r1i1p1f1/Amon/tas/gn/v20190429"
    d = os.path.join(root, rel)
    os.makedirs(d, exist_ok=True)
    lat = np.linspace(-88.6, 88.6, 64)
    lon = np.arange(128) * 2.8125
    base = 250 + 30 * np.cos(np.deg2rad(lat))[:, None] + 0 * lon[None, :]
    for k in range(years):
        y = 1850 + k
        f = netCDF4.Dataset(
            os.path.join(d, f"tas_Amon_CanESM5_historical_r1i1p1f1_gn_{y}01-{y}12.nc"),
            "w",
            format="NETCDF4",
        )
        for a, v in {
            "mip_era": "CMIP6", "activity_id": "CMIP", "institution_id": "CCCma",
            "source_id": "CanESM5", "experiment_id": "historical", "sub_experiment_id": "none",
            "variant_label": "r1i1p1f1", "member_id": "r1i1p1f1", "table_id": "Amon",
            "variable_id": "tas", "grid_label": "gn", "frequency": "mon", "realm": "atmos",
            "tracking_id": f"hdl:21.14100/bench-{y}",
        }.items():
            f.setncattr(a, v)
        f.createDimension("time", None)
        f.createDimension("bnds", 2)
        f.createDimension("lat", 64)
        f.createDimension("lon", 128)
        # One time step per chunk, as CMOR writes the time axis (netCDF4's default
        # of 512 for an unlimited axis cannot be concatenated file after file).
        t = f.createVariable("time", "f8", ("time",), chunksizes=(1,))
        t.units = "days since 1850-01-01"
        t.calendar = "365_day"
        t.bounds = "time_bnds"
        tb = f.createVariable("time_bnds", "f8", ("time", "bnds"), chunksizes=(1, 2))
        la = f.createVariable("lat", "f8", ("lat",))
        la.units = "degrees_north"
        lo = f.createVariable("lon", "f8", ("lon",))
        lo.units = "degrees_east"
        v = f.createVariable("tas", "f4", ("time", "lat", "lon"), zlib=True, shuffle=True,
                             complevel=4, chunksizes=(1, 64, 128))
        v.units = "K"
        v.long_name = "Near-Surface Air Temperature"
        ml = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
        start = 365 * k + np.concatenate([[0], np.cumsum(ml)[:-1]])
        tb[:, 0] = start
        tb[:, 1] = start + ml
        t[:] = start + ml / 2
        la[:] = lat
        lo[:] = lon
        rng = np.random.default_rng(y)
        v[:] = (base[None] + rng.normal(0, 2, (12, 64, 128))).astype("f4")
        f.close()


def totals(base):
    """(requests, response body bytes) the gateway counted, /metrics itself left out."""
    text = urllib.request.urlopen(base + "/metrics").read().decode()
    n = b = 0
    for line in text.splitlines():
        if 'route="/metrics"' in line:
            continue
        if line.startswith("granary_gateway_requests_total{"):
            n += int(float(line.rsplit(" ", 1)[1]))
        elif line.startswith("granary_gateway_response_bytes_total{"):
            b += int(float(line.rsplit(" ", 1)[1]))
    return n, b


def requests_total(base):
    return totals(base)[0]


def measure(way, base, opener):
    import xarray as xr  # noqa: F401

    r0 = requests_total(base)
    t0 = time.perf_counter()
    ds = opener()
    t1 = time.perf_counter()
    r1 = requests_total(base)
    step = 600 if ds.sizes["time"] > 600 else 0
    one = float(ds["tas"].isel(time=step).mean())
    t1s = time.perf_counter()
    r1s, b1s = totals(base)
    # One time step and a 10 % spatial subset (the first tenth of the latitude rows).
    rows = max(1, ds.sizes["lat"] // 10)
    other = min(step + 1, ds.sizes["time"] - 1)
    sub = float(ds["tas"].isel(time=other, lat=slice(0, rows)).mean())
    t2 = time.perf_counter()
    r2, b2 = totals(base)
    mean = float(ds["tas"].mean())
    t3 = time.perf_counter()
    r3 = requests_total(base)
    print(json.dumps({
        "way": way, "files_or_steps": int(ds.sizes["time"]),
        "open_s": round(t1 - t0, 3), "one_step_s": round(t1s - t1, 3),
        "subset_s": round(t2 - t1s, 3), "all_s": round(t3 - t2, 3),
        "open_requests": r1 - r0, "one_step_requests": r1s - r1, "subset_requests": r2 - r1s,
        "all_requests": r3 - r2, "subset_bytes": b2 - b1s, "one_step_mean": one, "subset_mean": sub, "mean": mean,
    }), flush=True)
    ds.close()
    return mean


def open_all(base, ds_id, mount, urls_file):
    import glob

    import fsspec
    import xarray as xr

    url = f"{base}/api/zarr/{ds_id}"
    opts = {"fo": url, "remote_protocol": "http", "remote_options": {"asynchronous": True}}
    kw = dict(combine="by_coords", data_vars="minimal", coords="minimal", compat="override")
    means = []
    means.append(measure("zarr", base, lambda: xr.open_dataset(
        "reference://", engine="zarr",
        backend_kwargs={"consolidated": False, "storage_options": opts}, chunks={})))
    files = sorted(glob.glob(os.path.join(mount, "*.nc")))
    means.append(measure("mount", base, lambda: xr.open_mfdataset(files, **kw)))
    urls = [u.strip() for u in open(urls_file) if u.strip()]

    def over_http():
        fs = fsspec.filesystem("http")
        handles = [fs.open(u, block_size=1 << 20) for u in urls]
        return xr.open_mfdataset(handles, engine="h5netcdf", **kw)

    means.append(measure("fsspec", base, over_http))
    # OPeNDAP: the File documents' OPENDAP links (without the `.html` intake-esgf
    # probes), opened by libnetcdf's DAP2 client.
    dap = [u.strip() for u in open(urls_file + ".opendap") if u.strip()]
    means.append(measure("opendap", base, lambda: xr.open_mfdataset(dap, engine="netcdf4", **kw)))
    assert max(means) - min(means) < 1e-3, means


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "open":
        open_all(*sys.argv[2:6])
    else:
        raise SystemExit(__doc__)
