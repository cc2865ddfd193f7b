"""Print the global attributes of netCDF files as JSON: {path: {attribute: value}}.

Usage: nc_global_attrs.py DIR   (walks DIR for *.nc)
Used by crates/science/tests/drs_real_cmip6.rs to cross-check the DRS translator
against real files without the Rust netCDF reader. Values are given as strings.
"""
import json
import os
import sys

import netCDF4


def main() -> None:
    root = sys.argv[1]
    out = {}
    for base, _dirs, files in os.walk(root):
        for f in sorted(files):
            if not f.endswith(".nc"):
                continue
            path = os.path.join(base, f)
            with netCDF4.Dataset(path) as ds:
                out[path] = {k: str(ds.getncattr(k)) for k in ds.ncattrs()}
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
