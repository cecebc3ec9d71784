//! `hookbox inbox`: an operator's view of a store's inbox, on a SQLite file or a
//! Postgres URL: depth, oldest unprocessed, dead letters with their last error, replay
//! after a fix, purge by retention. Every command prints JSON on stdout.
//!
//! The commands' shapes, the store and the printing are shared with `hookbox outbox`
//! in `admin.rs`; this file has the inbox's arguments and rows.

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use hookbox_cli::store::{OpenError, open_admin};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    AnyStoreError, InboxAdmin, InboxFilter, Purged, RetentionPolicy, StoredDelivery, error_chain,
};
use serde_json::{Value, json};

use crate::UsageError;
use crate::admin::{self, Limit, Table, Verb, counts, unix, with_bytes_and_headers};

/// Arguments of `hookbox inbox`.
#[derive(Debug, Args)]
pub(crate) struct InboxArgs {
    /// The store: a SQLite file path (or `sqlite://path`), a `postgres://` URL or a
    /// `mysql://` URL.
    // global: accepted before or after the subcommand (`inbox stats --store …`); clap
    // refuses a global argument that is required, so the derive's check for the
    // missing value names it instead
    #[arg(long, env = "HOOKBOX_STORE", global = true, required = false)]
    store: String,
    /// The Postgres schema the store's tables live in (default: the search path).
    #[arg(long, global = true)]
    schema: Option<String>,
    #[command(subcommand)]
    command: InboxCommand,
}

#[derive(Debug, Subcommand)]
enum InboxCommand {
    /// Counts: pending (the backlog), processed, dead, and the oldest pending row.
    Stats,
    /// Lists rows, newest first, one JSON object per line.
    List {
        /// Which rows.
        #[arg(long, value_enum, default_value = "pending")]
        status: Status,
        #[command(flatten)]
        limit: Limit,
    },
    /// Prints one row with its body and headers.
    Show {
        /// The row's id (from `list`).
        id: i64,
    },
    /// Lists dead letters with their last error, newest first.
    Dead {
        #[command(flatten)]
        limit: Limit,
    },
    /// Makes a dead letter (or, with `--all`, every dead letter) due again, attempts reset.
    Replay {
        /// The dead letter's id.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<i64>,
        /// Replay every dead letter (also `--dead`, as `hookbox outbox replay`).
        #[arg(long, alias = "dead")]
        all: bool,
    },
    /// Deletes processed keys and processed rows older than the retention; dead letters
    /// and pending rows are never purged.
    Purge {
        /// `provider=duration` (e.g. `shopify=24h`, `stripe=45d`); refused when shorter
        /// than the provider's resend window. Providers without one keep 30 days.
        #[arg(long = "keep", value_name = "PROVIDER=DURATION")]
        keep: Vec<String>,
        /// Accept a `--keep` shorter than the provider's minimum: resends after the
        /// purge will be applied again.
        #[arg(long)]
        below_provider_minimum: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Status {
    Pending,
    Failed,
    Processed,
    Dead,
    All,
}

impl From<Status> for InboxFilter {
    fn from(status: Status) -> Self {
        match status {
            Status::Pending => Self::pending(),
            Status::Failed => Self::failed(),
            Status::Processed => Self::processed(),
            Status::Dead => Self::dead(),
            Status::All => Self::all(),
        }
    }
}

/// Runs `hookbox inbox`: 0 on success, 1 when the store failed, 2 for usage errors.
pub(crate) fn run(args: &InboxArgs) -> Result<ExitCode, UsageError> {
    let verb = match &args.command {
        InboxCommand::Stats => Verb::Stats,
        InboxCommand::List { status, limit } => Verb::List {
            filter: (*status).into(),
            limit: limit.limit,
        },
        InboxCommand::Show { id } => Verb::Show(*id),
        InboxCommand::Dead { limit } => Verb::List {
            filter: InboxFilter::dead(),
            limit: limit.limit,
        },
        InboxCommand::Replay { id, all } => Verb::Replay {
            id: *id,
            all: *all,
            answer: "replayed",
        },
        InboxCommand::Purge {
            keep,
            below_provider_minimum,
        } => Verb::Purge {
            keep,
            below_provider_minimum: *below_provider_minimum,
        },
    };
    admin::run::<dyn InboxAdmin>(&args.store, args.schema.as_deref(), verb)
}

impl Table for dyn InboxAdmin {
    type Id = i64;
    type Filter = InboxFilter;
    const ROW: &'static str = "inbox row";
    const REPLAY_NEEDS: &'static str = "give a dead letter's id or --all";

    async fn open(
        store: &str,
        schema: Option<&str>,
        retention: RetentionPolicy,
    ) -> Result<Box<Self>, OpenError> {
        open_admin(store, schema, retention).await
    }

    async fn stats_line(&self) -> Result<Value, AnyStoreError> {
        let stats = self.stats().await?;
        Ok(counts(
            stats.pending,
            ("processed", stats.processed),
            stats.dead,
            stats.oldest_pending,
        ))
    }

    async fn list_lines(
        &self,
        filter: InboxFilter,
        limit: u32,
    ) -> Result<Vec<Value>, AnyStoreError> {
        Ok(self
            .list(filter, limit)
            .await?
            .iter()
            .map(summary)
            .collect())
    }

    async fn show_line(&self, id: &i64) -> Result<Option<Value>, AnyStoreError> {
        Ok(self.get(*id).await?.as_ref().map(detail))
    }

    /// A row that is not a dead letter is not replayed: 0, not an error.
    async fn replay_one(&self, id: &i64) -> Result<u64, String> {
        let replayed = self.replay(*id).await.map_err(|err| error_chain(&err))?;
        Ok(u64::from(replayed))
    }

    async fn replay_dead(&self) -> Result<u64, AnyStoreError> {
        self.replay_matching(InboxFilter::dead()).await
    }

    async fn purge_line(&self, now: OffsetDateTime) -> Result<Value, AnyStoreError> {
        let Purged {
            keys,
            inbox_rows,
            outbox_messages,
        } = self.purge(now).await?;
        Ok(json!({
            "purged_keys": keys,
            "purged_inbox_rows": inbox_rows,
            "purged_outbox_messages": outbox_messages,
        }))
    }
}

fn status(row: &StoredDelivery) -> &'static str {
    match (row.processed_at, row.dead_at) {
        (_, Some(_)) => "dead",
        (Some(_), None) => "processed",
        (None, None) => "pending",
    }
}

fn summary(row: &StoredDelivery) -> Value {
    json!({
        "id": row.id,
        "status": status(row),
        "provider": row.key.provider(),
        "scope": row.key.scope(),
        "delivery_id": row.key.delivery_id(),
        "event_type": row.event_type,
        "correlation_id": row.correlation_id,
        "signed_at": unix(row.signed_at),
        "received_at": row.received_at.unix_timestamp(),
        "attempts": row.attempts,
        "next_attempt_at": row.next_attempt_at.unix_timestamp(),
        "processed_at": unix(row.processed_at),
        "dead_at": unix(row.dead_at),
        "last_error": row.last_error,
        "body_bytes": row.body.len(),
    })
}

fn detail(row: &StoredDelivery) -> Value {
    let mut value = summary(row);
    with_bytes_and_headers(&mut value, "body", &row.body, &row.headers);
    value
}
