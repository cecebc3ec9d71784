//! TLS for the pool's connections: MySQL's `ssl-mode` and `ssl-ca` read from the URL
//! (and taken out of it: mysql_async knows neither), rustls on the ring provider
//! under mysql_async's TLS, and the failures of a TLS connection as typed
//! [`MysqlError`](crate::MysqlError)s.
//!
//! The trust store, when no CA is given, is the Mozilla set compiled in by
//! `webpki-roots` (mysql_async's): the same set whatever the machine or container,
//! no file read at each connection. Managed databases that sign with a private CA
//! (RDS, Cloud SQL, Azure) need their CA given anyway, with `ssl-ca` or
//! [`MysqlOptions::with_tls_root_certificates_pem`](crate::MysqlOptions::with_tls_root_certificates_pem).
//!
//! By concern, each file importing only files listed before it, never this one:
//!
//! - [`mode`]: [`SslMode`] and its parsing; a leaf, the only part the store's error
//!   type imports.
//! - [`params`]: `ssl-mode` and `ssl-ca` taken out of the URL.
//! - [`verify`]: the trusted roots, read and checked up front.
//! - [`failure`]: a failed connection classified, and the typed TLS errors carried
//!   through the pool ([`connect_error`]).
//! - [`connector`]: [`Connector`], which opens the connections, and `PREFERRED`'s
//!   retry in plain text.

mod connector;
mod failure;
pub(crate) mod mode;
mod params;
mod verify;

pub(crate) use connector::Connector;
pub(crate) use failure::connect_error;
pub use mode::SslMode;
