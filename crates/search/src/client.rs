//! Asking a catalog over NDN: one request Interest, then the answer's later
//! segments by name.

use granary_app::{Client, Reply};
use granary_packet::types::nack_reason;
use granary_packet::{Component, InterestFields, Name};
use serde_json::Value;

use crate::protocol::{request_name, MAX_ANSWER};

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The node could not be reached or did not answer.
    #[error("{0}")]
    App(#[from] granary_app::Error),
    /// A Nack instead of an answer.
    #[error("{name}: Nack {reason} (is a catalog served there? `granary daemon` serves one)")]
    Nack { name: String, reason: String },
    /// The catalog answered with an error.
    #[error("catalog: {0}")]
    Catalog(String),
    /// The answer was malformed.
    #[error("bad answer: {0}")]
    Bad(String),
}

/// Sends `request` to the catalog at `catalog` (a catalog prefix) with
/// `verb`, and returns the parsed answer. An answer `{"error": …}` is
/// returned as [`Error::Catalog`].
pub async fn ask(
    c: &mut Client,
    catalog: &Name,
    verb: &str,
    request: &Value,
    lifetime_ms: u64,
) -> Result<Value, Error> {
    let name = request_name(catalog, verb);
    let mut f = InterestFields::new(name.clone());
    f.can_be_prefix = true;
    f.must_be_fresh = true;
    f.lifetime = Some(lifetime_ms);
    f.app_params = Some(request.to_string().into_bytes().into());
    let nack = |r: u64, n: &Name| Error::Nack {
        name: n.to_string(),
        reason: nack_reason::name(r).into(),
    };
    let first = match c.express(f).await? {
        Reply::Data(d) => d,
        Reply::Nack(r) => return Err(nack(r, &name)),
    };
    let last = first
        .final_block_id()
        .and_then(|c| c.as_ref().as_segment())
        .unwrap_or(0);
    let mut body = first.content().to_vec();
    let versioned = first.name().prefix(-1);
    for k in 1..=last {
        let mut f = InterestFields::new(versioned.append(&Component::segment(k)));
        f.lifetime = Some(lifetime_ms);
        match c.express(f).await? {
            Reply::Data(d) => body.extend_from_slice(d.content()),
            Reply::Nack(r) => return Err(nack(r, &versioned)),
        }
        if body.len() > MAX_ANSWER {
            return Err(Error::Bad(format!("answer larger than {MAX_ANSWER} bytes")));
        }
    }
    let v: Value = serde_json::from_slice(&body).map_err(|e| Error::Bad(e.to_string()))?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        return Err(Error::Catalog(e.to_string()));
    }
    Ok(v)
}
