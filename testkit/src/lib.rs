#![doc = include_str!("../README.md")]
//!
//! # Reading an answer
//! ```
//! use hookbox_testkit::Answer;
//!
//! let answer = Answer { status: 401, body: r#"{"ok":false,"error":"signature_mismatch"}"#.into() };
//! assert_eq!(answer.outcome(), "signature_mismatch");
//! let stored = Answer { status: 200, body: r#"{"ok":true,"outcome":"stored"}"#.into() };
//! assert_eq!(stored.outcome(), "stored");
//! ```
//!
//! # A database that goes away
//! [`mysql_server::PrivateServer`] starts a private MariaDB (or MySQL) server on a
//! port and data directory of its own, which a test can kill and restart to take the
//! database away from a receiver and bring it back, without disturbing the shared
//! server other tests use.
//!
//! # Certificates for TLS tests
//! [`tls::TestCertificates`] makes a test CA, a server certificate it signed for the
//! names a test connects to, and a second CA that signed nothing, with the `openssl`
//! command-line tool, for tests of TLS against a real server.
#![forbid(unsafe_code)]

mod common;
mod delivery;
mod example;
pub mod mysql_server;
mod sandbox;
mod services;
pub mod tls;

pub use common::{DEADLINE, unique};
pub use delivery::{Answer, Sender};
pub use example::Example;
pub use sandbox::{Backend, Sandbox};
pub use services::{MysqlDatabase, PgSchema, redis_url};
