//! Content Store (in progress).
