//! Building blocks for [`Provider`](crate::Provider) implementations: header lookup
//! with typed errors, pre-keyed HMAC, signatures compared in their canonical text, and
//! the diagnosis of a signature mismatch. [`TextKeys`] puts them together for the
//! providers that key HMAC-SHA256 with the secret's text (Stripe, Shopify, GitHub):
//! each of those crates keeps its facts (headers, signed content, [`MacFormat`]) and
//! hands the comparison and its explanation to it.
//!
//! [`BodyKeys`] reads the few fields a provider needs from a JSON body (Stripe's
//! event id, Slack's `event_id`, Zoom's `event` and `event_ts`) without building a
//! JSON tree.
//!
//! Users of a provider crate do not need this module.
//!
//! # Canonical signatures
//! A signature has one spelling: lower-case hex (GitHub `sha256=`, Stripe `v1=`), or
//! standard-alphabet base64 with its `=` padding and zero trailing bits (Shopify,
//! Svix and Standard Webhooks `v1,`). The official libraries compute that text and
//! compare it with the header's text, so any other spelling of the same MAC is "no
//! matching signature" there; [`HmacKey::sign_text`] and [`MacText::matches`] do the
//! same here. [`hex_spelling`] and [`base64_spelling`] tell, after a mismatch, whether
//! the received text was a MAC in another spelling (a mismatch worth explaining) or
//! not a MAC at all (a malformed header).

mod body_keys;
mod diagnose;
mod encoding;
mod headers;
mod mac;
mod text_keys;

pub use body_keys::{BodyFields, BodyKeys, BodyValue, Malformed, is_json};
pub use diagnose::{diagnose_mismatch, non_canonical_hint};
pub use encoding::{
    BASE64_CANONICAL, BASE64_LENIENT, MacEncoding, MacText, Spelling, base64_spelling,
    decode_base64_canonical, hex_spelling, macs_equal,
};
pub use headers::{
    Found, HeaderSpec, first_found, first_present, parse_unix_seconds, scan, scan_into,
};
pub use mac::{HmacKey, HmacState, any_key_matches, text_hmac_key, text_hmac_keys};
pub use text_keys::{MacFormat, TextKeys};
