//! The catalog: one record per published file version, faceted search.
