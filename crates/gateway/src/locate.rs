//! Where a file is held: `locations` of `/api/file` (docs/http-api.md). Today
//! only this node is known (a catalog shared with other nodes names their
//! records' publisher, without a URL); federation (issue 29) adds other
//! nodes' gateways.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use axum::http::{header, HeaderMap, Uri};
use granary_catalog::Record;
use serde_json::{json, Value};

use crate::State;

/// This node's prefix, from `<data-dir>/node.toml` (`node_prefix = "/…"`, which
/// the daemon writes at start); read once per data directory.
pub(crate) fn node_prefix(data_dir: &Path) -> Option<String> {
    static CACHE: Mutex<Option<(PathBuf, Option<String>)>> = Mutex::new(None);
    let mut c = CACHE.lock().ok()?;
    if let Some((d, p)) = c.as_ref() {
        if d == data_dir {
            return p.clone();
        }
    }
    let p = std::fs::read_to_string(data_dir.join("node.toml"))
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == "node_prefix").then(|| v.trim().trim_matches('"').to_string())
            })
        })
        .filter(|p| p.starts_with('/'));
    *c = Some((data_dir.to_path_buf(), p.clone()));
    p
}

/// The gateway's base URL as the client reached it: the request's scheme
/// (HTTP/2 carries one; else `http`) and `Host` (else the bound address).
fn base_url(local: Option<SocketAddr>, uri: &Uri, headers: &HeaderMap) -> Option<String> {
    let scheme = uri.scheme_str().unwrap_or("http");
    let ok = |h: &str| {
        !h.is_empty()
            && h.len() <= 255
            && h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-:[]_".contains(&b))
    };
    let host = uri
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| {
            headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        })
        .filter(|h| ok(h))
        .or_else(|| local.map(|a| a.to_string()))?;
    Some(format!("{scheme}://{host}"))
}

/// `[{node, prefix, url}]`: the nodes known to hold `rec`, each with its name
/// (node prefix), the NDN name to fetch (`<name>/v=<version>`) and the file's
/// URL on that node's gateway (`download`, the path of the file on a gateway,
/// after its base URL; null when not known).
pub(crate) fn locations(
    node: &State,
    rec: &Record,
    download: &str,
    uri: &Uri,
    headers: &HeaderMap,
) -> Value {
    let prefix = format!("{}/v={}", rec.name, rec.version);
    let here = node_prefix(&node.data_dir);
    let publisher = rec.node.clone().filter(|n| !n.is_empty());
    match (here, publisher) {
        // Published by another node of a shared catalog: held there.
        (Some(h), Some(p)) if h != p => json!([{ "node": p, "prefix": prefix, "url": null }]),
        (h, p) => {
            let url =
                base_url(node.local.get().copied(), uri, headers).map(|b| format!("{b}{download}"));
            json!([{ "node": h.or(p), "prefix": prefix, "url": url }])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(h: &str) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert(header::HOST, h.parse().unwrap());
        m
    }

    #[test]
    fn base_url_from_host_or_bound_address() {
        let local = Some(SocketAddr::from(([127, 0, 0, 1], 8080)));
        let uri: Uri = "/api/file/a".parse().unwrap();
        assert_eq!(
            base_url(local, &uri, &host("node.example.org:8443")).as_deref(),
            Some("http://node.example.org:8443")
        );
        assert_eq!(
            base_url(local, &uri, &host("[::1]:80")).as_deref(),
            Some("http://[::1]:80")
        );
        // A Host that is not a host: the bound address instead.
        assert_eq!(
            base_url(local, &uri, &host("a b/c")).as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            base_url(local, &uri, &HeaderMap::new()).as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(base_url(None, &uri, &HeaderMap::new()), None);
        // HTTP/2 carries scheme and authority in the URI.
        let abs: Uri = "https://n.example:443/api/file/a".parse().unwrap();
        assert_eq!(
            base_url(local, &abs, &host("other")).as_deref(),
            Some("https://n.example:443")
        );
    }

    #[test]
    fn node_prefix_from_node_toml() {
        let d = std::env::temp_dir().join(format!("granary-locate-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("node.toml"), "node_prefix = \"/granary/h-1a2b\"\n").unwrap();
        assert_eq!(node_prefix(&d).as_deref(), Some("/granary/h-1a2b"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
