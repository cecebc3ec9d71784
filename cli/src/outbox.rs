//! `hookbox outbox`: an operator's view of a store's outbox, on a SQLite file or a
//! Postgres URL: backlog and oldest unsent, dead letters with their last error, a
//! resend on request (`replay`, as `hookbox inbox replay`), purge by retention.
//! Every command prints JSON on stdout.
//!
//! The commands' shapes, the store and the printing are shared with `hookbox inbox`
//! in `admin.rs`; this file has the outbox's arguments and messages, and starts the
//! relay (`outbox_relay.rs`).

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use hookbox_cli::store::{OpenError, open_outbox_admin};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    AnyStoreError, MessageId, OutboxAdmin, OutboxFilter, OutboxMessage, RetentionPolicy,
    error_chain,
};
use serde_json::{Value, json};

use crate::UsageError;
use crate::admin::{self, Limit, Table, Verb, counts, unix, with_bytes_and_headers};

/// Arguments of `hookbox outbox`.
#[derive(Debug, Args)]
pub(crate) struct OutboxArgs {
    /// The store: a SQLite file path (or `sqlite://path`), a `postgres://` URL or a
    /// `mysql://` URL.
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
        #[command(flatten)]
        limit: Limit,
    },
    /// Prints one message with its payload and headers.
    Show {
        /// The message's id (from `list`): the Idempotency-Key the sink saw.
        id: String,
    },
    /// Lists dead letters with their last error, newest first.
    Dead {
        #[command(flatten)]
        limit: Limit,
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

impl ReplayArgs {
    /// The replay, answering `{"<answer>": count}`.
    fn verb(&self, answer: &'static str) -> Verb<'static, dyn OutboxAdmin> {
        Verb::Replay {
            id: self.id.clone().map(MessageId::from_stored),
            all: self.all,
            answer,
        }
    }
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
            Status::Pending => Self::pending(),
            Status::Sent => Self::sent(),
            Status::Dead => Self::dead(),
            Status::All => Self::all(),
        }
    }
}

/// Runs `hookbox outbox`: 0 on success, 1 when the store failed, 2 for usage errors.
pub(crate) fn run(args: &OutboxArgs) -> Result<ExitCode, UsageError> {
    let Some(store) = args.store.as_deref() else {
        return Err(UsageError(
            "the store is missing: give --store <path, postgres:// or mysql:// URL> or set HOOKBOX_STORE"
                .into(),
        ));
    };
    let verb = match &args.command {
        OutboxCommand::Relay(relay) => {
            return crate::outbox_relay::run(store, args.schema.as_deref(), relay);
        }
        OutboxCommand::Stats => Verb::Stats,
        OutboxCommand::List { status, limit } => Verb::List {
            filter: (*status).into(),
            limit: limit.limit,
        },
        OutboxCommand::Show { id } => Verb::Show(MessageId::from_stored(id.clone())),
        OutboxCommand::Dead { limit } => Verb::List {
            filter: OutboxFilter::dead(),
            limit: limit.limit,
        },
        OutboxCommand::Replay(replay) => replay.verb("replayed"),
        OutboxCommand::Retry(replay) => replay.verb("retried"),
        OutboxCommand::Purge {
            keep,
            below_provider_minimum,
        } => Verb::Purge {
            keep,
            below_provider_minimum: *below_provider_minimum,
        },
    };
    admin::run::<dyn OutboxAdmin>(store, args.schema.as_deref(), verb)
}

impl Table for dyn OutboxAdmin {
    type Id = MessageId;
    type Filter = OutboxFilter;
    const ROW: &'static str = "outbox message";
    const REPLAY_NEEDS: &'static str = "give a message id or --all";

    async fn open(
        store: &str,
        schema: Option<&str>,
        retention: RetentionPolicy,
    ) -> Result<Box<Self>, OpenError> {
        open_outbox_admin(store, schema, retention).await
    }

    async fn stats_line(&self) -> Result<Value, AnyStoreError> {
        let stats = self.stats().await?;
        Ok(counts(
            stats.pending,
            ("sent", stats.sent),
            stats.dead,
            stats.oldest_pending,
        ))
    }

    async fn list_lines(
        &self,
        filter: OutboxFilter,
        limit: u32,
    ) -> Result<Vec<Value>, AnyStoreError> {
        Ok(self
            .list(filter, limit)
            .await?
            .iter()
            .map(summary)
            .collect())
    }

    async fn show_line(&self, id: &MessageId) -> Result<Option<Value>, AnyStoreError> {
        Ok(self.get(id).await?.as_ref().map(detail))
    }

    /// A message that is not sent or dead is not replayed: an error.
    async fn replay_one(&self, id: &MessageId) -> Result<u64, String> {
        if !self.replay(id).await.map_err(|err| error_chain(&err))? {
            return Err(format!(
                "no sent or dead outbox message with id {id} (a pending one is already due)"
            ));
        }
        Ok(1)
    }

    async fn replay_dead(&self) -> Result<u64, AnyStoreError> {
        self.replay_matching(OutboxFilter::dead()).await
    }

    async fn purge_line(&self, now: OffsetDateTime) -> Result<Value, AnyStoreError> {
        Ok(json!({ "purged_outbox_messages": self.purge(now).await? }))
    }
}

fn summary(message: &OutboxMessage) -> Value {
    // the relay records `{kind} sink: {answer}`
    let answered = message
        .last_error
        .as_deref()
        .and_then(hookbox_outbox::recorded_sink_answer);
    json!({
        "id": message.id.as_str(),
        "status": message.state().as_str(),
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
