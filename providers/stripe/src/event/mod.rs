//! Reads the three fields verification needs from a Stripe event without building a
//! JSON tree: the event `id`, its `type`, and `data.object.id`.
//!
//! A single forward scan validates the whole body as JSON (RFC 8259, UTF-8) and
//! remembers where those three strings are; strings without escapes are borrowed
//! from the body, so a typical event costs no allocation beyond the `id` the dedupe
//! key keeps. The scan is resumable ([`Scanner::run`] up to a byte offset), so the
//! provider can hash and scan the body in one pass.
//!
//! It reads exactly what `serde_json` reads into a struct with those three fields
//! (every other field skipped as `serde::de::IgnoredAny`), and in addition requires
//! the whole body to be UTF-8: the tests and the `stripe_event` fuzz target compare
//! the two on arbitrary input. What that means in detail:
//! - a field of the wrong shape (a number where the id belongs) reads as absent, and
//!   a body that is JSON but not an object reads as an event without fields;
//! - a second `id`, `type` or `data` at the top, `object` in `data` or `id` in
//!   `data.object` is an error: which one would count is unknowable;
//! - keys at those levels, and those fields' string values, are decoded strictly
//!   (an unpaired surrogate escape such as `\ud800` is an error), strings elsewhere
//!   only need well-formed escapes, as `serde_json` skips them;
//! - a number at those positions must fit an `f64` (`1e400` is an error), numbers
//!   elsewhere only need to be well-formed;
//! - nesting is unbounded (a bit per level, on the heap past 64 levels).

mod fields;
mod lex;
mod scan;
#[cfg(test)]
mod tests;

pub(crate) use scan::Scanner;
