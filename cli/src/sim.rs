//! `hookbox sim`: the seed's simulation of webhook receivers under at-least-once
//! delivery, with hookbox's own SQLite store as the correct designs. Its tables match
//! the published output line for line (a test in `hookbox-sim` proves it).
//!
//! `hookbox sim --store postgres://…` (or `mysql://…`) goes past the seed: the same
//! delivery stream on Postgres (or MySQL/MariaDB) with real concurrent workers, and
//! the crash test with real worker processes (this binary again, as the hidden
//! `sim-worker` subcommand) that are SIGKILLed at the crash point.
#![allow(clippy::print_stderr)] // the timings go to stderr, beside the tables on stdout

use std::io::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use hookbox_cli::store::Location;
use hookbox_sim::server::{self, CrashDesign, SimOptions};

use crate::UsageError;

pub(crate) const AFTER_HELP: &str = "\
Without --store: the seed's single-process simulation on SQLite, deterministic, its
tables identical to the published output.

With --store postgres://… or mysql://…: the same seed and delivery stream replayed
with --workers real concurrent workers, each on its own connection, for
(b) check-then-insert, (c) atomic insert (hookbox's process_once) and (d) the version
guard; then the crash test with --workers worker processes killed with SIGKILL between
the dedupe insert and the side effect. Each handler and design runs in a fresh schema
(a fresh database on MySQL), dropped at the end. The numbers are measured, not fixed:
concurrency is real.

Examples:
  hookbox sim --timings
  hookbox sim --store postgres://postgres@127.0.0.1:5432/test --workers 8 --timings
  hookbox sim --store mysql://root@127.0.0.1:3306/test --workers 8 --timings";

/// Arguments of `hookbox sim`.
#[derive(Debug, clap::Args)]
pub(crate) struct SimArgs {
    /// Print the elapsed time of each section on stderr.
    #[arg(long)]
    timings: bool,

    /// Replay on a server with real concurrency instead: a `postgres://` URL (fresh
    /// schemas, dropped afterwards) or a `mysql://` URL (fresh databases on that
    /// server, dropped afterwards).
    #[arg(long, value_name = "URL")]
    store: Option<String>,

    /// Concurrent workers on the server: connections for the handlers, processes for
    /// the crash test.
    #[arg(
        long,
        value_name = "N",
        default_value_t = server::DEFAULT_WORKERS as u32,
        value_parser = clap::value_parser!(u32).range(2..=64),
        requires = "store"
    )]
    workers: u32,

    /// The pause at the script's `await io()` on the server, in milliseconds: in (b)
    /// between the check and the write, in (c)/(d) before the transaction.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = server::DEFAULT_IO_DELAY.as_millis() as u64,
        value_parser = clap::value_parser!(u64).range(0..=1000),
        requires = "store"
    )]
    io_delay_ms: u64,

    /// Replay only the first N events on the server (and of the crash test's 2,000),
    /// for a quick run [default: all 10,000].
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u32).range(1..=10_000),
        requires = "store"
    )]
    events: Option<u32>,
}

/// Arguments of the hidden `hookbox sim-worker`, which the server's crash test starts.
#[derive(Debug, clap::Args)]
pub(crate) struct SimWorkerArgs {
    /// The server, from the parent's environment (never on the command line, where
    /// the process list would show a password).
    #[arg(long, env = server::WORKER_URL_ENV, hide_env_values = true)]
    url: String,

    /// The schema (the database, on MySQL) the parent prepared.
    #[arg(long)]
    schema: String,

    /// The crash test's design: `split` or `atomic`.
    #[arg(long)]
    design: CrashDesign,
}

/// Runs the simulation and prints its tables on stdout.
///
/// # Errors
/// [`UsageError`] for a `--store` that is not a Postgres or MySQL URL; a failed write or
/// database step exits 1 with a message.
pub(crate) fn run(args: &SimArgs) -> Result<ExitCode, UsageError> {
    let start = Instant::now();
    let pg_options = match &args.store {
        None => None,
        Some(url) if !matches!(Location::parse(url), Location::Sqlite(_)) => {
            let exe = std::env::current_exe().map_err(|err| {
                UsageError(format!(
                    "cannot find this binary to start the crash test's workers: {err}"
                ))
            })?;
            let mut options = SimOptions::new(url.clone(), exe);
            options.workers = args.workers as usize;
            options.io_delay = Duration::from_millis(args.io_delay_ms);
            options.events = args.events.map(|n| n as usize);
            Some(options)
        }
        Some(other) => {
            return Err(UsageError(format!(
                "--store takes a postgres:// or mysql:// URL, not {other:?} (the SQLite simulation runs without --store)"
            )));
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let result = match &pg_options {
        None => hookbox_sim::run_timed(&mut out, &hookbox_sim::RunMeta::detect()),
        Some(options) => server::run(&mut out, options),
    };
    let _ = out.flush();
    let timings = match result {
        Ok(timings) => timings,
        Err(err) => {
            eprintln!("error: the simulation failed: {err}");
            return Ok(ExitCode::FAILURE);
        }
    };
    if args.timings {
        for (section, elapsed) in timings {
            eprintln!("{section:<32} {:>9.1} ms", elapsed.as_secs_f64() * 1e3);
        }
        eprintln!(
            "{:<32} {:>9.1} ms",
            "total",
            start.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs a crash-test worker on stdin and stdout until its input ends.
///
/// # Errors
/// [`UsageError`] never; a failure is reported to the parent and exits 1.
pub(crate) fn run_worker(args: &SimWorkerArgs) -> Result<ExitCode, UsageError> {
    Ok(
        match server::run_worker(&args.url, &args.schema, args.design) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("error: sim-worker: {err}");
                ExitCode::FAILURE
            }
        },
    )
}
