//! TLS for the pool's connections: libpq's `sslmode` and `sslrootcert` read from the
//! connection string (and taken out of it: tokio-postgres knows neither `verify-ca`,
//! `verify-full` nor `sslrootcert`), rustls on the ring provider under tokio-postgres's
//! TLS hook, and the failures of a TLS connection as typed [`PgError`](crate::PgError)s.
//!
//! The trust store, when no root certificate is given, is the Mozilla set compiled in
//! by `webpki-roots` rather than the operating system's: the same set whatever the
//! machine or container (many slim images carry no CA bundle), no file read at each
//! connection, and the same choice as the outbox's HTTP sink (reqwest's
//! `rustls-tls`). Managed databases that sign with a private CA (RDS, Cloud SQL,
//! Azure) need their CA given anyway, with `sslrootcert` or
//! [`PgOptions::with_tls_root_certificates_pem`](crate::PgOptions::with_tls_root_certificates_pem).
//!
//! By concern, each file importing only files listed before it, never this one:
//!
//! - [`mode`]: [`SslMode`] and its parsing; a leaf, the only part the store's error
//!   type imports.
//! - [`params`]: `sslmode` and `sslrootcert` taken out of the connection string.
//! - [`verify`]: the trusted roots, the certificate verifiers and the channel
//!   binding's certificate hash.
//! - [`stream`]: the rustls stream under tokio-postgres's TLS hook.
//! - [`failure`]: a failed connection classified, and the typed TLS errors carried
//!   through the pool ([`connect_error`]).
//! - [`connector`]: [`Connector`], which opens the connections, and `prefer`'s
//!   retry in plain text.

mod connector;
mod failure;
pub(crate) mod mode;
mod params;
mod stream;
mod verify;

pub(crate) use connector::Connector;
pub(crate) use failure::connect_error;
pub use mode::SslMode;
