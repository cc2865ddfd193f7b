//! The science crate's integration tests: one binary, one module per concern;
//! `netcdf_support` holds the netCDF fixtures (CDL through ncgen) and the Python oracle.

mod drs_attrs_rules;
mod drs_cmip5_institute_rules;
mod drs_cmip5_names;
mod drs_deviant;
mod drs_generated;
mod drs_real_cmip6;
mod netcdf_chunks;
mod netcdf_example;
mod netcdf_hostile;
mod netcdf_interop;
mod netcdf_support;
mod preview_series;
