//! The store's error type and its transient/permanent classification, and the error
//! of a transaction that runs user code.

use std::str::FromStr;

use diesel::result::{ConnectionError, DatabaseErrorKind, Error as DieselError};
use hookbox_core::StoreError;

use crate::tls::mode::{SslMode, UnknownSslMode};

/// A boxed error, for causes whose type belongs to a library we do not re-export.
type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a [`PgStore`](crate::PgStore) call failed.
///
/// Every variant keeps its cause: walk [`std::error::Error::source`] for the driver's
/// own error. [`StoreError::is_transient`] tells an HTTP edge whether to answer 5xx
/// (the delivery was not stored; the sender retries) or to treat the failure as a bug
/// or a misconfiguration that a retry cannot fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// A new connection could not be opened (server down or refusing connections,
    /// authentication failed, the setup statements failed, a malformed connection
    /// string).
    #[error("could not open a postgres connection")]
    Connect(#[source] ConnectionError),
    /// No pooled connection became free within the pool timeout.
    #[error("no pooled connection became free within the pool timeout")]
    PoolTimeout,
    /// The pool is closed or misconfigured.
    #[error("the connection pool failed")]
    Pool(#[source] BoxError),
    /// A statement waited longer than the store's `lock_timeout` for a row lock,
    /// usually because another transaction holding the same key is stuck (SQLSTATE
    /// 55P03). Transient: the delivery was not stored.
    #[error("a row lock was not granted within the lock timeout")]
    LockTimeout(#[source] DieselError),
    /// A statement failed; see [`StoreError::is_transient`] for whether a retry may help.
    #[error("a postgres statement failed")]
    Query(#[source] DieselError),
    /// A statement inside the transaction failed, yet the side effect returned `Ok`
    /// (it swallowed the error). PostgreSQL would have answered the `COMMIT` with a
    /// silent rollback, so the store rolled back and reports it instead of reporting
    /// the delivery as applied. Not transient: return the statement's error from
    /// the side effect.
    #[error(
        "a statement failed inside the transaction but the side effect returned ok; rolled back"
    )]
    StatementFailed,
    /// Applying the embedded migrations failed.
    #[error("applying the hookbox migrations failed")]
    Migration(#[source] BoxError),
    /// An inbox row holds headers this crate cannot read back (edited by hand, or
    /// written by an incompatible version).
    #[error("inbox row {id} holds unreadable headers")]
    Corrupt {
        /// The inbox row's id.
        id: i64,
        /// What could not be read.
        #[source]
        source: BoxError,
    },
    /// An outbox message holds headers that cannot be read back (edited by hand, or
    /// written by an incompatible version); the relay dead-letters it.
    #[error("outbox message {seq} holds unreadable headers")]
    OutboxCorrupt {
        /// The message's row.
        seq: i64,
        /// What could not be read.
        #[source]
        source: BoxError,
    },
    /// Group commit: the writers' queue stayed full for the configured
    /// `queue_timeout`. Nothing was stored; an HTTP edge answers 503 with
    /// `Retry-After`, and the sender retries.
    #[error("the inbox writer is overloaded: its queue stayed full; retry later")]
    Overloaded,
    /// Group commit: the statement that held this delivery failed, so nothing of its
    /// batch was stored.
    #[error("the batch this delivery was written in failed: {reason}")]
    BatchFailed {
        /// Whether the batch's error was transient (a lost connection, a timeout).
        transient: bool,
        /// The batch's error, with its causes.
        reason: String,
    },
    /// The schema name given to [`PgOptions::with_schema`](crate::PgOptions::with_schema) is not
    /// a plain identifier.
    #[error(
        "invalid schema name {name:?}: use ASCII letters, digits and underscores, not starting with a digit"
    )]
    InvalidSchema {
        /// The rejected name.
        name: String,
    },
    /// The connection string's `sslmode` is none of the values this crate knows
    /// (libpq's `allow` included, which it does not support). Not transient.
    #[error("invalid sslmode {value:?}: use {}", SslMode::ALLOWED)]
    InvalidSslMode {
        /// The rejected value.
        value: String,
    },
    /// The TLS settings cannot work: a root certificate file that cannot be read,
    /// PEM without a certificate, `sslrootcert=system` with a mode weaker than
    /// `verify-full`. Reported by [`PgStore::connect`](crate::PgStore::connect)
    /// before any connection is opened. Not transient.
    #[error("invalid TLS settings: {reason}")]
    TlsSettings {
        /// What is wrong.
        reason: String,
        /// The underlying error (an I/O or PEM error), if any.
        #[source]
        source: Option<BoxError>,
    },
    /// `sslmode` is `require`, `verify-ca` or `verify-full` and the server answered
    /// that it does not support TLS: the connection was closed before anything was
    /// sent in plain text. Not transient: turn TLS on at the server (`ssl = on`) or
    /// change `sslmode`.
    #[error("the server does not support TLS but sslmode={sslmode}")]
    TlsNotSupported {
        /// The connection string's mode.
        sslmode: SslMode,
    },
    /// The server's TLS certificate was refused (`verify-ca`, `verify-full`, or
    /// `require` with a root certificate): not signed by a trusted root, not valid for
    /// the host name, expired. Not transient.
    #[error("the postgres server's TLS certificate was refused (sslmode={sslmode}): {reason}")]
    TlsCertificate {
        /// The host name the certificate was checked for (as in the connection string).
        host: String,
        /// The connection string's mode.
        sslmode: SslMode,
        /// Why, in a line ("certificate not valid for host \"db\"; it is valid for …").
        reason: String,
        /// rustls's error.
        #[source]
        source: BoxError,
    },
    /// The TLS handshake failed for another reason than the certificate (no common
    /// protocol version or cipher suite, an alert from the server). Not transient.
    #[error("the TLS handshake with the postgres server {host:?} failed")]
    TlsHandshake {
        /// The host name connected to.
        host: String,
        /// rustls's error.
        #[source]
        source: BoxError,
    },
}

impl PgError {
    /// Wraps a statement error, picking out lock timeouts.
    pub(crate) fn query(err: DieselError) -> Self {
        if is_lock_timeout(&err) {
            Self::LockTimeout(err)
        } else {
            Self::Query(err)
        }
    }

    /// Returns `true` when the error says the connection itself is unusable, so the
    /// pool must not hand it out again.
    pub(crate) fn breaks_connection(&self) -> bool {
        match self {
            Self::Query(err) | Self::LockTimeout(err) => connection_lost(err),
            _ => false,
        }
    }
}

/// Lets a side effect that uses this error type write `?` after a diesel call; a lock
/// timeout becomes [`PgError::LockTimeout`], anything else [`PgError::Query`].
impl PgError {
    /// The error every caller of a failed batch gets: this one's text and
    /// transient classification (a diesel error cannot be cloned).
    pub(crate) fn for_batch(&self) -> Self {
        Self::BatchFailed {
            transient: self.is_transient(),
            reason: hookbox_core::error_chain(self),
        }
    }
}

impl From<UnknownSslMode> for PgError {
    fn from(err: UnknownSslMode) -> Self {
        Self::InvalidSslMode { value: err.value }
    }
}

// here rather than beside `SslMode` (whose file imports nothing of this crate), as
// its error is the store's
impl FromStr for SslMode {
    type Err = PgError;

    /// Parses a connection string's value: [`PgError::InvalidSslMode`] names the
    /// allowed values for anything else (`allow` included).
    fn from_str(value: &str) -> Result<Self, PgError> {
        Ok(Self::from_name(value)?)
    }
}

impl From<DieselError> for PgError {
    fn from(err: DieselError) -> Self {
        Self::query(err)
    }
}

impl StoreError for PgError {
    fn is_transient(&self) -> bool {
        match self {
            Self::Connect(err) => connection_error_is_transient(err),
            Self::PoolTimeout | Self::LockTimeout(_) | Self::Overloaded => true,
            Self::BatchFailed { transient, .. } => *transient,
            Self::Query(err) => query_error_is_transient(err),
            Self::Pool(_)
            | Self::StatementFailed
            | Self::Migration(_)
            | Self::Corrupt { .. }
            | Self::OutboxCorrupt { .. }
            | Self::InvalidSchema { .. }
            // a retry meets the same server, certificate and settings
            | Self::InvalidSslMode { .. }
            | Self::TlsSettings { .. }
            | Self::TlsNotSupported { .. }
            | Self::TlsCertificate { .. }
            | Self::TlsHandshake { .. } => false,
        }
    }
}

// shared with the other diesel store: the operator queries' boxing and what ends a
// transaction that runs user code
pub(crate) use hookbox_diesel_shared::{TxError, boxed_any};

// diesel-async 0.9 maps only a few SQLSTATEs to a `DatabaseErrorKind` and keeps the
// server's message for the others (lock timeout 55P03, deadlock 40P01, shutdown 57P0x
// all arrive as `Unknown`), so those are recognised by the server's message. The store
// asks for untranslated messages on each connection (`lc_messages = 'C'`, where the
// role may set it); a server that sends translated messages makes these errors
// non-transient `Query` errors instead, never the other way round.
const LOCK_TIMEOUT: &[&str] = &[
    "canceling statement due to lock timeout",
    "could not obtain lock on",
];
const TRANSIENT_MESSAGES: &[&str] = &[
    // 40P01 deadlock_detected
    "deadlock detected",
    // 57P01 admin_shutdown, 57P02 crash_shutdown
    "terminating connection due to administrator command",
    "terminating connection because of crash of another server process",
    "terminating connection due to conflict with recovery",
    // 57P03 cannot_connect_now
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "the database system is not accepting connections",
    // 53300 too_many_connections
    "too many clients already",
    "remaining connection slots are reserved",
    // 57014 query_canceled (statement_timeout, pg_cancel_backend)
    "canceling statement due to statement timeout",
    "canceling statement due to user request",
    // 40001 when the driver did not classify it
    "could not serialize access",
];

fn message(err: &DieselError) -> Option<&str> {
    match err {
        DieselError::DatabaseError(_, info) => Some(info.message()),
        _ => None,
    }
}

fn is_lock_timeout(err: &DieselError) -> bool {
    message(err).is_some_and(|m| LOCK_TIMEOUT.iter().any(|needle| m.contains(needle)))
}

/// The connection is gone or in an unknown state.
fn connection_lost(err: &DieselError) -> bool {
    match err {
        DieselError::DatabaseError(
            DatabaseErrorKind::UnableToSendCommand | DatabaseErrorKind::ClosedConnection,
            _,
        )
        | DieselError::BrokenTransactionManager => true,
        DieselError::DatabaseError(_, info) => {
            let m = info.message();
            m.starts_with("terminating connection")
        }
        DieselError::RollbackErrorOnCommit { rollback_error, .. } => {
            connection_lost(rollback_error)
        }
        _ => false,
    }
}

fn query_error_is_transient(err: &DieselError) -> bool {
    match err {
        // errors without a SQLSTATE: the socket closed, the connection was refused or reset
        DieselError::DatabaseError(
            DatabaseErrorKind::UnableToSendCommand
            | DatabaseErrorKind::ClosedConnection
            | DatabaseErrorKind::SerializationFailure
            // 25006: a failover left this connection on a read-only standby
            | DatabaseErrorKind::ReadOnlyTransaction,
            _,
        )
        | DieselError::BrokenTransactionManager => true,
        DieselError::DatabaseError(_, info) => {
            let m = info.message();
            LOCK_TIMEOUT
                .iter()
                .chain(TRANSIENT_MESSAGES)
                .any(|needle| m.contains(needle))
        }
        DieselError::RollbackErrorOnCommit { commit_error, .. } => {
            query_error_is_transient(commit_error)
        }
        _ => false,
    }
}

fn connection_error_is_transient(err: &ConnectionError) -> bool {
    match err {
        // tokio-postgres reports refused, reset and closed sockets here
        ConnectionError::BadConnection(_) => true,
        ConnectionError::CouldntSetupConfiguration(inner) => query_error_is_transient(inner),
        // a bad URL, a NUL byte, or a variant added later: retrying the same call cannot help
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use diesel::result::DatabaseErrorInformation;

    #[derive(Debug)]
    struct Info(&'static str);

    impl DatabaseErrorInformation for Info {
        fn message(&self) -> &str {
            self.0
        }
        fn details(&self) -> Option<&str> {
            None
        }
        fn hint(&self) -> Option<&str> {
            None
        }
        fn table_name(&self) -> Option<&str> {
            None
        }
        fn column_name(&self) -> Option<&str> {
            None
        }
        fn constraint_name(&self) -> Option<&str> {
            None
        }
        fn statement_position(&self) -> Option<i32> {
            None
        }
    }

    fn db(kind: DatabaseErrorKind, message: &'static str) -> DieselError {
        DieselError::DatabaseError(kind, Box::new(Info(message)))
    }

    #[test]
    fn lock_timeout_is_typed_and_transient() {
        let err = PgError::query(db(
            DatabaseErrorKind::Unknown,
            "canceling statement due to lock timeout",
        ));
        assert!(matches!(err, PgError::LockTimeout(_)));
        assert!(err.is_transient());
    }

    #[test]
    fn server_and_connection_failures_are_transient() {
        for (kind, message) in [
            (DatabaseErrorKind::Unknown, "deadlock detected"),
            (
                DatabaseErrorKind::Unknown,
                "terminating connection due to administrator command",
            ),
            (
                DatabaseErrorKind::SerializationFailure,
                "could not serialize access due to concurrent update",
            ),
            (DatabaseErrorKind::UnableToSendCommand, "connection closed"),
            (
                DatabaseErrorKind::Unknown,
                "the database system is starting up",
            ),
        ] {
            let err = PgError::query(db(kind, message));
            assert!(err.is_transient(), "{message}");
        }
        let refused = ConnectionError::CouldntSetupConfiguration(db(
            DatabaseErrorKind::UnableToSendCommand,
            "error connecting to server: Connection refused (os error 111)",
        ));
        assert!(PgError::Connect(refused).is_transient());
        assert!(PgError::PoolTimeout.is_transient());
    }

    #[test]
    fn constraint_and_syntax_errors_are_not_transient() {
        for (kind, message) in [
            (
                DatabaseErrorKind::UniqueViolation,
                "duplicate key value violates unique constraint",
            ),
            (
                DatabaseErrorKind::CheckViolation,
                "violates check constraint",
            ),
            (
                DatabaseErrorKind::Unknown,
                "syntax error at or near \"SELEC\"",
            ),
            (
                DatabaseErrorKind::Unknown,
                "relation \"hookbox_inbox\" does not exist",
            ),
        ] {
            assert!(
                !PgError::query(db(kind, message)).is_transient(),
                "{message}"
            );
        }
        let auth = ConnectionError::CouldntSetupConfiguration(db(
            DatabaseErrorKind::Unknown,
            "password authentication failed for user \"app\"",
        ));
        assert!(!PgError::Connect(auth).is_transient());
        assert!(!PgError::InvalidSchema { name: "a;b".into() }.is_transient());
    }

    #[test]
    fn a_lost_connection_is_not_reused() {
        let err = PgError::query(db(DatabaseErrorKind::UnableToSendCommand, "closed"));
        assert!(err.breaks_connection());
        let err = PgError::query(db(DatabaseErrorKind::Unknown, "deadlock detected"));
        assert!(!err.breaks_connection());
    }
}
