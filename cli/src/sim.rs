//! `hookbox sim`: the seed's simulation of webhook receivers under at-least-once
//! delivery, with hookbox's own SQLite store as the correct designs. Its tables match
//! the published output line for line (a test in `hookbox-sim` proves it).
#![allow(clippy::print_stderr)] // the timings go to stderr, beside the tables on stdout

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use crate::UsageError;

/// Arguments of `hookbox sim`.
#[derive(Debug, clap::Args)]
pub(crate) struct SimArgs {
    /// Print the elapsed time of each section on stderr.
    #[arg(long)]
    timings: bool,
}

/// Runs the simulation and prints its tables on stdout.
///
/// # Errors
/// [`UsageError`] never; a failed write or database step exits 1 with a message.
pub(crate) fn run(args: &SimArgs) -> Result<ExitCode, UsageError> {
    let start = Instant::now();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let timings = match hookbox_sim::run_timed(&mut out, &hookbox_sim::RunMeta::detect()) {
        Ok(timings) => timings,
        Err(err) => {
            eprintln!("error: the simulation failed: {err}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let _ = out.flush();
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
