//! Names of the catalog protocol (docs/catalog-protocol.md).
//!
//! A request is an Interest for `<catalog prefix>/<verb>/<params-sha256>`
//! with CanBePrefix and ApplicationParameters holding the request as JSON.
//! The answer is a versioned, segmented JSON document named
//! `<Interest name>/v=<version>/seg=<n>`; segment 0 answers the request
//! itself, later segments are asked for by name (no parameters) and are kept
//! by the service for [`RESULT_TTL_MS`].

use granary_packet::{Component, Name};

/// Catalog prefix every node answers locally (never leaves the node).
pub const LOCAL_PREFIX: &str = "/localhost/granary/catalog";

/// The component under a node prefix where its catalog is served.
pub const CATALOG_COMPONENT: &str = "catalog";

/// Search: parameters are a `granary_catalog::Query` as JSON; the answer is
/// a `granary_catalog::Page` (records without their `meta` detail).
pub const VERB_SEARCH: &str = "search";
/// Autocomplete: `{"facet", "prefix", "limit"?, "query"?}`; the answer is
/// `{"facet", "values": [[value, count], …]}`.
pub const VERB_AUTOCOMPLETE: &str = "autocomplete";
/// Name-level autocomplete: `{"parent", "prefix"?, "limit"?, "query"?}`; the
/// answer is `{"parent", "children": [[component, count], …]}`.
pub const VERB_NAMES: &str = "names";
/// One record with its detail: `{"name", "version"?}`; the answer is the
/// record (with `meta`) and `"versions"`, or `{"error"}`.
pub const VERB_RECORD: &str = "record";

/// Locations (federation): `{"name", "version"?, "node_timeout_ms"?}`; the answer
/// is `{"name", "version", "locations": [Location…]}`: the nodes holding that
/// version (default: the highest version an up node holds) whose heartbeat is
/// younger than the node timeout (the request's, else the serving node's
/// `node_timeout`), least loaded first, then longest registered. `version` is null and
/// `locations` empty when no up node holds it.
pub const VERB_LOCATE: &str = "locate";

/// Dataset search: parameters are a `granary_catalog::DatasetQuery` as JSON
/// (`{"query": Query, "latest"?, "ids"?, "files"?}`); the answer is a
/// `granary_catalog::DatasetPage` (`{"total", "hits": [Dataset…], "facet_counts"}`).
pub const VERB_DATASETS: &str = "datasets";

/// Content bytes per segment of an answer (fits the 8800-byte packet limit
/// with any reasonable name).
pub const SEGMENT_SIZE: usize = 7000;
/// How long an answer's later segments stay available, ms.
pub const RESULT_TTL_MS: u64 = 30_000;
/// FreshnessPeriod of answers, ms: none, so that a request (MustBeFresh) is
/// always answered by the catalog, never by a cached answer from before the
/// last change; an answer's later segments (exact versioned names, no
/// MustBeFresh) may still come from a cache.
pub const FRESHNESS_MS: u64 = 0;
/// Largest request (ApplicationParameters), bytes.
pub const MAX_REQUEST: usize = 64 * 1024;
/// Largest answer, bytes (a page of 10 000 records fits).
pub const MAX_ANSWER: usize = 64 << 20;

/// The catalog prefix of a node: `<node prefix>/catalog`.
pub fn catalog_prefix(node_prefix: &Name) -> Name {
    node_prefix.append(&Component::generic(CATALOG_COMPONENT.as_bytes()))
}

/// The request name (without the parameters digest, which encoding adds).
pub fn request_name(catalog: &Name, verb: &str) -> Name {
    catalog.append(&Component::generic(verb.as_bytes()))
}
