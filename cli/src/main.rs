//! `hookbox`: verify and sign webhook deliveries from the command line.
//!
//! `hookbox verify` answers the most common webhook support question, "why does this
//! signature not verify?", with one JSON line whose shape is a stable contract (the
//! design rules' "Command-line contract"). `hookbox sign` prints the headers a provider
//! would send, in the `Name: value` form that `curl -H` and `hookbox verify --header`
//! take unchanged.
//!
//! `hookbox sim` runs the seed's receiver simulation; with `--store postgres://…` or
//! `--store mysql://…` it replays it with real concurrent workers and SIGKILLed
//! worker processes.
//!
//! `hookbox inbox` shows and operates a store's inbox (a SQLite file, a Postgres URL
//! or a MySQL URL);
//! `hookbox outbox` its outbox. `hookbox console` serves the operator console over
//! a store in a browser.
//!
//! `hookbox new` writes a receiver project of your own from the example for a
//! provider, with its tests, ready for `cargo build && cargo test`.
//!
//! `hookbox demo` runs a receiver, a worker and a stream of faulty deliveries on this
//! machine and prints whether every event was applied exactly once.
//!
//! Exit status: 0 success, 1 the delivery (or the secret) was rejected or the store
//! failed, 2 usage error.
#![forbid(unsafe_code)]

mod admin;
mod console;
mod demo;
mod inbox;
mod new;
mod outbox;
mod outbox_relay;
mod providers;
mod send;
mod sign;
mod sim;
mod verify;

use std::fmt;
use std::path::Path;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hookbox_core::bytes::Bytes;

/// Verify and sign webhook deliveries as Stripe, Shopify, GitHub, Svix, Standard
/// Webhooks, Slack, Twitch, Zoom, Discord and Paddle send them.
#[derive(Debug, Parser)]
#[command(name = "hookbox", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Verify a delivery's signature and print one JSON line saying why it passes or fails.
    #[command(after_help = verify::AFTER_HELP)]
    Verify(verify::VerifyArgs),
    /// Print the headers a provider would send with a body, one `Name: value` per line.
    #[command(after_help = sign::AFTER_HELP)]
    Sign(sign::SignArgs),
    /// Sign a body as a provider would and POST it, once or as several copies.
    #[command(after_help = send::AFTER_HELP)]
    Send(send::SendArgs),
    /// Run the seed's receiver simulation with hookbox's SQLite store as designs (c) and
    /// (d), or replay it on Postgres with real concurrent workers (`--store`).
    #[command(after_help = sim::AFTER_HELP)]
    Sim(sim::SimArgs),
    /// A worker process of `hookbox sim --store`'s crash test (a line protocol on
    /// stdin and stdout; not for direct use).
    #[command(name = "sim-worker", hide = true)]
    SimWorker(sim::SimWorkerArgs),
    /// Inspect and operate a store's inbox: stats, list, show, dead, replay, purge.
    Inbox(inbox::InboxArgs),
    /// Inspect and operate a store's outbox (stats, list, show, dead, replay, purge) and
    /// run its relay.
    Outbox(outbox::OutboxArgs),
    /// Serve the operator console (overview, deliveries, replay) over a store in a
    /// browser; tokens from HOOKBOX_CONSOLE_TOKEN and HOOKBOX_CONSOLE_ADMIN_TOKEN.
    #[command(after_help = console::AFTER_HELP)]
    Console(console::ConsoleArgs),
    /// Write a standalone receiver project from the example for a provider: its
    /// main.rs, tests, sample events, README and a Cargo.toml of its own.
    #[command(after_help = new::AFTER_HELP)]
    New(new::NewArgs),
    /// Receive a seeded stream of faulty deliveries (resends, concurrent copies,
    /// shuffles, forgeries, lost acks) and show each event applied exactly once.
    #[command(after_help = demo::AFTER_HELP)]
    Demo(demo::DemoArgs),
}

/// The exit status of a usage error, the same as clap's own.
const USAGE_ERROR: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match &cli.command {
        Command::Verify(args) => verify::run(args),
        Command::Sign(args) => sign::run(args),
        Command::Send(args) => send::run(args),
        Command::Inbox(args) => inbox::run(args),
        Command::Outbox(args) => outbox::run(args),
        Command::Console(args) => console::run(args),
        Command::Sim(args) => sim::run(args),
        Command::SimWorker(args) => sim::run_worker(args),
        Command::Demo(args) => demo::run(args),
        Command::New(args) => new::run(args),
    };
    outcome.unwrap_or_else(|err| {
        eprintln!("error: {err}");
        eprintln!("\nFor more information, try '--help'.");
        ExitCode::from(USAGE_ERROR)
    })
}

/// A command line that cannot be run as given: exit status 2, a message on stderr.
#[derive(Debug)]
struct UsageError(String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Reads the body file as raw bytes: never trimmed, decoded or size-limited.
fn read_body(path: &Path) -> Result<Bytes, UsageError> {
    std::fs::read(path)
        .map(Bytes::from)
        .map_err(|err| UsageError(format!("cannot read --body-file {}: {err}", path.display())))
}
