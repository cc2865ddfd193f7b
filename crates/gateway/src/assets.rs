//! The web page, built into the binary: no CDN, nothing fetched at run time.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// `(path, content type, bytes)` of every embedded asset.
pub const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "/",
        "text/html; charset=utf-8",
        include_bytes!("../assets/index.html"),
    ),
    (
        "/app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/app.js"),
    ),
    (
        "/app.css",
        "text/css; charset=utf-8",
        include_bytes!("../assets/app.css"),
    ),
];

fn asset(path: &str) -> Response {
    let (_, ctype, body) = ASSETS
        .iter()
        .find(|(p, _, _)| *p == path)
        .copied()
        .unwrap_or(("", "text/plain", b""));
    (
        [
            (header::CONTENT_TYPE, ctype),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

pub async fn index() -> Response {
    asset("/")
}

pub async fn app_js() -> Response {
    asset("/app.js")
}

pub async fn app_css() -> Response {
    asset("/app.css")
}
