//! Reads the three fields verification needs from a Stripe event without building a
//! JSON tree: the event `id`, its `type`, and `data.object.id`.
//!
//! A forward scan reads the body until those three are settled (read, or known to be
//! absent) and stops there: the rest of the body is authenticated by the signature,
//! and is parsed (and so checked) when a handler reads it
//! ([`Delivery::parse`](hookbox_core::Delivery::parse)). Strings without escapes are
//! borrowed from the body, so a typical event costs no allocation. The provider scans
//! only after the signature matched, so only authenticated bytes are ever read.
//!
//! On the path to the three fields (the members of the event, of `data` and of
//! `data.object`) every token is checked against the JSON grammar, keys are decoded
//! (a key spelled with escapes counts), and the three fields' strings are decoded
//! strictly (an unpaired surrogate escape such as `\ud800` is an error). Every other
//! value is followed only to its end, eight bytes at a time: a skipped string up to
//! its closing quote (its escapes stepped over, its contents unchecked; `memchr2`
//! takes over past its first 16 bytes), a skipped object or array by its brackets,
//! quotes and escapes (brackets are counted, not matched). Once `data.object.id` is
//! settled, the rest of `data.object` and of `data` is skipped the same way. So:
//! - for a body that is JSON, the fields are exactly those `serde_json` reads into
//!   a struct of those three fields (the rest skipped as `serde::de::IgnoredAny`),
//!   except that a key repeated on the path counts once, the **first** copy: a later
//!   `id`, `type` or `data` at the top, `object` in `data` or `id` in `data.object`
//!   is skipped (a derived struct refuses such a body, `serde_json::Value` keeps the
//!   last copy; Stripe never repeats a key, and no one else can sign a body);
//! - a field of the wrong shape (a number where the id belongs) reads as absent, and a
//!   body that is JSON but not an object reads as an event without fields;
//! - a body that is not JSON is refused when the error lies on the path before the
//!   stop, or when the body ends before the stop; an error inside a skipped value, or
//!   after the stop, is not seen. Where Stripe puts `type` last (as it does), the stop
//!   comes at the event's last member; a body without one of the three fields is read
//!   to its end;
//! - nesting is unbounded: a skipped value counts its brackets.
//!
//! The tests and the `stripe_event` fuzz target compare the scanner with `serde_json`
//! on every body `serde_json` reads as JSON.

mod fields;
mod lex;
mod scan;
#[cfg(test)]
mod tests;

pub(crate) use scan::read;
