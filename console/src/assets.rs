//! The stylesheet and script, embedded in the binary and served under the console's
//! own path with a content hash in their names, so a browser may cache them for a
//! year and a new version is a new URL.

use std::sync::LazyLock;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse as _, Response};

/// The stylesheet.
const CSS: &str = include_str!("../assets/console.css");
/// The script: formatting only (local times, a wrap toggle); no page needs it.
const JS: &str = include_str!("../assets/console.js");

/// FNV-1a over `bytes`, at compile time: a cache-busting name, not a security
/// property.
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash
}

static CSS_NAME: LazyLock<String> =
    LazyLock::new(|| format!("assets/console.{:016x}.css", fnv1a(CSS.as_bytes())));
static JS_NAME: LazyLock<String> =
    LazyLock::new(|| format!("assets/console.{:016x}.js", fnv1a(JS.as_bytes())));

/// The stylesheet's path under the console's prefix (no leading `/`).
pub(crate) fn css_path() -> &'static str {
    &CSS_NAME
}

/// The script's path under the console's prefix (no leading `/`).
pub(crate) fn js_path() -> &'static str {
    &JS_NAME
}

/// Answers `GET /assets/{name}`: the asset with a year-long immutable cache, or 404
/// for any other name (an old hash included).
pub(crate) fn serve(name: &str) -> Response {
    let (body, content_type) = if format!("assets/{name}") == *CSS_NAME {
        (CSS, "text/css; charset=utf-8")
    } else if format!("assets/{name}") == *JS_NAME {
        (JS, "text/javascript; charset=utf-8")
    } else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asset_names_carry_their_content_hash() {
        assert!(css_path().starts_with("assets/console."));
        assert!(css_path().ends_with(".css"));
        assert_ne!(css_path(), js_path());
        let name = css_path().trim_start_matches("assets/");
        assert_eq!(serve(name).status(), StatusCode::OK);
        assert_eq!(serve("console.css").status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn the_script_never_writes_markup() {
        for forbidden in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!JS.contains(forbidden), "console.js uses {forbidden}");
        }
    }
}
