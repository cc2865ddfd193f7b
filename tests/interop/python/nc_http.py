"""Opens a netCDF file over HTTP byte ranges (netCDF4, `URL#mode=bytes`) and
checks every variable equals the same file read from disk.

Usage: nc_http.py URL#mode=bytes LOCAL_PATH
"""

import sys

import netCDF4
import numpy as np


def main():
    url, local = sys.argv[1], sys.argv[2]
    a = netCDF4.Dataset(url)
    b = netCDF4.Dataset(local)
    assert a.file_format == b.file_format, (a.file_format, b.file_format)
    assert list(a.variables) == list(b.variables), (list(a.variables), list(b.variables))
    assert a.ncattrs() == b.ncattrs()
    for k in a.ncattrs():
        assert str(a.getncattr(k)) == str(b.getncattr(k)), k
    for v in a.variables:
        x, y = a.variables[v][:], b.variables[v][:]
        assert x.shape == y.shape, v
        assert np.array_equal(np.ma.getdata(x), np.ma.getdata(y)), v
    print(f"{len(a.variables)} variables equal over HTTP byte ranges ({a.file_format})")


if __name__ == "__main__":
    main()
