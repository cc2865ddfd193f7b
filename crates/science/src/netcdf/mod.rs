//! netCDF metadata reading (classic CDF-1/2/5 and netCDF-4).
