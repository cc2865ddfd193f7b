#!/usr/bin/env python3
"""Prints what the netCDF4 package (libnetcdf + HDF5 in the wheel) and cftime report for
netCDF files, as JSON: the reference the Rust `granary_science::netcdf` reader is
compared with, field by field.

Usage: nc_dump.py FILE...          -> {"FILE": {...}, ...}
       nc_dump.py --decode UNITS CALENDAR V1 V2 ...  -> ["YYYY-MM-DDThh:mm:ss" | "ERR ..."]

Time values are decoded with cftime.num2date and rounded to the nearest second.
Coverage rule (same as the Rust reader): the variable named by time:bounds (else
time_bnds / time_bounds) if present, else time; min and max of its finite non-fill
values.
"""
import datetime
import json
import sys

import cftime
import netCDF4
import numpy as np

FORMATS = {
    "NETCDF3_CLASSIC": "Classic",
    "NETCDF3_64BIT_OFFSET": "Offset64",
    "NETCDF3_64BIT_DATA": "Cdf5",
    "NETCDF4": "Netcdf4",
    "NETCDF4_CLASSIC": "Netcdf4Classic",
}
DTYPES = {
    "int8": "byte", "int16": "short", "int32": "int", "float32": "float",
    "float64": "double", "uint8": "ubyte", "uint16": "ushort", "uint32": "uint",
    "int64": "int64", "uint64": "uint64", "S1": "char", "str": "string",
}


def iso(d):
    if d.microsecond >= 500000:
        d = d + datetime.timedelta(seconds=1)
    return "%04d-%02d-%02dT%02d:%02d:%02d" % (d.year, d.month, d.day, d.hour, d.minute, d.second)


def decode(units, calendar, values):
    out = []
    for v in values:
        try:
            out.append(iso(cftime.num2date(v, units, calendar=calendar, has_year_zero=True)))
        except Exception as e:  # reported, compared as an error
            out.append("ERR %s" % e)
    return out


def attr(v):
    if isinstance(v, str):
        return {"type": "text", "value": v}
    if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        return {"type": "strings", "value": list(v)}
    a = np.atleast_1d(np.asarray(v))
    if a.dtype.kind == "f":
        vals = [float(str(x)) if a.dtype == np.float32 else float(x) for x in a]
        return {"type": "float", "value": vals}
    if a.dtype.kind == "i":
        return {"type": "int", "value": [int(x) for x in a]}
    if a.dtype.kind == "u":
        return {"type": "uint", "value": [int(x) for x in a]}
    return {"type": "other", "value": str(v)}


def finite(var):
    data = np.asarray(var[:], dtype="f8").ravel()
    skip = []
    for k in ("_FillValue", "missing_value"):
        if k in var.ncattrs():
            skip.extend(np.atleast_1d(var.getncattr(k)).astype("f8").tolist())
    keep = np.isfinite(data)
    for s in skip:
        keep &= ~((data == s) | (data.astype("f4") == np.float32(s)))
    return data[keep]


def time_coverage(ds):
    tv = None
    if "time" in ds.variables and " since " in str(getattr(ds.variables["time"], "units", "")).lower():
        tv = ds.variables["time"]
    if tv is None:
        return None
    cal = getattr(tv, "calendar", "standard")
    bname = getattr(tv, "bounds", None)
    if bname is None:
        bname = next((n for n in ("time_bnds", "time_bounds") if n in ds.variables), None)
    src = ds.variables[bname] if bname in ds.variables else tv
    vals = finite(src)
    if len(vals) == 0:
        return None
    start, end = decode(tv.units, cal, [float(vals.min()), float(vals.max())])
    if start.startswith("ERR") or end.startswith("ERR"):
        return None  # e.g. a calendar cftime does not know: no coverage
    return {"start": start, "end": end, "calendar": cal, "units": tv.units,
            "from_variable": src.name}


def find_axis(ds, names, std, units):
    bounds = {getattr(v, "bounds") for v in ds.variables.values() if "bounds" in v.ncattrs()}
    cands = [v for v in ds.variables.values()
             if v.name not in bounds and 1 <= v.ndim <= 2
             and (v.name in names or getattr(v, "standard_name", None) == std
                  or getattr(v, "units", None) in units)]
    coord = [v for v in cands if v.ndim == 1 and v.dimensions[0] == v.name]
    return (coord or cands or [None])[0]


def bbox(ds):
    lat = find_axis(ds, ("lat", "latitude", "nav_lat"), "latitude",
                    ("degrees_north", "degree_north", "degrees_N", "degree_N"))
    lon = find_axis(ds, ("lon", "longitude", "nav_lon"), "longitude",
                    ("degrees_east", "degree_east", "degrees_E", "degree_E"))
    if lat is None or lon is None:
        return None
    a, o = finite(lat), finite(lon)
    if len(a) == 0 or len(o) == 0:
        return None
    return {"lat_min": float(a.min()), "lat_max": float(a.max()),
            "lon_min": float(o.min()), "lon_max": float(o.max())}


def dump(path):
    with netCDF4.Dataset(path) as ds:
        ds.set_auto_mask(False)
        ds.set_auto_scale(False)
        variables = []
        for v in ds.variables.values():
            fill = getattr(v, "_FillValue", None) if "_FillValue" in v.ncattrs() else None
            variables.append({
                "name": v.name,
                "dims": list(v.dimensions),
                "shape": [int(s) for s in v.shape],
                "dtype": DTYPES.get(str(v.dtype) if v.dtype is not str else "str", str(v.dtype)),
                "units": getattr(v, "units", None),
                "standard_name": getattr(v, "standard_name", None),
                "long_name": getattr(v, "long_name", None),
                "fill_value": None if fill is None else float(str(fill)),
                "attributes": {k: attr(v.getncattr(k)) for k in v.ncattrs()},
            })
        return {
            "format": FORMATS.get(ds.data_model, ds.data_model),
            "global": {k: attr(ds.getncattr(k)) for k in ds.ncattrs()},
            "dims": [{"name": d.name, "len": len(d), "unlimited": d.isunlimited()}
                     for d in ds.dimensions.values()],
            "variables": variables,
            "time": time_coverage(ds),
            "bbox": bbox(ds),
        }


def main(argv):
    if argv[:1] == ["--decode"]:
        units, cal = argv[1], argv[2]
        print(json.dumps(decode(units, cal, [float(x) for x in argv[3:]])))
        return
    print(json.dumps({p: dump(p) for p in argv}, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1:])
