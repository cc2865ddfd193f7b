//! What publish mode asks of the caller: [`Publisher`] (publish, rename,
//! remove; the `granary` binary's `put`, `mv` and `rm`) and [`Stream`] (a
//! version ingested as it is written).

use std::path::Path;

use granary_packet::Name;

/// What publish mode does to the repository. Implemented by the caller
/// (the same code paths as `granary put`, `mv` and `rm`).
pub trait Publisher: Send + Sync + 'static {
    /// Publishes `file` as a new version of `name`; returns the versioned
    /// name.
    fn publish(&self, name: &Name, file: &Path) -> Result<Name, String>;
    /// Renames an object (every version).
    fn rename(&self, old: &Name, new: &Name) -> Result<(), String>;
    /// Removes an object (every version).
    fn remove(&self, name: &Name) -> Result<(), String>;
    /// Starts publishing `name` from bytes written in order, ingested as
    /// they arrive (segmented and hashed while written, no second pass).
    /// `None` when this publisher cannot: the mount writes a draft file and
    /// [`publish`](Publisher::publish)es it on close.
    fn stream(&self, _name: &Name) -> Option<Box<dyn Stream>> {
        None
    }
}

/// A version being published as it is written ([`Publisher::stream`]).
/// Dropping it without [`publish`](Stream::publish) publishes nothing.
pub trait Stream: Send {
    /// Appends bytes.
    fn write(&mut self, data: &[u8]) -> Result<(), String>;
    /// End of input: publishes the version; returns the versioned name.
    fn publish(self: Box<Self>) -> Result<Name, String>;
    /// Publishes nothing and moves the bytes written so far to the file
    /// `to` (the writer goes on in a draft file: a write out of order, a
    /// read, a truncation, a second open, a rename).
    fn into_file(self: Box<Self>, to: &Path) -> Result<(), String>;
}
