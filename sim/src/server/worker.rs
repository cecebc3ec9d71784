//! The crash test's worker process: one delivery at a time, pausing at the crash
//! point (after the dedupe insert, before the side effect) until the parent says
//! go, or kills it.
//!
//! # Protocol
//!
//! One line per message, on the worker's stdin and stdout:
//!
//! | from | line | meaning |
//! |---|---|---|
//! | worker | `ready` | connected to the schema, waiting for deliveries |
//! | parent | `deliver <event id> <account>` | process this delivery |
//! | worker | `dup` | the key was there: acknowledged, nothing applied |
//! | worker | `point` | the key is inserted, the side effect not yet run; waiting |
//! | parent | `go` | run the side effect (and commit) |
//! | worker | `ok` | the side effect is committed |
//! | worker | `error <message>` | the worker failed and exits with status 1 |
//!
//! The parent answers `point` with `go` or with SIGKILL. End of input ends the worker
//! (status 0).

use std::fmt;
use std::io;
use std::str::FromStr;

use hookbox_core::{DedupeKey, IdempotencyStore as _, ProcessError, Processed};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines, Stdin, Stdout};

use super::backend::{Backend, SimConn as _};
use super::mysql::Mysql;
use super::pg::Postgres;
use super::{Server, server};
use crate::error::failed;
use crate::table::crash_label;

/// The subcommand a worker binary runs the worker under: the parent starts
/// `<worker_exe> sim-worker --schema <schema> --design <split|atomic>` with the
/// server's URL in [`WORKER_URL_ENV`] (and, on MySQL, the database's name as the
/// schema), and that command must call [`run_worker`].
pub const WORKER_SUBCOMMAND: &str = "sim-worker";

/// The environment variable that hands the worker the server's URL: not an argument,
/// so a password in it does not show in the process list.
pub const WORKER_URL_ENV: &str = "HOOKBOX_SIM_WORKER_URL";

/// The two designs of the script's crash test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashDesign {
    /// "insert key, then side effect": the key commits on its own, so a crash
    /// before the side effect loses the event (the retry sees the key).
    Split,
    /// "insert key + side effect, one tx": hookbox's `process_once`, so a crash
    /// rolls the key back with the transaction and the retry applies the event.
    Atomic,
}

impl CrashDesign {
    /// The name on the command line and in schema names: `split` or `atomic`.
    pub fn as_str(self) -> &'static str {
        match self {
            CrashDesign::Split => "split",
            CrashDesign::Atomic => "atomic",
        }
    }

    /// The row label, as in the single-process crash table.
    pub(super) fn label(self) -> &'static str {
        crash_label(self == CrashDesign::Split)
    }
}

impl fmt::Display for CrashDesign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CrashDesign {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "split" => Ok(CrashDesign::Split),
            "atomic" => Ok(CrashDesign::Atomic),
            other => Err(format!("unknown crash design {other:?}: split or atomic")),
        }
    }
}

/// Runs a crash-test worker on this process's stdin and stdout until its input ends
/// (see the protocol in this module's docs). The body of the hidden
/// [`WORKER_SUBCOMMAND`].
///
/// # Errors
/// The server unreachable or failing, a malformed line, the parent gone mid-delivery.
/// The error is also reported to the parent as an `error …` line.
pub fn run_worker(url: &str, schema: &str, design: CrashDesign) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut stdout = tokio::io::stdout();
        let result = match server(url) {
            Ok(Server::Postgres) => serve::<Postgres>(url, schema, design, &mut stdout).await,
            Ok(Server::Mysql) => serve::<Mysql>(url, schema, design, &mut stdout).await,
            Err(err) => Err(err),
        };
        if let Err(err) = &result {
            let line = format!("error {}\n", err.to_string().replace('\n', " "));
            let _ = stdout.write_all(line.as_bytes()).await;
            let _ = stdout.flush().await;
        }
        result
    })
}

async fn serve<B: Backend>(
    url: &str,
    schema: &str,
    design: CrashDesign,
    stdout: &mut Stdout,
) -> io::Result<()> {
    let store = B::store(url, schema, 1).await?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    say(stdout, "ready").await?;
    while let Some(line) = lines.next_line().await? {
        let mut parts = line.split(' ');
        let (Some("deliver"), Some(id), Some(acct), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(protocol(&line));
        };
        let acct: i32 = acct.parse().map_err(|_| protocol(&line))?;
        match design {
            CrashDesign::Split => split::<B>(&store, id, acct, &mut lines, stdout).await?,
            CrashDesign::Atomic => atomic::<B>(&store, id, acct, &mut lines, stdout).await?,
        }
    }
    Ok(())
}

/// The script's split design: `seen`, `mark` (its own commit), the crash point, then
/// the credit and the applied row (autocommit each).
async fn split<B: Backend>(
    store: &B::Store,
    id: &str,
    acct: i32,
    lines: &mut Lines<BufReader<Stdin>>,
    stdout: &mut Stdout,
) -> io::Result<()> {
    let mut conn = B::connection(store).await?;
    let failed = |e: hookbox_diesel_pg::diesel::result::Error| failed("split design", &e);
    if conn.seen(id).await.map_err(failed)? {
        return say(stdout, "dup").await; // already "processed": ack
    }
    conn.mark(id).await.map_err(failed)?; // the key commits on its own
    crash_point(lines, stdout).await?;
    conn.credit(id, acct).await.map_err(failed)?;
    say(stdout, "ok").await
}

/// The atomic design: hookbox's `process_once`; the crash point is the start of the
/// side effect, inside the transaction, right after the key's insert.
async fn atomic<B: Backend>(
    store: &B::Store,
    id: &str,
    acct: i32,
    lines: &mut Lines<BufReader<Stdin>>,
    stdout: &mut Stdout,
) -> io::Result<()> {
    let key = DedupeKey::new("sim-crash", "sim", id);
    let pipe = &mut *stdout;
    let outcome = store
        .process_once(&key, async move |conn: &mut B::Conn| {
            // waiting on the parent here is the crash injection, not a side effect: a
            // real one never awaits outside I/O in the transaction
            crash_point(lines, pipe).await?;
            conn.credit(id, acct)
                .await
                .map_err(|e| failed("atomic design", &e))?;
            Ok(())
        })
        .await;
    match outcome {
        Ok(Processed::Applied(())) => say(stdout, "ok").await,
        Ok(Processed::Duplicate) => say(stdout, "dup").await,
        // the side effect's own I/O error (the parent gone at the crash point), as is
        Err(ProcessError::SideEffect(err)) => Err(match err.into_inner().downcast::<io::Error>() {
            Ok(err) => *err,
            Err(other) => io::Error::other(other),
        }),
        Err(err) => Err(failed("atomic design", &err)),
    }
}

/// Reports the crash point and waits for `go`; the parent may SIGKILL us instead.
async fn crash_point(lines: &mut Lines<BufReader<Stdin>>, stdout: &mut Stdout) -> io::Result<()> {
    say(stdout, "point").await?;
    match lines.next_line().await? {
        Some(line) if line == "go" => Ok(()),
        Some(line) => Err(protocol(&line)),
        None => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the parent closed the pipe at the crash point",
        )),
    }
}

async fn say(stdout: &mut Stdout, line: &str) -> io::Result<()> {
    stdout.write_all(format!("{line}\n").as_bytes()).await?;
    stdout.flush().await
}

fn protocol(line: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unexpected line from the parent: {line:?}"),
    )
}
