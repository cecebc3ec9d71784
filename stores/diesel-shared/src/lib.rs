//! The parts of hookbox's diesel-async stores that do not depend on the database:
//! what `hookbox-diesel-pg` and `hookbox-diesel-mysql` share.
//!
//! [`TxError`] ends a store's transaction that runs user code, and [`boxed_any`]
//! gives an operator query the shape the admin traits return.
//!
//! Applications do not depend on this crate; they use a store crate, which
//! re-exports what it takes from here at its old paths.
//!
//! # Test support
//!
//! With the `testing` feature, [`testing`] holds the one rule for finding a test
//! server ([`testing::service_url`]) and the checks both stores run against a real
//! server (real processes draining one inbox, a process killed mid-transaction,
//! copies racing over pooled connections), generic over a [`testing::Backend`] each
//! store's test suite implements.
#![forbid(unsafe_code)]

#[cfg(feature = "testing")]
pub mod testing;
mod tx;

pub use tx::{TxError, boxed_any};
