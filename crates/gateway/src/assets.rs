//! The web page, built into the binary (every file under `assets/`, listed by
//! `build.rs`): no CDN, nothing fetched at run time. `/` is `assets/index.html`;
//! any other file is served at its path under `assets/`.

use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

/// The embedded file at `path` (`/` is `/index.html`), if any.
pub fn find(path: &str) -> Option<Response> {
    let path = if path == "/" { "/index.html" } else { path };
    let (_, body) = EMBEDDED.iter().find(|(p, _)| *p == path)?;
    Some(
        (
            [
                (header::CONTENT_TYPE, content_type(path)),
                (header::CACHE_CONTROL, "no-cache"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            *body,
        )
            .into_response(),
    )
}

/// `/`, `/app.js`, `/app.css` and any other embedded file; a JSON 404 otherwise.
pub async fn serve(uri: Uri) -> Response {
    find(uri.path()).unwrap_or_else(|| {
        crate::error(
            StatusCode::NOT_FOUND,
            "no such endpoint or file (see /api/openapi.json)",
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_is_embedded() {
        for p in ["/", "/app.js", "/app.css"] {
            assert!(super::find(p).is_some(), "{p}");
        }
        assert!(super::find("/nope.js").is_none());
        assert!(super::find("/../Cargo.toml").is_none());
    }
}
