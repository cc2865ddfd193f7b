//! The catalog's integration tests: one binary, one module per concern; `common` holds
//! the query suite run on both back ends and the throw-away PostgreSQL cluster.

mod chunk_refs;
mod common;
mod federation_settings;
mod locations;
mod postgres;
mod replication_work;
mod sqlite;
