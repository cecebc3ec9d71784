//! Shared by the fuzz targets: split the fuzzer's bytes into header values and a body.

use hookbox_core::bytes::Bytes;
use hookbox_core::http::{HeaderMap, HeaderName, HeaderValue};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::Provider;

/// Splits `data` at 0xFF bytes into one value per name, the rest being the body, and
/// runs `provider.verify_request` (which is `verify` for providers without handshakes).
/// Any result is fine; a panic is the bug.
pub fn verify_with(provider: &dyn Provider, names: &[&'static str], data: &[u8]) {
    let mut parts = data.split(|&b| b == 0xFF);
    let mut headers = HeaderMap::new();
    for name in names {
        let Some(value) = parts.next() else { break };
        if let Ok(value) = HeaderValue::from_bytes(value) {
            headers.append(HeaderName::from_static(name), value);
        }
    }
    let body: Vec<u8> = parts.flatten().copied().collect();
    let now = OffsetDateTime::from_unix_timestamp(1_614_265_330).expect("in range");
    let _ = provider.verify_request(&headers, Bytes::from(body), now);
}
