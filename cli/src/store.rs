//! Opening a store from one `--store` value: a SQLite file path (or `sqlite://path`),
//! a `postgres://` URL or a `mysql://` URL (MySQL or MariaDB).
//!
//! [`Location::parse`] is the one place that tells them apart; [`open_admin`]
//! opens the operator's view of either's inbox as a `Box<dyn InboxAdmin>`,
//! [`open_outbox_admin`] of its outbox as a `Box<dyn OutboxAdmin>`, and
//! [`open_console_store`] both as one `Box<dyn ConsoleStore>`.

use std::path::{Path, PathBuf};

use hookbox_console::ConsoleStore;
use hookbox_core::{InboxAdmin, OutboxAdmin, RetentionPolicy};
use hookbox_diesel_mysql::{MysqlError, MysqlOptions, MysqlStore};
use hookbox_diesel_pg::{PgError, PgOptions, PgStore};
use hookbox_sqlite::{SqliteError, SqliteOptions, SqliteStore};

/// Where a store lives, as a `--store` value names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location<'a> {
    /// A `postgres://` or `postgresql://` URL.
    Postgres(&'a str),
    /// A `mysql://` or `mariadb://` URL.
    Mysql(&'a str),
    /// A SQLite file path, without the `sqlite://` prefix it may have been given with.
    Sqlite(&'a Path),
}

impl<'a> Location<'a> {
    /// Reads a `--store` value: a `postgres://` or `postgresql://` URL is Postgres,
    /// a `mysql://` or `mariadb://` URL MySQL, anything else a SQLite file path (a
    /// leading `sqlite://` is dropped).
    ///
    /// # Examples
    /// ```
    /// use std::path::Path;
    /// use hookbox_cli::store::Location;
    ///
    /// assert_eq!(
    ///     Location::parse("postgres://postgres@127.0.0.1/test"),
    ///     Location::Postgres("postgres://postgres@127.0.0.1/test")
    /// );
    /// assert_eq!(
    ///     Location::parse("mysql://root@127.0.0.1:3306/test"),
    ///     Location::Mysql("mysql://root@127.0.0.1:3306/test")
    /// );
    /// assert_eq!(Location::parse("sqlite://hookbox.db"), Location::Sqlite(Path::new("hookbox.db")));
    /// assert_eq!(Location::parse("hookbox.db"), Location::Sqlite(Path::new("hookbox.db")));
    /// ```
    pub fn parse(store: &'a str) -> Self {
        if store.starts_with("postgres://") || store.starts_with("postgresql://") {
            Self::Postgres(store)
        } else if store.starts_with("mysql://") || store.starts_with("mariadb://") {
            Self::Mysql(store)
        } else {
            Self::Sqlite(Path::new(store.strip_prefix("sqlite://").unwrap_or(store)))
        }
    }

    /// Returns `true` for a Postgres URL.
    pub fn is_postgres(&self) -> bool {
        matches!(self, Self::Postgres(_))
    }
}

/// Why [`open_admin`] could not open a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The SQLite file does not exist (an operator command never creates one).
    #[error("no SQLite file at {}", .0.display())]
    NoSqliteFile(PathBuf),
    /// The SQLite store failed to open.
    #[error(transparent)]
    Sqlite(#[from] SqliteError),
    /// The Postgres store failed to connect.
    #[error(transparent)]
    Postgres(#[from] PgError),
    /// The MySQL store failed to connect.
    #[error(transparent)]
    Mysql(#[from] MysqlError),
}

/// Opens the operator's view of the inbox of the store `store` names (see
/// [`Location::parse`]), with `retention` as its retention policy (what a purge
/// deletes).
///
/// `schema` is the Postgres schema the store's tables live in (the search path when
/// `None`); a SQLite file has none and ignores it. Nothing is migrated: an operator
/// command never changes the schema. A Postgres store gets a pool of two
/// connections, enough for one command.
///
/// # Errors
/// [`OpenError::NoSqliteFile`] for a SQLite path with no file; the store's own error
/// when it cannot be opened or reached.
pub async fn open_admin(
    store: &str,
    schema: Option<&str>,
    retention: RetentionPolicy,
) -> Result<Box<dyn InboxAdmin>, OpenError> {
    open(
        store,
        schema,
        retention,
        |pg| Box::new(pg) as Box<dyn InboxAdmin>,
        |mysql| Box::new(mysql),
        |sqlite| Box::new(sqlite),
    )
    .await
}

/// Opens the operator's view of the outbox of the store `store` names, as
/// [`open_admin`] does for the inbox.
///
/// # Errors
/// As [`open_admin`].
pub async fn open_outbox_admin(
    store: &str,
    schema: Option<&str>,
    retention: RetentionPolicy,
) -> Result<Box<dyn OutboxAdmin>, OpenError> {
    open(
        store,
        schema,
        retention,
        |pg| Box::new(pg) as Box<dyn OutboxAdmin>,
        |mysql| Box::new(mysql),
        |sqlite| Box::new(sqlite),
    )
    .await
}

/// Opens both operator views of the store `store` names as one value, for
/// `hookbox console`, as [`open_admin`] opens the inbox's.
///
/// # Errors
/// As [`open_admin`].
pub async fn open_console_store(
    store: &str,
    schema: Option<&str>,
    retention: RetentionPolicy,
) -> Result<Box<dyn ConsoleStore>, OpenError> {
    open(
        store,
        schema,
        retention,
        |pg| Box::new(pg) as Box<dyn ConsoleStore>,
        |mysql| Box::new(mysql),
        |sqlite| Box::new(sqlite),
    )
    .await
}

/// Opens the store `store` names and hands it to the matching conversion.
async fn open<T>(
    store: &str,
    schema: Option<&str>,
    retention: RetentionPolicy,
    postgres: impl FnOnce(PgStore) -> T,
    mysql: impl FnOnce(MysqlStore) -> T,
    sqlite: impl FnOnce(SqliteStore) -> T,
) -> Result<T, OpenError> {
    match Location::parse(store) {
        Location::Postgres(url) => {
            let mut options = PgOptions::new()
                .with_max_connections(2)
                .with_retention(retention);
            if let Some(schema) = schema {
                options = options.with_schema(schema);
            }
            Ok(postgres(PgStore::connect(url, options).await?))
        }
        // MySQL has no schemas apart from databases: the URL's database is the one
        Location::Mysql(url) => {
            let options = MysqlOptions::new()
                .with_max_connections(2)
                .with_retention(retention);
            Ok(mysql(MysqlStore::connect(url, options).await?))
        }
        Location::Sqlite(path) => {
            if !path.exists() {
                return Err(OpenError::NoSqliteFile(path.to_path_buf()));
            }
            let options = SqliteOptions::default().with_retention(retention);
            Ok(sqlite(SqliteStore::open(path, options).await?))
        }
    }
}
