"""Time series previews (crates/cli/tests/it/preview.rs).

series BASE NAME VAR LEVEL FILE [FILE ...] -- point LAT LON | bbox W S E N
    fetches BASE/api/preview/NAME?variable=VAR&level=LEVEL&point=…|bbox=…&format=json
    (NAME: a file's NDN name, or a dataset id with the dataset's FILEs in time order)
    and compares it with netCDF4-python's reading of the FILEs, concatenated: the
    nearest grid point (longitudes modulo 360), or the cos(latitude)-weighted mean of
    the unmasked points inside the box, per time step (masked as null, 1e-9 relative);
    the dates decoded with netCDF4.num2date in each file's own units and calendar.
    Then the PNG: Pillow decodes it, 740 x 400. Prints one JSON line.
hostile BASE NAME VAR
    every hostile parameter set answers 400 with a JSON {"error"}.
"""

import io
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

import netCDF4
import numpy as np
from PIL import Image


def fetch(url):
    try:
        r = urllib.request.urlopen(url)
        return r.status, r.headers.get("Content-Type"), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()


def expected(files, var, level, place):
    dates, values = [], []
    for f in files:
        with netCDF4.Dataset(f) as d:
            v = d[var]
            lat = np.asarray(d[v.dimensions[-2]][:], dtype="f8")
            lon = np.asarray(d[v.dimensions[-1]][:], dtype="f8")
            index = []
            for dim in v.dimensions[:-2]:
                if dim == "time":
                    index.append(slice(None))
                else:
                    index.append(level)
                    level_dim = dim
            t = d["time"]
            dates += [
                x.strftime("%Y-%m-%dT%H:%M:%S")
                for x in netCDF4.num2date(t[:], t.units, getattr(t, "calendar", "standard"))
            ]
            if place[0] == "point":
                y, x = place[1], place[2]
                iy = int(np.argmin(np.abs(lat - y)))
                dl = np.mod(lon - x, 360.0)
                ix = int(np.argmin(np.minimum(dl, 360.0 - dl)))
                a = v[tuple(index + [iy, ix])]
                a = np.ma.masked_invalid(np.ma.asarray(a, dtype="f8"))
                values += [None if m else float(x) for x, m in zip(a.filled(0), np.ma.getmaskarray(a))]
                grid = [float(lat[iy]), float(lon[ix])]
            else:
                w, s, e, n = place[1:]
                rows = np.where((lat >= s) & (lat <= n))[0]
                cols = np.where(np.mod(lon - w, 360.0) <= e - w)[0]
                a = v[tuple(index)]
                a = np.ma.asarray(a, dtype="f8")[:, rows.min() : rows.max() + 1][:, :, cols]
                wt = np.cos(np.radians(lat[rows.min() : rows.max() + 1]))[None, :, None]
                wt = np.broadcast_to(wt, a.shape)
                mask = np.ma.getmaskarray(a) | ~np.isfinite(a.filled(0))
                num = np.where(mask, 0.0, a.filled(0) * wt).sum(axis=(1, 2))
                den = np.where(mask, 0.0, wt).sum(axis=(1, 2))
                values += [float(x / y) if y > 0 else None for x, y in zip(num, den)]
                grid = None
    return dates, values, grid


def series(base, name, var, level, files, place):
    q = {"variable": var, "level": str(level)}
    if place[0] == "point":
        q["point"] = f"{place[1]},{place[2]}"
    else:
        q["bbox"] = ",".join(str(x) for x in place[1:])
    url = f"{base}/api/preview{name}?{urllib.parse.urlencode(q)}"
    status, ctype, body = fetch(url + "&format=json")
    assert status == 200, (url, status, body)
    assert ctype == "application/json", ctype
    got = json.loads(body)
    dates, values, grid = expected(files, var, level, place)
    assert got["dates"] == dates, (got["dates"][:3], dates[:3])
    assert len(got["values"]) == len(values), (len(got["values"]), len(values))
    for i, (a, b) in enumerate(zip(got["values"], values)):
        if b is None:
            assert a is None, (i, a)
        else:
            assert a is not None and abs(a - b) <= 1e-9 * max(1.0, abs(b)), (i, a, b)
    assert got["method"] == ("point" if place[0] == "point" else "area_mean"), got["method"]
    if grid is not None:
        assert got["grid_point"] == grid, (got["grid_point"], grid)
    status, ctype, png = fetch(url)
    assert status == 200 and ctype == "image/png", (status, ctype, png[:200])
    im = Image.open(io.BytesIO(png))
    im.load()
    assert im.size == (740, 400), im.size
    print(json.dumps({"name": name, "place": place, "steps": len(values),
                      "masked": sum(v is None for v in values), "png": im.size}))


HOSTILE = [
    "point=999,0",
    "point=0,999",
    "point=nan,0",
    "point=0,abc",
    "point=1",
    "point=1,2,3",
    "bbox=0,10,10,-10",
    "bbox=10,-10,0,10",
    "bbox=-1e308,-90,1e308,90",
    "bbox=-360,-90,360,90",
    "bbox=1,2,3",
    "bbox=1,1,2,2",
    "point=0,0&bbox=0,0,1,1",
    "point=0,0&time=1",
    "point=0,0&level=99",
]


def hostile(base, name, var):
    for h in HOSTILE:
        url = f"{base}/api/preview{name}?variable={var}&{h}"
        status, ctype, body = fetch(url)
        assert status == 400, (h, status, body)
        assert ctype == "application/json", (h, ctype)
        assert json.loads(body)["error"], (h, body)
    # Without a variable.
    status, _, body = fetch(f"{base}/api/preview{name}?point=0,0")
    assert status == 400, (status, body)
    print(json.dumps({"hostile": len(HOSTILE) + 1}))


def main():
    if sys.argv[1] == "hostile":
        hostile(sys.argv[2].rstrip("/"), sys.argv[3], sys.argv[4])
        return
    assert sys.argv[1] == "series"
    base, name, var, level = sys.argv[2].rstrip("/"), sys.argv[3], sys.argv[4], int(sys.argv[5])
    rest = sys.argv[6:]
    k = rest.index("--")
    files, p = rest[:k], rest[k + 1 :]
    place = (p[0],) + tuple(float(x) for x in p[1:])
    series(base, name, var, level, files, place)


if __name__ == "__main__":
    main()
