"""Quick-look previews (crates/cli/tests/it/preview.rs).

make DIR SAMPLE...: writes into DIR
  - ncgen files in every netCDF format (classic, 64-bit offset, CDF-5, netCDF-4,
    netCDF-4 classic) with a packed (scale_factor/add_offset) short field holding
    _FillValue and missing_value, over time and level (the netCDF-4 ones deflated
    and shuffled);
  - each SAMPLE (a real CMIP6 file) rewritten deflated and shuffled, chunked per
    time step, as z_<name>;
  - hostile files: truncated, a data offset past the end, an unknown HDF5 filter
    (32015, zstd, written raw with h5py), a dimension claiming 10 GB.
check BASE NAME FILE VAR [TIME [LEVEL]]: fetches the decoded field as JSON from
  BASE/api/preview/NAME?variable=VAR&time=&level=&format=json and compares every value
  (masked as null, floats within 1e-6 relative), the lat and lon with netCDF4-python's
  reading of FILE; then fetches the PNG and checks it with Pillow. Prints one JSON
  line.
"""

import json
import math
import os
import subprocess
import sys
import urllib.parse
import urllib.request

import numpy as np
import netCDF4

CDL = """netcdf packed {
dimensions:
  time = UNLIMITED ;
  lev = 2 ;
  lat = 5 ;
  lon = 8 ;
  y = 2 ;
  x = 3 ;
variables:
  double time(time) ;
    time:units = "days since 2000-01-01" ;
    time:calendar = "noleap" ;
  double lev(lev) ;
    lev:units = "Pa" ;
  float lat(lat) ;
    lat:units = "degrees_north" ;
    lat:standard_name = "latitude" ;
  float lon(lon) ;
    lon:units = "degrees_east" ;
  short t(time, lev, lat, lon) ;
    t:long_name = "Packed temperature with fill and missing values" ;
    t:units = "K" ;
    t:scale_factor = 0.01 ;
    t:add_offset = 250. ;
    t:_FillValue = -32767s ;
    t:missing_value = -32000s ;
    %(special)s
  double d(lat, lon) ;
    d:long_name = "Plain double field" ;
    d:units = "1" ;
    d:_FillValue = 1.e20 ;
  float curv(y, x) ;
    curv:long_name = "On a grid without 1-D lat/lon" ;
data:
  time = 15.5, 45 ;
  lev = 100000, 85000 ;
  lat = -60, -30, 0, 30, 60 ;
  lon = 0, 45, 90, 135, 180, 225, 270, 315 ;
  t = %(t)s ;
  d = %(d)s ;
  curv = 1, 2, 3, 4, 5, 6 ;
}
"""

KINDS = {
    "classic": ("classic", False),
    "offset64": ("64-bit offset", False),
    "cdf5": ("cdf5", False),
    "nc4": ("netCDF-4", True),
    "nc4classic": ("netCDF-4 classic model", True),
}


def cdl(special):
    n = 2 * 2 * 5 * 8
    t = []
    for i in range(n):
        if i % 17 == 3:
            t.append("-32767")
        elif i % 23 == 5:
            t.append("-32000")
        else:
            t.append(str((i * 611) % 30000 - 15000))
    d = []
    for i in range(40):
        d.append("1.e20" if i % 9 == 4 else repr(math.sin(i) * 1e3))
    return CDL % {
        "special": special,
        "t": ", ".join(t),
        "d": ", ".join(d),
    }


def make(out, samples):
    os.makedirs(out, exist_ok=True)
    for name, (kind, nc4) in KINDS.items():
        special = (
            't:_DeflateLevel = 4 ; t:_Shuffle = "true" ; t:_ChunkSizes = 1, 1, 5, 8 ;'
            if nc4
            else ""
        )
        src = os.path.join(out, name + ".cdl")
        with open(src, "w") as f:
            f.write(cdl(special))
        subprocess.run(
            ["ncgen", "-k", kind, "-o", os.path.join(out, name + ".nc"), src],
            check=True,
        )
        os.remove(src)
    for s in samples:
        dst = os.path.join(out, "z_" + os.path.basename(s))
        with netCDF4.Dataset(s) as a, netCDF4.Dataset(dst, "w", format="NETCDF4") as b:
            b.setncatts({k: a.getncattr(k) for k in a.ncattrs()})
            for d in a.dimensions.values():
                b.createDimension(d.name, None if d.isunlimited() else len(d))
            for v in a.variables.values():
                fill = v.getncattr("_FillValue") if "_FillValue" in v.ncattrs() else None
                big = v.ndim >= 3
                w = b.createVariable(
                    v.name,
                    v.dtype,
                    v.dimensions,
                    zlib=big,
                    shuffle=big,
                    complevel=4,
                    chunksizes=(1,) + v.shape[1:] if big else None,
                    fill_value=fill,
                )
                w.setncatts({k: v.getncattr(k) for k in v.ncattrs() if k != "_FillValue"})
                v.set_auto_maskandscale(False)
                w.set_auto_maskandscale(False)
                w[...] = v[...]
    # Hostile files.
    classic = open(os.path.join(out, "classic.nc"), "rb").read()
    nc4 = open(os.path.join(out, "nc4.nc"), "rb").read()
    open(os.path.join(out, "bad_truncated.nc"), "wb").write(nc4[: len(nc4) * 2 // 3])
    # The header intact, the data gone: every variable's begin lies past the end.
    begin = header_end(classic)
    open(os.path.join(out, "bad_past_end.nc"), "wb").write(classic[:begin])
    # A dimension claiming 10 GB: lat = 50000, lon = 50000 (2.5e9 doubles of d).
    big = bytearray(classic)
    for dim, new in ((b"lat", 50000), (b"lon", 50000)):
        pat = len(dim).to_bytes(4, "big") + dim + b"\x00"
        i = big.find(pat)
        assert i > 0, dim
        j = i + 4 + 4  # name padded to 4 bytes
        big[j : j + 4] = new.to_bytes(4, "big")
    open(os.path.join(out, "bad_huge_dim.nc"), "wb").write(bytes(big))
    unknown_filter(os.path.join(out, "bad_filter.nc"))


def header_end(b):
    """The smallest variable begin offset of a CDF-1 file (end of the header)."""
    # The header is followed by the data of 'lev' (the first fixed variable), whose
    # first value is 100000.0 big-endian.
    i = b.find(np.array([100000.0], dtype=">f8").tobytes())
    assert i > 0
    return i


def unknown_filter(path):
    import h5py

    with h5py.File(path, "w") as f:
        lat = f.create_dataset("lat", data=np.array([-30.0, 0.0, 30.0], dtype="f4"))
        lat.attrs["units"] = "degrees_north"
        lat.make_scale("lat")
        lon = f.create_dataset("lon", data=np.array([0.0, 90.0, 180.0, 270.0], dtype="f4"))
        lon.attrs["units"] = "degrees_east"
        lon.make_scale("lon")
        v = f.create_dataset(
            "v",
            shape=(3, 4),
            dtype="f4",
            chunks=(3, 4),
            compression=32015,
            allow_unknown_filter=True,
        )
        v.id.write_direct_chunk((0, 0), b"\x28\xb5\x2f\xfd" + b"\x00" * 44)
        v.attrs["units"] = "K"
        v.dims[0].attach_scale(lat)
        v.dims[1].attach_scale(lon)


def get(url):
    with urllib.request.urlopen(url, timeout=120) as r:
        return r.read(), dict(r.headers)


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(b):
        return False
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b)) or a == b


def check(base, name, path, var, time=None, level=None):
    q = {"variable": var, "format": "json"}
    if time is not None:
        q["time"] = time
    if level is not None:
        q["level"] = level
    url = base + "/api/preview" + name + "?" + urllib.parse.urlencode(q)
    body, _ = get(url)
    got = json.loads(body)
    with netCDF4.Dataset(path) as ds:
        v = ds.variables[var]
        v.set_auto_maskandscale(True)
        idx = tuple(got["index"]) + (slice(None), slice(None))
        want = np.ma.masked_array(v[idx])
        lat = np.asarray(ds.variables[v.dimensions[-2]][:], dtype="f8")
        lon = np.asarray(ds.variables[v.dimensions[-1]][:], dtype="f8")
    flat = want.astype("f8").filled(np.nan).ravel()
    mask = np.ma.getmaskarray(want).ravel()
    vals = got["values"]
    assert len(vals) == flat.size, (len(vals), flat.size)
    bad = 0
    masked = 0
    for g, w, m in zip(vals, flat, mask):
        if m or math.isnan(w):
            masked += 1
            if g is not None:
                bad += 1
        elif not close(float(w), g):
            bad += 1
    assert bad == 0, f"{name} {var}: {bad} of {flat.size} values differ"
    assert np.allclose(got["lat"], lat, rtol=1e-6) and np.allclose(got["lon"], lon, rtol=1e-6)
    # The picture.
    q.pop("format")
    png, headers = get(base + "/api/preview" + name + "?" + urllib.parse.urlencode(q))
    assert png[:8] == b"\x89PNG\r\n\x1a\n", png[:16]
    import io

    from PIL import Image

    im = Image.open(io.BytesIO(png))
    im.verify()
    im = Image.open(io.BytesIO(png))
    im.load()
    print(
        json.dumps(
            {
                "name": name,
                "variable": var,
                "index": got["index"],
                "values": flat.size,
                "masked": masked,
                "png": list(im.size),
                "mode": im.mode,
                "cache": headers.get("x-preview-cache") or headers.get("X-Preview-Cache"),
            }
        )
    )


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "check":
        a = sys.argv[2:]
        check(*a)
    else:
        sys.exit("usage: make DIR SAMPLE... | check BASE NAME FILE VAR [TIME [LEVEL]]")
