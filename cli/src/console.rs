//! `hookbox console`: the operator console of `hookbox-console` over a store, on a
//! local port, without writing code.
//!
//! Tokens come from the environment only (`HOOKBOX_CONSOLE_TOKEN` read-only,
//! `HOOKBOX_CONSOLE_ADMIN_TOKEN` admin), never from the command line where `ps`
//! shows them. The first line on stdout is `listening on http://<addr>`; every
//! action's log line goes to stderr.

#![allow(clippy::print_stdout)] // the listening line is this command's contract

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Args;
use hookbox_axum::EdgeLimits;
use hookbox_cli::store::open_console_store;
use hookbox_console::{ADMIN_TOKEN_VAR, Console, ConsoleAuth, TOKEN_VAR};
use hookbox_core::{RetentionPolicy, error_chain};

use crate::UsageError;

/// What `hookbox console --help` prints after the options.
pub(crate) const AFTER_HELP: &str = "\
Tokens are read from the environment, never from the command line:
  HOOKBOX_CONSOLE_TOKEN        read-only: every page, no action
  HOOKBOX_CONSOLE_ADMIN_TOKEN  admin: every page and action (replay, delete dead letters)
At least one must be set, each at least 16 bytes long. Browsers sign in on /login;
scripts send `Authorization: Bearer <token>`.

Example:
  HOOKBOX_CONSOLE_ADMIN_TOKEN=$(openssl rand -hex 24) \\
    hookbox console --store hookbox.db --listen 127.0.0.1:8081";

/// Arguments of `hookbox console`.
#[derive(Debug, Args)]
pub(crate) struct ConsoleArgs {
    /// The store: a SQLite file path (or `sqlite://path`), a `postgres://` URL or a
    /// `mysql://` URL.
    #[arg(long, env = "HOOKBOX_STORE")]
    store: String,
    /// The Postgres schema the store's tables live in (default: the search path).
    #[arg(long)]
    schema: Option<String>,
    /// The address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8081")]
    listen: SocketAddr,
    /// A header to mask on every page besides the default ones (repeatable).
    #[arg(long = "mask-header", value_name = "NAME")]
    mask_headers: Vec<String>,
}

/// Runs the console until Ctrl-C: exit 0 then, 1 when the store or the listener
/// fails, 2 (`Err`) without a token.
pub(crate) fn run(args: &ConsoleArgs) -> Result<ExitCode, UsageError> {
    let auth = ConsoleAuth::from_env().map_err(|err| {
        UsageError(format!(
            "{}; set {TOKEN_VAR} and/or {ADMIN_TOKEN_VAR}",
            error_chain(&err)
        ))
    })?;
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|err| UsageError(format!("cannot start the runtime: {err}")))?;
    Ok(runtime.block_on(async {
        match serve(args, auth).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::FAILURE
            }
        }
    }))
}

async fn serve(args: &ConsoleArgs, auth: ConsoleAuth) -> Result<(), String> {
    // no migration: the console never changes the schema
    let store = open_console_store(
        &args.store,
        args.schema.as_deref(),
        RetentionPolicy::default(),
    )
    .await
    .map_err(|err| error_chain(&err))?;
    let mut console = Console::new(store, auth);
    for name in &args.mask_headers {
        console = console.mask_header(name);
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|err| format!("cannot listen on {}: {err}", args.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|err| format!("cannot read the listening address: {err}"))?;
    println!("listening on http://{addr}");
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    hookbox_axum::serve(listener, console.router(), EdgeLimits::default(), shutdown).await;
    Ok(())
}
