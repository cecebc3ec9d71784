#![no_main]
//! Fuzzes the canonical-encoding rule: a signature header built from the signer's
//! own canonical text with arbitrary edits (any byte replaced, case flipped, padding
//! cut, text truncated or extended) verifies if and only if one of its signatures, as
//! the provider splits the header into entries, is still exactly the canonical text. Everything else is `signature_mismatch` or
//! `malformed_header`, and a spelling of the same MAC in another case or base64
//! variant is never a pass.

use hookbox_core::bytes::Bytes;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{Provider, Signer};
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const T: i64 = 1_614_265_330;
const BODY: &[u8] = br#"{"id":"evt_1","type":"t"}"#;

/// Returns the provider, the signed headers, the signature header's name and the
/// prefix before the signature text that the edits leave alone.
fn case(
    which: u8,
) -> (
    Box<dyn Provider>,
    hookbox_core::SignedHeaders,
    &'static str,
    &'static str,
) {
    match which % 5 {
        0 => (
            Box::new(hookbox_github::GitHub::new(SECRET).expect("secret")),
            hookbox_github::GitHubSigner::new(SECRET)
                .expect("secret")
                .sign("d", T, BODY),
            "x-hub-signature-256",
            "sha256=",
        ),
        1 => (
            Box::new(hookbox_stripe::Stripe::new(SECRET).expect("secret")),
            hookbox_stripe::StripeSigner::new(SECRET)
                .expect("secret")
                .sign("", T, BODY),
            "stripe-signature",
            "t=1614265330,v1=",
        ),
        2 => (
            Box::new(hookbox_shopify::Shopify::new(SECRET).expect("secret")),
            hookbox_shopify::ShopifySigner::new(SECRET)
                .expect("secret")
                .sign("w", T, BODY),
            "x-shopify-hmac-sha256",
            "",
        ),
        3 => (
            Box::new(hookbox_svix::Svix::new(SECRET).expect("secret")),
            hookbox_svix::SvixSigner::new(SECRET)
                .expect("secret")
                .sign("msg", T, BODY),
            "svix-signature",
            "v1,",
        ),
        _ => (
            Box::new(hookbox_standard::Standard::new(SECRET).expect("secret")),
            hookbox_standard::StandardSigner::new(SECRET)
                .expect("secret")
                .sign("msg", T, BODY),
            "webhook-signature",
            "v1,",
        ),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, edits)) = data.split_first() else {
        return;
    };
    let (provider, signed, name, prefix) = case(which);
    let canonical = signed.get(name).expect("signed").to_string();
    let mac = canonical[prefix.len()..].to_string();
    let mut text = mac.clone().into_bytes();
    for edit in edits.chunks(2) {
        match edit {
            // flip the case of one character
            [at, 0] => {
                let at = usize::from(*at) % text.len().max(1);
                if let Some(b) = text.get_mut(at) {
                    *b = if b.is_ascii_lowercase() {
                        b.to_ascii_uppercase()
                    } else {
                        b.to_ascii_lowercase()
                    };
                }
            }
            // drop the padding
            [_, 1] => text.retain(|&b| b != b'='),
            // the URL-safe alphabet
            [_, 2] => {
                for b in &mut text {
                    *b = match *b {
                        b'+' => b'-',
                        b'/' => b'_',
                        b => b,
                    };
                }
            }
            // truncate
            [at, 3] => text.truncate(usize::from(*at) % (text.len() + 1)),
            // replace one byte
            [at, byte] => {
                let at = usize::from(*at) % text.len().max(1);
                if let Some(b) = text.get_mut(at) {
                    *b = *byte;
                }
            }
            [byte] => text.push(*byte),
            _ => {}
        }
    }
    let Ok(edited) = String::from_utf8(text) else {
        return;
    };
    let mut headers = signed.to_header_map();
    let Ok(value) = hookbox_core::http::HeaderValue::from_str(&format!("{prefix}{edited}")) else {
        return;
    };
    headers.insert(hookbox_core::http::HeaderName::from_static(name), value);
    let now = OffsetDateTime::from_unix_timestamp(T).expect("in range");
    let result = provider.verify(&headers, Bytes::from_static(BODY), now);
    let value = format!("{prefix}{edited}");
    let canonical_entry = match which % 5 {
        // `t=…,v1=…`: items split at `,` and trimmed; one `t`, any `v1`
        1 => {
            let items: Vec<(&str, &str)> = value
                .split(',')
                .filter_map(|item| item.trim().split_once('='))
                .collect();
            items.iter().filter(|(k, _)| *k == "t").count() == 1
                && items.iter().any(|&(k, v)| k == "v1" && v == mac)
        }
        // space-separated `v1,<base64>` entries
        3 | 4 => value
            .split(' ')
            .filter_map(|entry| entry.split_once(','))
            .any(|(version, signature)| version == "v1" && signature == mac),
        // the whole value
        _ => edited == mac,
    };
    match result {
        Ok(_) => assert!(
            canonical_entry,
            "only the canonical text verifies: {value:?}"
        ),
        Err(err) => {
            assert!(
                !canonical_entry,
                "the canonical text verifies: {value:?}: {err}"
            );
            assert!(
                matches!(
                    err.kind(),
                    "signature_mismatch" | "malformed_header" | "missing_header"
                ),
                "{err}"
            );
            // the same hex in another case is a signature that does not match
            if edited != mac && edited.eq_ignore_ascii_case(&mac) && prefix.ends_with('=') {
                assert_eq!(err.kind(), "signature_mismatch", "{err}");
            }
        }
    }
});
