//! netCDF metadata reading (classic CDF-1/2/5 and netCDF-4, also the classic model).
//!
//! [`read`] opens a file, [`read_from`] any [`ReadAt`] range source (a remote file's
//! segments later on), and both give an [`NcMeta`]: global attributes, dimensions,
//! variables, the time coverage decoded with the CF calendars ([`calendar`]) and the
//! lat/lon bounding box. Parsing is done by the pure-Rust `netcdf-reader` crate behind
//! guards: every byte it reads goes through a budget and a deadline, declared sizes are
//! checked against the file size before anything is read, and a panic in the parser is
//! turned into an error.

pub mod calendar;
pub mod chunks;
mod extract;
mod guard;
mod meta;

use std::path::Path;
use std::sync::Arc;

pub use calendar::{Calendar, DateTime, TimeError, TimeUnits};
pub use chunks::{chunk_index, chunk_index_from, ChunkIndex, ChunkRef, VarChunks};
pub(crate) use guard::run_with_file;
pub use guard::ReadAt;
pub use meta::{sniff, AttrValue, BBox, Dim, Format, Limits, NcError, NcMeta, TimeCoverage, Var};

/// Reads the metadata of a netCDF file with the default [`Limits`].
pub fn read(path: &Path) -> Result<NcMeta, NcError> {
    read_with(path, &Limits::default())
}

/// Reads the metadata of a netCDF file.
pub fn read_with(path: &Path, limits: &Limits) -> Result<NcMeta, NcError> {
    let source = guard::FileSource::open(path).map_err(|source| NcError::Open {
        path: path.display().to_string(),
        source,
    })?;
    read_from(Arc::new(source), limits)
}

/// Reads the metadata through a range source (`read_at(offset, len)`), e.g. the
/// segments of a remote file: only the ranges the parser asks for are read.
pub fn read_from(source: Arc<dyn ReadAt>, limits: &Limits) -> Result<NcMeta, NcError> {
    guard::run_guarded(source, limits)
}

/// The metadata of a file already opened behind the guards ([`run_with_file`]).
pub(crate) fn extract_meta(
    file: &netcdf_reader::NcFile,
    file_len: u64,
    limits: &Limits,
    subgroups: usize,
) -> Result<NcMeta, NcError> {
    extract::extract(file, file_len, limits, subgroups)
}
