//! The CLI crate's integration tests: one binary, one module per concern (real daemons,
//! real clients, real files). `common` holds the shared set-up, `netns` the
//! network-namespace testbed helpers.

mod browser;
mod cas;
mod catalog_faults;
mod catalog_ha;
mod catchunks;
mod cli;
mod common;
mod datasets;
mod dedup;
mod federation;
mod federation_locations;
mod forwarder;
mod gateway;
mod gateway_clients;
mod gateway_hostile;
mod gateway_load;
mod gateway_metrics;
mod integrity;
mod interop_forwarder;
mod interop_packets;
mod interop_repo;
mod interop_verify;
mod linkem;
mod metadata;
mod mount;
mod netns;
mod netns_dedup;
mod netns_experiments;
mod netns_federation;
mod netns_sites;
mod netns_testbed;
mod netns_transfer;
mod output;
mod perf;
mod preview;
mod reflink;
mod replicate;
mod repo;
mod repo_insert;
mod science;
mod segment_size;
mod transfer;
mod trust;
mod zarr;
