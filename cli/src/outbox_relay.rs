//! `hookbox outbox relay`: the relay as a process of its own, sending a store's
//! outbox to the sinks named on the command line.

#![allow(clippy::print_stdout)] // the ready line and the report are this command's output

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use hookbox_cli::store::Location;
use hookbox_core::{OutboxAdmin, OutboxFilter, OutboxStore, RetryPolicy, error_chain};
use hookbox_diesel_mysql::{MysqlOptions, MysqlStore};
use hookbox_diesel_pg::{PgOptions, PgStore};
use hookbox_outbox::{RelayPolicy, Sinks, connect_sink, run_relay, sink_kind};
use hookbox_sqlite::{SqliteOptions, SqliteStore};
use serde_json::json;

use crate::UsageError;
use crate::admin::parse_duration;

/// Arguments of `hookbox outbox relay`.
#[derive(Debug, Args)]
pub(crate) struct RelayArgs {
    /// `name=url`: the sink for messages staged with that sink name. URLs: `log`
    /// (only when you ask for it), `http(s)://…`, `nats://host:4222/<subject>`,
    /// `amqp://user:pass@host:5672/%2f?queue=<queue>` or `…?exchange=<x>&routing_key=<k>`.
    /// A message whose sink name is not given stays pending (the relay warns).
    #[arg(long = "sink", value_name = "NAME=URL", required = true)]
    sinks: Vec<String>,
    /// How long a leased message stays with this relay: a relay killed mid-send
    /// leaves its messages (and the later messages of their ordering keys) waiting
    /// this long. Every send must finish within four fifths of it.
    #[arg(long, default_value = "60s", value_parser = duration)]
    lease: Duration,
    /// Sends in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: u32,
    /// Messages leased at a time.
    #[arg(long, default_value_t = 16)]
    batch: u32,
    /// Attempts before a message becomes a dead letter.
    #[arg(long, default_value_t = 5)]
    max_attempts: u32,
    /// The longest wait between two attempts (backoff doubles from 1 s up to it).
    #[arg(long, default_value = "1h", value_parser = duration)]
    retry_cap: Duration,
    /// Exit once nothing is pending (or only messages this relay has no sink for),
    /// instead of running until SIGINT or SIGTERM.
    #[arg(long)]
    until_empty: bool,
}

fn duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).ok_or_else(|| "durations look like 30s, 10m, 1h".to_string())
}

impl RelayArgs {
    fn policy(&self) -> RelayPolicy {
        RelayPolicy {
            retry: RetryPolicy {
                max_attempts: self.max_attempts,
                base: Duration::from_secs(1).min(self.retry_cap),
                cap: self.retry_cap,
            },
            lease: self.lease,
            batch: self.batch.max(1),
            concurrency: self.concurrency.max(1),
            ..RelayPolicy::default()
        }
    }

    /// The `name=url` pairs, checked for shape.
    fn named_sinks(&self) -> Result<Vec<(&str, &str)>, UsageError> {
        self.sinks
            .iter()
            .map(|pair| {
                let (name, url) = pair.split_once('=').ok_or_else(|| {
                    UsageError(format!("--sink {pair}: expected NAME=URL"))
                })?;
                if name.is_empty() || sink_kind(url).is_none() {
                    return Err(UsageError(format!(
                        "--sink {pair}: expected NAME=URL with a URL of log, http(s)://, nats:// or amqp(s)://"
                    )));
                }
                Ok((name, url))
            })
            .collect()
    }
}

/// Runs the relay: 0 when it stopped on a signal or drained (`--until-empty`), 1
/// when a sink could not be set up or the store failed, 2 for usage errors.
pub(crate) fn run(
    store: &str,
    schema: Option<&str>,
    args: &RelayArgs,
) -> Result<ExitCode, UsageError> {
    let named = args.named_sinks()?;
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
        match relay(store, schema, &named, args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::FAILURE
            }
        }
    }))
}

async fn relay(
    store: &str,
    schema: Option<&str>,
    named: &[(&str, &str)],
    args: &RelayArgs,
) -> Result<(), String> {
    let policy = args.policy();
    let mut sinks = Sinks::new();
    for (name, url) in named {
        let sink = connect_sink(url, &policy)
            .await
            .map_err(|err| format!("sink `{name}`: {}", error_chain(&err)))?;
        sinks = sinks.with(*name, sink);
    }
    match Location::parse(store) {
        Location::Postgres(url) => {
            let mut options = PgOptions::new().with_max_connections(4);
            if let Some(schema) = schema {
                options = options.with_schema(schema);
            }
            let store = PgStore::connect(url, options)
                .await
                .map_err(|err| error_chain(&err))?;
            relay_from(&store, &sinks, named, policy, args.until_empty).await
        }
        Location::Mysql(url) => {
            let options = MysqlOptions::new().with_max_connections(4);
            let store = MysqlStore::connect(url, options)
                .await
                .map_err(|err| error_chain(&err))?;
            relay_from(&store, &sinks, named, policy, args.until_empty).await
        }
        Location::Sqlite(path) => {
            if !path.exists() {
                return Err(format!("no SQLite file at {}", path.display()));
            }
            let store = SqliteStore::open(path, SqliteOptions::default())
                .await
                .map_err(|err| error_chain(&err))?;
            relay_from(&store, &sinks, named, policy, args.until_empty).await
        }
    }
}

async fn relay_from<S: OutboxStore + OutboxAdmin>(
    store: &S,
    sinks: &Sinks,
    named: &[(&str, &str)],
    policy: RelayPolicy,
    until_empty: bool,
) -> Result<(), String> {
    let described: Vec<_> = named
        .iter()
        .map(|(name, url)| json!({ "name": name, "kind": sink_kind(url) }))
        .collect();
    // the first stdout line: the relay is connected and sending
    println!(
        "{}",
        json!({
            "relay": "ready",
            "sinks": described,
            "lease_secs": policy.lease.as_secs_f64(),
            "concurrency": policy.concurrency,
            "batch": policy.batch,
        })
    );
    let stop = async {
        if until_empty {
            drained(store, sinks).await;
        } else {
            stopped().await;
        }
    };
    let report = run_relay(store, sinks, policy, stop)
        .await
        .map_err(|err| error_chain(&err))?;
    println!(
        "{}",
        json!({
            "relay": "stopped",
            "sent": report.sent,
            "retried": report.retried,
            "dead": report.dead,
            "unsent": report.unsent,
            "lost_leases": report.lost_leases,
            "store_errors": report.store_errors,
        })
    );
    Ok(())
}

/// Completes when no pending message has a sink on this relay.
async fn drained<S: OutboxAdmin>(store: &S, sinks: &Sinks) {
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Ok(pending) = store.list(OutboxFilter::pending(), 10_000).await
            && pending.iter().all(|m| sinks.get(&m.sink).is_none())
        {
            return;
        }
    }
}

/// Completes on SIGINT or SIGTERM.
async fn stopped() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
