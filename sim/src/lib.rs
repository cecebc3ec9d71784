//! A faithful Rust port of the seed's `webhook-sim.mjs` (the end of
//! `webhook-idempotency-post.txt`): a seeded simulation of webhook receivers under
//! at-least-once delivery.
//!
//! [`run`] prints exactly what the script prints, line for line, except the four
//! run-metadata lines (runtime, SQLite version, machine, run date) that [`RunMeta`]
//! supplies. Every handler runs on an in-memory SQLite database, as in the script.
//! Handlers (a) naive and (b) check-then-insert are the deliberately broken designs
//! and stay here on plain SQL; handler (c) is hookbox's own claim, key and side
//! effect in one `BEGIN IMMEDIATE` transaction ([`blocking::process_once`](hookbox_sqlite::blocking::process_once), the
//! synchronous form of `SqliteStore::process_once`: the same SQL on the schema of
//! hookbox's migrations), and the three (d) variants are that plus the store's
//! version guard ([`blocking::advance`](hookbox_sqlite::blocking::advance)) or the two `created` comparisons the seed
//! describes (`created >= stored`, `created > stored`). The crash test runs on a
//! file, closing and reopening the connection, as the script does.
//!
//! The sections are independent (each has its own database and draws), so [`run`]
//! computes them on all cores and prints them in the script's order.
//!
//! Concurrency is the script's: two copies of one delivery interleave at a single
//! `await io()`. Node runs each copy until its first await, then resumes them in
//! order, each to completion (nothing after the await awaits again). The port models
//! that as an explicit two-phase state machine per group: every copy's pre-await
//! part, then every waiting copy's post-await part, in copy order. For (c)/(d) the
//! await comes before the transaction, so each copy's `process_once` runs to
//! completion, in that order.
//!
//! # Layout
//!
//! - `seed`: the seed's constants, draws, events and delivery stream, which both
//!   modes replay;
//! - `script`: the single-process run ([`run`]): the six handlers on SQLite, the
//!   retention test, the crash test on a file, the sender's jitter;
//! - [`server`]: the same stream on Postgres or MySQL/MariaDB with real concurrency;
//! - `table`: the handler and crash tables both modes print; `schema`: the script's
//!   tables for diesel, for both databases; `meta` ([`RunMeta`]) and `error`.
#![forbid(unsafe_code)]

mod error;
mod meta;
mod schema;
mod script;
mod seed;
pub mod server;
mod table;

pub use meta::RunMeta;
pub use script::{run, run_timed};
