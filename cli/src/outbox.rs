//! `hookbox outbox`: an operator's view of a store's outbox, on a SQLite file or a
//! Postgres URL: backlog and oldest unsent, dead letters with their last error, a
//! resend on request (`replay`, as `hookbox inbox replay`), purge by retention.
//! Every command prints JSON on stdout.

#![allow(clippy::print_stdout)] // printing the JSON lines is this command's job

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use hookbox_cli::store::open_outbox_admin;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    AnyStoreError, MessageId, OutboxAdmin, OutboxFilter, OutboxMessage, OutboxStats,
    RetentionPolicy, error_chain,
};
use serde_json::{Value, json};

use crate::UsageError;
use crate::inbox::{print_json_lines, retention, unix, with_bytes_and_headers};

/// Arguments of `hookbox outbox`.
#[derive(Debug, Args)]
pub(crate) struct OutboxArgs {
    /// The store: a SQLite file path (or `sqlite://path`) or a `postgres://` URL.
    #[arg(long, env = "HOOKBOX_STORE", global = true)]
    store: Option<String>,
    /// The Postgres schema the store's tables live in (default: the search path).
    #[arg(long, global = true)]
    schema: Option<String>,
    #[command(subcommand)]
    command: OutboxCommand,
}

#[derive(Debug, Subcommand)]
enum OutboxCommand {
    /// Counts: pending (the backlog), sent, dead, and the oldest pending message.
    Stats,
    /// Lists messages, one JSON object per line.
    List {
        /// Which messages.
        #[arg(long, value_enum, default_value = "pending")]
        status: Status,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Prints one message with its payload and headers.
    Show {
        /// The message's id (from `list`): the Idempotency-Key the sink saw.
        id: String,
    },
    /// Lists dead letters with their last error, oldest first.
    Dead {
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Sends a dead or already sent message again (attempts reset), or with `--all`
    /// every dead letter. The id stays the same, so a downstream that honours it
    /// still applies the message once.
    Replay(ReplayArgs),
    /// The former name of `replay`, kept for scripts: the same arguments, and its
    /// answer still says `retried`.
    #[command(hide = true)]
    Retry(ReplayArgs),
    /// Deletes sent messages older than the retention; pending and dead messages are
    /// never purged.
    Purge {
        /// `provider=duration` (e.g. `shopify=24h`, `stripe=45d`); refused when shorter
        /// than the provider's resend window. Providers without one keep 30 days.
        #[arg(long = "keep", value_name = "PROVIDER=DURATION")]
        keep: Vec<String>,
        /// Accept a `--keep` shorter than the provider's minimum.
        #[arg(long)]
        below_provider_minimum: bool,
    },
    /// Runs a relay: sends pending messages to the sinks given with `--sink
    /// name=url` until SIGINT or SIGTERM. Prints a JSON ready line first and a
    /// report when it stops; logs go to stderr.
    Relay(crate::outbox_relay::RelayArgs),
}

/// Arguments of `hookbox outbox replay` (and of its former name, `retry`).
#[derive(Debug, Args)]
struct ReplayArgs {
    /// The message's id.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    id: Option<String>,
    /// Replay every dead letter (also `--dead`, the flag's former name).
    #[arg(long, alias = "dead")]
    all: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Status {
    Pending,
    Sent,
    Dead,
    All,
}

impl From<Status> for OutboxFilter {
    fn from(status: Status) -> Self {
        match status {
            Status::Pending => Self::Pending,
            Status::Sent => Self::Sent,
            Status::Dead => Self::Dead,
            Status::All => Self::All,
        }
    }
}

/// Runs `hookbox outbox`: 0 on success, 1 when the store failed, 2 for usage errors.
pub(crate) fn run(args: &OutboxArgs) -> Result<ExitCode, UsageError> {
    let Some(store) = args.store.as_deref() else {
        return Err(UsageError(
            "the store is missing: give --store <path or postgres:// URL> or set HOOKBOX_STORE"
                .into(),
        ));
    };
    if let OutboxCommand::Relay(relay) = &args.command {
        return crate::outbox_relay::run(store, args.schema.as_deref(), relay);
    }
    let purge_policy = match &args.command {
        OutboxCommand::Purge {
            keep,
            below_provider_minimum,
        } => Some(retention(keep, *below_provider_minimum)?),
        _ => None,
    };
    print_json_lines(execute(store, args, purge_policy))
}

async fn execute(
    store: &str,
    args: &OutboxArgs,
    purge_policy: Option<RetentionPolicy>,
) -> Result<Vec<Value>, String> {
    // no migration: an operator command never changes the schema
    let store = open_outbox_admin(
        store,
        args.schema.as_deref(),
        purge_policy.unwrap_or_default(),
    )
    .await
    .map_err(|err| error_chain(&err))?;
    let failed = |err: AnyStoreError| error_chain(&err);
    let rows = |rows: Vec<OutboxMessage>| rows.iter().map(summary).collect::<Vec<_>>();
    Ok(match &args.command {
        OutboxCommand::Stats => vec![stats_json(store.stats().await.map_err(failed)?)],
        OutboxCommand::List { status, limit } => {
            rows(store.list((*status).into(), *limit).await.map_err(failed)?)
        }
        OutboxCommand::Dead { limit } => rows(
            store
                .list(OutboxFilter::Dead, *limit)
                .await
                .map_err(failed)?,
        ),
        OutboxCommand::Show { id } => {
            let id = MessageId::from_stored(id.clone());
            match store.get(&id).await.map_err(failed)? {
                Some(message) => vec![detail(&message)],
                None => return Err(format!("no outbox message with id {id}")),
            }
        }
        OutboxCommand::Replay(replay) => {
            vec![json!({ "replayed": replay_messages(&*store, replay).await? })]
        }
        OutboxCommand::Retry(replay) => {
            vec![json!({ "retried": replay_messages(&*store, replay).await? })]
        }
        OutboxCommand::Relay(_) => unreachable!("run starts the relay"),
        OutboxCommand::Purge { .. } => {
            let purged = store
                .purge(OffsetDateTime::now_utc())
                .await
                .map_err(failed)?;
            vec![json!({ "purged_outbox_messages": purged })]
        }
    })
}

/// Replays one message by id, or every dead letter with `--all`; returns how many.
async fn replay_messages(store: &dyn OutboxAdmin, args: &ReplayArgs) -> Result<u64, String> {
    let failed = |err: AnyStoreError| error_chain(&err);
    if args.all {
        return store
            .replay_matching(OutboxFilter::Dead)
            .await
            .map_err(failed);
    }
    let id = MessageId::from_stored(args.id.clone().ok_or("give a message id or --all")?);
    if !store.replay(&id).await.map_err(failed)? {
        return Err(format!(
            "no sent or dead outbox message with id {id} (a pending one is already due)"
        ));
    }
    Ok(1)
}

fn stats_json(stats: OutboxStats) -> Value {
    let now = OffsetDateTime::now_utc();
    json!({
        "pending": stats.pending,
        "sent": stats.sent,
        "dead": stats.dead,
        "oldest_pending": unix(stats.oldest_pending),
        "oldest_pending_age_secs": stats.oldest_pending.map(|at| (now - at).whole_seconds().max(0)),
    })
}

fn summary(message: &OutboxMessage) -> Value {
    // the relay records `{kind} sink: {answer}`
    let answered = message
        .last_error
        .as_deref()
        .and_then(hookbox_outbox::recorded_sink_answer);
    json!({
        "id": message.id.as_str(),
        "status": message.state(),
        "sink": message.sink,
        "ordering_key": message.ordering_key,
        "provider": message.key.provider(),
        "scope": message.key.scope(),
        "delivery_id": message.key.delivery_id(),
        "handler": message.handler,
        "sequence": message.sequence,
        "staged_at": message.staged_at.unix_timestamp(),
        "attempts": message.attempts,
        "next_attempt_at": message.next_attempt_at.unix_timestamp(),
        "sent_at": unix(message.sent_at),
        "dead_at": unix(message.dead_at),
        "last_error": message.last_error,
        "sink_kind": answered.map(|(kind, _)| kind),
        "sink_answer": answered.map(|(_, answer)| answer),
        "payload_bytes": message.payload.len(),
    })
}

fn detail(message: &OutboxMessage) -> Value {
    let mut value = summary(message);
    with_bytes_and_headers(&mut value, "payload", &message.payload, &message.headers);
    value
}
