//! Opening a connection: the path check, the `PRAGMA`s every connection runs, and
//! the switch to WAL mode, for the pool's async connections and for a plain sync
//! one alike.

use std::path::Path;
use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection as _;
use diesel::sql_types::Text;
use diesel::sqlite::SqliteConnection;
use diesel::{Connection as _, ConnectionError, QueryableByName, RunQueryDsl as _};
use diesel_async::AsyncConnection as _;

use crate::error::SqliteError;
use crate::options::SqliteOptions;
use crate::runner::StatementRunner;

/// The connection a side effect or handler runs on, inside the store's transaction.
///
/// Its statements run on tokio's blocking pool, except inside the worker's batch,
/// where they run on the worker's own thread ([`StatementRunner`]).
pub type Conn = diesel_async::sync_connection_wrapper::SyncConnectionWrapper<
    diesel::SqliteConnection,
    StatementRunner,
>;

/// Checks that `path` names a file SQLite can share between connections.
pub(crate) fn file_url(path: &Path) -> Result<&str, SqliteError> {
    let url = path
        .to_str()
        .ok_or(SqliteError::Config("the database path is not valid UTF-8"))?;
    if url.is_empty() || url.contains(":memory:") || url.contains("mode=memory") {
        return Err(SqliteError::Config(
            "an in-memory database is private to one connection and lost with it; use a file",
        ));
    }
    Ok(url)
}

/// Opens a connection to the database at `path` set up as the store's pool sets up
/// each of its own: `busy_timeout`, `journal_mode = WAL`, `synchronous`,
/// `foreign_keys = ON`. The schema is not touched: call
/// [`migrate`](crate::blocking::migrate).
///
/// # Errors
/// [`SqliteError::Config`] for an in-memory database or a path that is not UTF-8;
/// [`SqliteError::Connect`] when the file cannot be opened or refuses WAL mode.
pub fn connect(
    path: impl AsRef<Path>,
    options: &SqliteOptions,
) -> Result<SqliteConnection, SqliteError> {
    let url = file_url(path.as_ref())?;
    let mut conn = SqliteConnection::establish(url).map_err(SqliteError::Connect)?;
    set_up(&mut conn, options)
        .map_err(|err| SqliteError::Connect(ConnectionError::CouldntSetupConfiguration(err)))?
        .map_err(SqliteError::Connect)?;
    Ok(conn)
}

/// Opens one of the pool's connections and runs the `PRAGMA`s on it (on the
/// blocking pool, like every statement of the wrapper).
pub(crate) async fn connect_async(
    url: String,
    options: SqliteOptions,
) -> diesel::ConnectionResult<Conn> {
    let mut conn = Conn::establish(&url).await?;
    conn.spawn_blocking(move |conn: &mut SqliteConnection| set_up(conn, &options))
        .await
        .map_err(ConnectionError::CouldntSetupConfiguration)??;
    Ok(conn)
}

/// Runs the store's `PRAGMA`s on a new connection. The outer error is a failed
/// statement; the inner one a file that refused WAL mode.
fn set_up(
    conn: &mut SqliteConnection,
    options: &SqliteOptions,
) -> diesel::QueryResult<Result<(), ConnectionError>> {
    // the busy timeout first, so that switching to WAL waits for a lock rather than
    // failing while another process is writing
    conn.batch_execute(&options.busy_timeout_pragma())?;
    let mode = switch_to_wal(conn, options.busy_timeout)?;
    conn.batch_execute(&format!(
        "PRAGMA synchronous = {}; PRAGMA foreign_keys = ON;",
        options.synchronous.pragma()
    ))?;
    Ok(if mode.eq_ignore_ascii_case("wal") {
        Ok(())
    } else {
        // e.g. a file system without shared memory: readers would block writers, and
        // the durability documented for this store would not hold
        Err(ConnectionError::BadConnection(format!(
            "sqlite refused WAL mode (journal_mode is {mode})"
        )))
    })
}

#[derive(QueryableByName)]
struct JournalMode {
    #[diesel(sql_type = Text)]
    journal_mode: String,
}

/// Switches the file to WAL, retrying while another connection holds the lock.
///
/// SQLite answers "database is locked" to `journal_mode = WAL` without calling the
/// busy handler when another connection is converting the same new file at that
/// moment (several processes or pool connections opening it at once), so the wait
/// the busy timeout promises is done here, bounded by the same timeout.
fn switch_to_wal(conn: &mut SqliteConnection, timeout: Duration) -> diesel::QueryResult<String> {
    let deadline = Instant::now() + timeout;
    loop {
        match diesel::sql_query("PRAGMA journal_mode = WAL").get_result::<JournalMode>(conn) {
            Ok(mode) => return Ok(mode.journal_mode),
            Err(diesel::result::Error::DatabaseError(_, info))
                if info.message().contains("locked") && Instant::now() < deadline =>
            {
                // never on an async worker thread: a short sleep stalls nobody
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(err) => return Err(err),
        }
    }
}
