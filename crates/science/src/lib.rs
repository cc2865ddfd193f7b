//! Granary's science layer: translating data-reference-syntax (DRS) file names and
//! paths to NDN names and back (`drs`), and reading netCDF metadata (`netcdf`).
//! No I/O beyond reading the files it is given; no network, no database.

pub mod drs;
pub mod example;
pub mod netcdf;
