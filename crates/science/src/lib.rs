//! Granary's science layer: translating data-reference-syntax (DRS) file names and
//! paths to NDN names and back (`drs`), and reading netCDF metadata (`netcdf`).
//! No network, no database: it reads the files it is given (and `example` writes the
//! example tree it is asked for).

pub mod consistency;
pub mod dap;
pub mod drs;
pub mod example;
pub mod netcdf;
pub mod preview;
