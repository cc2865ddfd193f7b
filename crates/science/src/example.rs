//! Example data.
