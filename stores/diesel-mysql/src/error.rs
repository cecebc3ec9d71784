//! The store's error type and its transient/permanent classification, and the error
//! of a transaction that runs user code.

use std::str::FromStr;

use diesel::result::{ConnectionError, DatabaseErrorKind, Error as DieselError};
use hookbox_core::StoreError;

use crate::tls::mode::{SslMode, UnknownSslMode};

/// A boxed error, for causes whose type belongs to a library we do not re-export.
type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a [`MysqlStore`](crate::MysqlStore) call failed.
///
/// Every variant keeps its cause: walk [`std::error::Error::source`] for the driver's
/// own error. [`StoreError::is_transient`] tells an HTTP edge whether to answer 5xx
/// (the delivery was not stored; the sender retries) or to treat the failure as a bug
/// or a misconfiguration that a retry cannot fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MysqlError {
    /// A new connection could not be opened (server down or refusing connections,
    /// authentication failed, the setup statements failed, a malformed URL).
    #[error("could not open a mysql connection")]
    Connect(#[source] ConnectionError),
    /// No pooled connection became free within the pool timeout.
    #[error("no pooled connection became free within the pool timeout")]
    PoolTimeout,
    /// The pool is closed or misconfigured.
    #[error("the connection pool failed")]
    Pool(#[source] BoxError),
    /// A statement waited longer than the store's lock timeout
    /// (`innodb_lock_wait_timeout`) for a row lock, usually because another
    /// transaction holding the same key is stuck (error 1205). InnoDB rolled back
    /// that statement only. Transient: the delivery was not stored.
    #[error("a row lock was not granted within the lock timeout")]
    LockTimeout(#[source] DieselError),
    /// A statement failed; see [`StoreError::is_transient`] for whether a retry may help.
    #[error("a mysql statement failed")]
    Query(#[source] DieselError),
    /// A statement inside the transaction failed, yet the side effect returned `Ok`
    /// (it swallowed the error). A deadlock (error 1213) rolls the whole transaction
    /// back, the claimed key with it, and what follows would commit on its own; the
    /// store therefore rolls back and reports it instead of reporting the delivery as
    /// applied. Not transient: return the statement's error from the side effect.
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
    /// The URL's `ssl-mode` is none of the values this crate knows. Not transient.
    #[error("invalid ssl-mode {value:?}: use {}", SslMode::ALLOWED)]
    InvalidSslMode {
        /// The rejected value.
        value: String,
    },
    /// The TLS settings cannot work: a CA file that cannot be read, PEM without a
    /// certificate, the driver's own TLS parameters (`require_ssl`, `verify_ca`, …)
    /// beside `ssl-mode`. Reported by [`MysqlStore::connect`](crate::MysqlStore::connect)
    /// before any connection is opened. Not transient.
    #[error("invalid TLS settings: {reason}")]
    TlsSettings {
        /// What is wrong.
        reason: String,
        /// The underlying error (an I/O or PEM error), if any.
        #[source]
        source: Option<BoxError>,
    },
    /// `ssl-mode` is `REQUIRED`, `VERIFY_CA` or `VERIFY_IDENTITY` and the server
    /// does not offer TLS: the connection was closed before the login was sent.
    /// Not transient: turn TLS on at the server (`ssl_cert`, `ssl_key`) or change
    /// `ssl-mode`.
    #[error("the server does not support TLS but ssl-mode={ssl_mode}")]
    TlsNotSupported {
        /// The URL's mode.
        ssl_mode: SslMode,
    },
    /// The server's TLS certificate was refused (`VERIFY_CA`, `VERIFY_IDENTITY`, or
    /// `REQUIRED` with a CA): not signed by a trusted root, not valid for the host
    /// name, expired. Not transient.
    #[error("the mysql server's TLS certificate was refused (ssl-mode={ssl_mode}): {reason}")]
    TlsCertificate {
        /// The host name the certificate was checked for (as in the URL).
        host: String,
        /// The URL's mode.
        ssl_mode: SslMode,
        /// Why, in a line ("certificate not valid for host \"db\"", …).
        reason: String,
        /// rustls's error.
        #[source]
        source: BoxError,
    },
    /// The TLS handshake failed for another reason than the certificate (no common
    /// protocol version or cipher suite, an alert from the server). Not transient.
    #[error("the TLS handshake with the mysql server {host:?} failed")]
    TlsHandshake {
        /// The host name connected to.
        host: String,
        /// The driver's error.
        #[source]
        source: BoxError,
    },
}

impl MysqlError {
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

    /// The error every caller of a failed batch gets: this one's text and
    /// transient classification (a diesel error cannot be cloned).
    pub(crate) fn for_batch(&self) -> Self {
        Self::BatchFailed {
            transient: self.is_transient(),
            reason: hookbox_core::error_chain(self),
        }
    }
}

impl From<UnknownSslMode> for MysqlError {
    fn from(err: UnknownSslMode) -> Self {
        Self::InvalidSslMode { value: err.value }
    }
}

// here rather than beside `SslMode` (whose file imports nothing of this crate), as
// its error is the store's
impl FromStr for SslMode {
    type Err = MysqlError;

    /// Parses a URL's value, in any case (`REQUIRED`, `required`):
    /// [`MysqlError::InvalidSslMode`] names the allowed values for anything else.
    fn from_str(value: &str) -> Result<Self, MysqlError> {
        Ok(Self::from_name(value)?)
    }
}

/// Lets a side effect that uses this error type write `?` after a diesel call; a lock
/// timeout becomes [`MysqlError::LockTimeout`], anything else [`MysqlError::Query`].
impl From<DieselError> for MysqlError {
    fn from(err: DieselError) -> Self {
        Self::query(err)
    }
}

impl StoreError for MysqlError {
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

/// Returns `true` for the server's duplicate-key error (1062, and 1586/1859 for
/// other unique keys): the one failure a claim, a receive or a stage expects.
pub(crate) fn is_duplicate_key(err: &DieselError) -> bool {
    matches!(
        err,
        DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _)
    )
}

// diesel-async 0.9 maps only a few MySQL error codes to a `DatabaseErrorKind` (1062
// to `UniqueViolation`, 1792 to `ReadOnlyTransaction`, …) and keeps the server's
// message for the others, without the code; driver errors (a closed socket, an I/O
// error) arrive as `Unknown` with mysql_async's text. Those are recognised by the
// message. The store asks each connection for English messages (`lc_messages =
// 'en_US'`, a session variable any user may set), so the server's language does not
// change the classification.
const LOCK_TIMEOUT: &[&str] = &[
    // 1205 ER_LOCK_WAIT_TIMEOUT
    "Lock wait timeout exceeded",
];
const TRANSIENT_MESSAGES: &[&str] = &[
    // 1213 ER_LOCK_DEADLOCK (also a Galera certification failure)
    "Deadlock found when trying to get lock",
    // 1040 ER_CON_COUNT_ERROR
    "Too many connections",
    // 1053 ER_SERVER_SHUTDOWN
    "Server shutdown in progress",
    // 1927 ER_CONNECTION_KILLED (MariaDB), 1317 ER_QUERY_INTERRUPTED
    "Connection was killed",
    "Query execution was interrupted",
    // 1290 ER_OPTION_PREVENTS_STATEMENT: a failover left this connection on a
    // read-only replica
    "--read-only option",
    "--super-read-only option",
    // 1020 ER_CHECKREAD (MariaDB's innodb_snapshot_isolation)
    "Record has changed since last read",
    // 1047 ER_UNKNOWN_COM_ERROR from a Galera node that left the cluster
    "WSREP has not yet prepared node",
];
/// mysql_async's words for a connection that is gone.
const CONNECTION_LOST: &[&str] = &[
    "Input/output error",
    "Connection to the server is closed",
    "Connection was killed",
    "Server shutdown in progress",
    "Lost connection to",
    "server has gone away",
    "Packet out of order",
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
            CONNECTION_LOST.iter().any(|needle| m.contains(needle))
        }
        DieselError::RollbackErrorOnCommit { rollback_error, .. } => {
            connection_lost(rollback_error)
        }
        _ => false,
    }
}

fn query_error_is_transient(err: &DieselError) -> bool {
    match err {
        DieselError::DatabaseError(
            DatabaseErrorKind::UnableToSendCommand
            | DatabaseErrorKind::ClosedConnection
            | DatabaseErrorKind::SerializationFailure
            // 1792: a failover left this connection on a read-only replica
            | DatabaseErrorKind::ReadOnlyTransaction,
            _,
        )
        | DieselError::BrokenTransactionManager => true,
        DieselError::DatabaseError(_, info) => {
            let m = info.message();
            LOCK_TIMEOUT
                .iter()
                .chain(TRANSIENT_MESSAGES)
                .chain(CONNECTION_LOST)
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
        // mysql_async's refused, reset and closed sockets, and its driver errors
        ConnectionError::BadConnection(_) => true,
        ConnectionError::CouldntSetupConfiguration(inner) => query_error_is_transient(inner),
        // a bad URL, or a variant added later: retrying the same call cannot help
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(kind: DatabaseErrorKind, message: &'static str) -> DieselError {
        DieselError::DatabaseError(kind, Box::new(message.to_string()))
    }

    #[test]
    fn lock_timeout_is_typed_and_transient() {
        let err = MysqlError::query(db(
            DatabaseErrorKind::Unknown,
            "Lock wait timeout exceeded; try restarting transaction",
        ));
        assert!(matches!(err, MysqlError::LockTimeout(_)));
        assert!(err.is_transient());
    }

    #[test]
    fn server_and_connection_failures_are_transient() {
        for (kind, message) in [
            (
                DatabaseErrorKind::Unknown,
                "Deadlock found when trying to get lock; try restarting transaction",
            ),
            (DatabaseErrorKind::Unknown, "Server shutdown in progress"),
            (
                DatabaseErrorKind::Unknown,
                "Input/output error: Input/output error: broken pipe",
            ),
            (
                DatabaseErrorKind::Unknown,
                "Driver error: `Connection to the server is closed.'",
            ),
            (DatabaseErrorKind::ReadOnlyTransaction, "read only"),
            (
                DatabaseErrorKind::Unknown,
                "The MariaDB server is running with the --read-only option so it cannot execute this statement",
            ),
        ] {
            let err = MysqlError::query(db(kind, message));
            assert!(err.is_transient(), "{message}");
        }
        let refused = ConnectionError::BadConnection("Connection refused (os error 111)".into());
        assert!(MysqlError::Connect(refused).is_transient());
        let busy = ConnectionError::CouldntSetupConfiguration(db(
            DatabaseErrorKind::Unknown,
            "Too many connections",
        ));
        assert!(MysqlError::Connect(busy).is_transient());
        assert!(MysqlError::PoolTimeout.is_transient());
    }

    #[test]
    fn constraint_and_syntax_errors_are_not_transient() {
        for (kind, message) in [
            (
                DatabaseErrorKind::UniqueViolation,
                "Duplicate entry 'a' for key 'PRIMARY'",
            ),
            (
                DatabaseErrorKind::Unknown,
                "You have an error in your SQL syntax",
            ),
            (
                DatabaseErrorKind::Unknown,
                "Table 'test.hookbox_inbox' doesn't exist",
            ),
            (
                DatabaseErrorKind::Unknown,
                "Data too long for column 'delivery_id' at row 1",
            ),
        ] {
            assert!(
                !MysqlError::query(db(kind, message)).is_transient(),
                "{message}"
            );
        }
        let auth = ConnectionError::CouldntSetupConfiguration(db(
            DatabaseErrorKind::Unknown,
            "Access denied for user 'app'@'localhost' (using password: YES)",
        ));
        assert!(!MysqlError::Connect(auth).is_transient());
    }

    #[test]
    fn a_lost_connection_is_not_reused() {
        let err = MysqlError::query(db(
            DatabaseErrorKind::Unknown,
            "Input/output error: Input/output error: connection reset",
        ));
        assert!(err.breaks_connection());
        let err = MysqlError::query(db(
            DatabaseErrorKind::Unknown,
            "Deadlock found when trying to get lock; try restarting transaction",
        ));
        assert!(!err.breaks_connection());
        assert!(is_duplicate_key(&db(
            DatabaseErrorKind::UniqueViolation,
            "Duplicate entry"
        )));
    }
}
