//! The library half of `hookbox-cli`: what the `hookbox` binary shares with other
//! operator tools.
//!
//! [`store::open_admin`] and [`store::open_outbox_admin`] open any store's operator
//! views ([`InboxAdmin`], [`OutboxAdmin`]: the same verbs on both) from one
//! `--store` value, a SQLite file path, a `postgres://` or a `mysql://` URL, so a tool needs no enum
//! over backends.
//!
//! [`InboxAdmin`]: hookbox_core::InboxAdmin
//! [`OutboxAdmin`]: hookbox_core::OutboxAdmin
#![forbid(unsafe_code)]

pub mod store;

// README.md's Rust blocks are compiled as this crate's doc tests, so the quickstart a
// newcomer copies cannot drift from the API
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
mod readme {}
