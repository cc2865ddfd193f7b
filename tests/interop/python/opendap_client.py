"""OPeNDAP (DAP2) clients against a Granary gateway, compared with the original file.

Usage: opendap_client.py CLIENTS URL ORIGINAL [URL ORIGINAL ...]

URL is a file's OPeNDAP URL (without a suffix), ORIGINAL the file on disk. CLIENTS
is a comma-separated list (`all` for every one): `netcdf4` (netCDF4-python, i.e. libnetcdf's DAP2 client), `pydap`
(pydap 3.5's DAP2 client), `xr-netcdf4` and `xr-pydap` (xarray with each engine).
For every variable of the original's root group that DAP2 can carry (not int64,
uint64 or user-defined types): its values whole and in subsets (the first index,
strides, a middle run of every dimension), compared with the original read the same
way; its attributes; the global attributes. Prints one JSON object per file, a line
each: {"url": URL, client: {"checked": n, "subsets": n, "diffs": [...]},
"skipped": [...]}.
"""

import json
import sys
import warnings

import netCDF4
import numpy as np
import xarray as xr

SKIP_TYPES = {"i8", "u8"}


def carried(v) -> bool:
    dt = v.dtype
    if dt is str:
        return True
    return isinstance(dt, np.dtype) and dt.kind in "iufS" and dt.str[1:] not in SKIP_TYPES


def subsets(shape):
    """Hyperslabs of every dimension: first index, strided, a middle run."""
    if not shape or any(n == 0 for n in shape):
        return []
    out = [tuple(slice(0, 1) for _ in shape)]
    out.append(tuple(slice(None, None, 2) for _ in shape))
    out.append(tuple(slice(n // 3, max(n // 3 + 1, 2 * n // 3)) for n in shape))
    out.append(tuple(slice(n - 1, n) for n in shape))
    return out


def text(x) -> str:
    """A string or bytes value as text, without the NUL padding of char arrays."""
    if isinstance(x, bytes):
        x = x.decode("utf-8")
    return str(x).rstrip("\0")


def same(a, b, close=False) -> bool:
    """Arrays equal value by value (NaN equal to NaN); `close`: floats computed in
    different precisions (float32 vs float64 unpacking) equal to float32 rounding."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "SUO" or b.dtype.kind in "SUO":
        return [text(x) for x in a.ravel()] == [text(x) for x in b.ravel()]
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        x, y = a.astype("f8"), b.astype("f8")
        if close:
            return bool(np.allclose(x, y, rtol=1e-6, atol=0, equal_nan=True))
        return bool(np.array_equal(x, y, equal_nan=True))
    return bool(np.array_equal(a, b))


def unescape(s: str) -> str:
    """pydap 3.5 keeps the DAS's backslash escapes in string attributes."""
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            out.append(s[i + 1])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def attr_same(a, b, pydap=False) -> bool:
    if isinstance(a, str) and isinstance(b, (list, np.ndarray)) and all(isinstance(t, str) for t in b):
        # libnetcdf (classic model) joins a string array attribute with newlines.
        return a == "\n".join(b)
    if isinstance(a, str) or isinstance(b, str):
        return (unescape(str(a)) if pydap else str(a)) == str(b)
    x, y = np.atleast_1d(a), np.atleast_1d(b)
    if x.dtype.kind in "iu" and y.dtype.kind in "iu" and x.dtype.itemsize == y.dtype.itemsize:
        # libnetcdf types a byte attribute by the variable's (signed) type: the
        # same bits.
        return bool(np.array_equal(x.view(y.dtype), y))
    if y.dtype == np.float32:
        # Parsed as doubles (pydap): the float32 value, exactly.
        x = x.astype("f4")
    return bool(np.array_equal(x.astype("f8"), y.astype("f8")))


def raw(v, index=()):
    """A netCDF4 variable's stored values (no masking or unpacking)."""
    v.set_auto_maskandscale(False)
    x = v[index] if index != () else v[...]
    if v.dtype == "S1" and v.ndim >= 1:
        x = netCDF4.chartostring(np.asarray(x))
        if v.ndim == 1:
            x = np.asarray(x).reshape(())
    return np.asarray(x)


def guarded(diffs, name, f, *args):
    """Runs one variable's checks; an exception is a difference, named."""
    try:
        return f(*args)
    except Exception as e:  # noqa: BLE001 - every failure is reported
        diffs.append(f"{name}: {type(e).__name__}: {e}")
        return 0


def check_netcdf4(url, orig, report):
    a = netCDF4.Dataset(url)
    diffs, n, ns = [], 0, 0
    for name, v in orig.variables.items():
        if not carried(v):
            continue
        if name not in a.variables:
            diffs.append(f"{name}: missing")
            continue
        n += 1
        ns += guarded(diffs, name, netcdf4_var, name, a.variables[name], v, diffs)
    for k in orig.ncattrs():
        if k not in a.ncattrs():
            diffs.append(f"global {k} missing")
        elif not attr_same(a.getncattr(k), orig.getncattr(k)):
            diffs.append(f"global {k} differs")
    report["netcdf4"] = {"checked": n, "subsets": ns, "diffs": diffs}


def netcdf4_var(name, w, v, diffs):
    ns = 0
    # libnetcdf gives char arrays its own string length (maxStrlen64), as with
    # THREDDS: their strings are compared.
    if v.dtype != "S1" and w.dtype != "S1" and w.shape != v.shape:
        diffs.append(f"{name}: shape {w.shape} != {v.shape}")
        return ns
    for k in v.ncattrs():
        if k == "_FillValue" and v.dtype == "S1":
            continue
        if k not in w.ncattrs():
            diffs.append(f"{name}: attribute {k} missing")
        elif not attr_same(w.getncattr(k), v.getncattr(k)):
            diffs.append(f"{name}: attribute {k} {w.getncattr(k)!r} != {v.getncattr(k)!r}")
    x, y = raw(w), raw(v)
    if x.dtype.kind in "iu" and y.dtype.kind in "iu" and x.dtype != y.dtype:
        x = x.astype(y.dtype)
    if not same(x, y):
        diffs.append(f"{name}: values differ ({x.dtype} vs {y.dtype})")
    # Unpacked and masked, as a scientist reads them.
    w.set_auto_maskandscale(True)
    v.set_auto_maskandscale(True)
    # (Only where attributes ask for it: a variable without `_FillValue` is
    # masked at its type's default fill value, and DAP2's types are not all
    # netCDF's, e.g. libnetcdf reads UInt16 as short.)
    packed = {"_FillValue", "missing_value", "scale_factor", "add_offset"} & set(v.ncattrs())
    if v.dtype != "S1" and v.dtype is not str and packed:
        if not same(np.ma.filled(w[...].astype("f8"), np.nan), np.ma.filled(v[...].astype("f8"), np.nan)):
            diffs.append(f"{name}: unpacked values differ")
    if v.dtype == "S1" or v.dtype is str:
        return ns
    for s in subsets(v.shape):
        ns += 1
        x, y = raw(w, s), raw(v, s)
        if x.dtype.kind in "iu" and x.dtype != y.dtype:
            x = x.astype(y.dtype)
        if not same(x, y):
            diffs.append(f"{name}{s}: subset differs")
    return ns


def check_pydap(url, orig, report):
    from pydap.client import open_url

    d = open_url(url)
    diffs, n, ns = [], 0, 0
    for name, v in orig.variables.items():
        if not carried(v):
            continue
        if name not in d:
            diffs.append(f"{name}: missing")
            continue
        n += 1
        ns += guarded(diffs, name, pydap_var, name, d[name], v, diffs)
    report["pydap"] = {"checked": n, "subsets": ns, "diffs": diffs}


def pydap_var(name, t, v, diffs):
    ns = 0
    arr = t.array if hasattr(t, "array") else t
    y = raw(v)
    if v.dtype == "S1" and v.ndim <= 1:
        x = np.asarray(arr.data[...] if hasattr(arr.data, "__getitem__") else arr.data)
        x = np.asarray(x).reshape(())
        y = np.asarray(y).reshape(())
    else:
        x = np.asarray(arr[...].data if hasattr(arr[...], "data") else arr[...])
    if x.dtype.kind in "iu" and y.dtype.kind in "iu":
        x = x.astype(y.dtype)
    if x.dtype.kind == "S":
        x = np.char.decode(x, "utf-8")
    if not same(x, y):
        diffs.append(f"{name}: values differ {x.dtype} {x.shape} vs {y.dtype} {y.shape}")
    for k in v.ncattrs():
        if k == "_FillValue" and v.dtype == "S1":
            continue
        if k not in t.attributes:
            diffs.append(f"{name}: attribute {k} missing")
        elif not attr_same(t.attributes[k], v.getncattr(k), pydap=True):
            diffs.append(f"{name}: attribute {k} {t.attributes[k]!r} != {v.getncattr(k)!r}")
    if v.dtype == "S1" or v.dtype is str:
        return ns
    for s in subsets(v.shape):
        ns += 1
        x = arr[s]
        x = np.asarray(x.data if hasattr(x, "data") else x)
        y = raw(v, s)
        if x.dtype.kind in "iu" and y.dtype.kind in "iu":
            x = x.astype(y.dtype)
        if not same(x, y):
            diffs.append(f"{name}{s}: subset differs")
    return ns


def check_xarray(url, path, engine, report):
    a = xr.open_dataset(url, engine=engine)
    b = xr.open_dataset(path)
    drop = [k for k, v in b.variables.items() if v.dtype.kind in "iu" and v.dtype.itemsize == 8]
    b = b.drop_vars(drop)
    diffs, n, ns = [], 0, 0
    for name in b.variables:
        n += 1
        if name not in a.variables:
            diffs.append(f"{name}: missing")
            continue
        ns += guarded(diffs, name, xarray_var, name, a[name], b[name], diffs)
    report[f"xr-{engine}"] = {"checked": n, "subsets": ns, "diffs": diffs}


def xarray_var(name, x, y, diffs):
    ns = 0
    if x.dims != y.dims or x.shape != y.shape:
        diffs.append(f"{name}: dims {x.dims}{x.shape} != {y.dims}{y.shape}")
        return ns
    # pydap gives float attributes as doubles: a packed float32 variable is
    # unpacked in float64 there, equal to float32 rounding.
    close = x.dtype != y.dtype and x.dtype.kind == "f" and y.dtype.kind == "f"
    if not same(x.values, y.values, close):
        diffs.append(f"{name}: values differ {x.dtype} vs {y.dtype}")
    if y.ndim and y.dtype.kind not in "SUO":
        for s in subsets(y.shape):
            ns += 1
            if not same(x[s].values, y[s].values, close):
                diffs.append(f"{name}{s}: subset differs")
    return ns


def main() -> None:
    warnings.simplefilter("ignore")
    clients = sys.argv[1].split(",")
    if clients == ["all"]:
        clients = ["netcdf4", "pydap", "xr-netcdf4", "xr-pydap"]
    args = sys.argv[2:]
    for url, path in zip(args[::2], args[1::2]):
        orig = netCDF4.Dataset(path)
        report = {
            "url": url,
            "skipped": [k for k, v in orig.variables.items() if not carried(v)],
        }
        for c in clients:
            if c == "netcdf4":
                check_netcdf4(url, orig, report)
            elif c == "pydap":
                check_pydap(url, orig, report)
            elif c.startswith("xr-"):
                check_xarray(url, path, c[3:], report)
            else:
                raise SystemExit(f"unknown client {c}")
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
