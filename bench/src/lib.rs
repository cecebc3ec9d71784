//! What the bench binaries share: settings read from the environment, the facts of
//! the machine and the services printed in their headers, the Postgres and Redis
//! setup and cleanup, concurrent load loops, rounds that alternate the sides of a
//! comparison, and the numbers' formatting.
//!
//! Each binary keeps what only it measures: `hookbox-bench-stores` its store
//! targets and claim rounds, `hookbox-bench-http` its servers and request phases.
//! The verify bench (`src/main.rs`) needs none of this.
#![forbid(unsafe_code)]

pub mod env;
pub mod host;
pub mod load;
pub mod rounds;
pub mod services;
pub mod table;

/// The error every bench step returns: any error, with its sources.
pub type BoxErr = Box<dyn std::error::Error + Send + Sync>;
