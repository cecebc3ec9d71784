//! How the server mode replays the stream: [`SimOptions`] and its defaults.

use std::path::PathBuf;
use std::time::Duration;

/// The default pause at the script's `await io()`: long enough that two copies
/// dispatched together both finish their check before either writes, as when a real
/// receiver parses, verifies or calls out between the two.
pub const DEFAULT_IO_DELAY: Duration = Duration::from_millis(1);

/// The default number of concurrent workers.
pub const DEFAULT_WORKERS: usize = 4;

/// How [`run`](super::run) replays the stream on a server.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// The server: `postgres://user[:password]@host[:port]/database` (each handler and
    /// crash design gets a fresh schema in that database, dropped at the end) or
    /// `mysql://…` / `mariadb://…` (a fresh database on that server each, dropped at
    /// the end).
    pub url: String,
    /// Concurrent workers (at least 2, so that concurrent copies can meet): tasks with
    /// a connection each for the handlers, processes for the crash test.
    pub workers: usize,
    /// The pause at the script's `await io()`: in (b) between the check and the
    /// write, in (c)/(d) before the transaction (never inside it).
    pub io_delay: Duration,
    /// The binary that serves as a crash-test worker when run as
    /// `<worker_exe> sim-worker …` (see [`run_worker`](super::run_worker)); the CLI passes itself.
    pub worker_exe: PathBuf,
    /// Replays only the first `n` events of the stream (and of the crash test's
    /// 2,000), for a quick run in tests; `None` replays everything.
    pub events: Option<usize>,
}

impl SimOptions {
    /// Options with the defaults: [`DEFAULT_WORKERS`], [`DEFAULT_IO_DELAY`], the
    /// whole stream.
    pub fn new(url: impl Into<String>, worker_exe: impl Into<PathBuf>) -> Self {
        Self {
            url: url.into(),
            workers: DEFAULT_WORKERS,
            io_delay: DEFAULT_IO_DELAY,
            worker_exe: worker_exe.into(),
            events: None,
        }
    }
}
