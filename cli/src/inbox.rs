//! `hookbox inbox`: an operator's view of a store's inbox, on a SQLite file or a
//! Postgres URL: depth, oldest unprocessed, dead letters with their last error, replay
//! after a fix, purge by retention. Every command prints JSON on stdout.

#![allow(clippy::print_stdout)] // printing the JSON lines is this command's job

use std::process::ExitCode;
use std::time::Duration;

use base64::Engine as _;
use clap::{Args, Subcommand, ValueEnum};
use hookbox_cli::store::open_admin;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    AnyStoreError, InboxFilter, InboxStats, KeptHeaders, Purged, RetentionPolicy, StoredDelivery,
    error_chain,
};
use serde_json::{Value, json};

use crate::UsageError;
use crate::providers::ProviderName;

/// Arguments of `hookbox inbox`.
#[derive(Debug, Args)]
pub(crate) struct InboxArgs {
    /// The store: a SQLite file path (or `sqlite://path`) or a `postgres://` URL.
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
    /// Lists rows, one JSON object per line.
    List {
        /// Which rows.
        #[arg(long, value_enum, default_value = "pending")]
        status: Status,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Prints one row with its body and headers.
    Show {
        /// The row's id (from `list`).
        id: i64,
    },
    /// Lists dead letters with their last error, oldest first.
    Dead {
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: u32,
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
    Processed,
    Dead,
    All,
}

impl From<Status> for InboxFilter {
    fn from(status: Status) -> Self {
        match status {
            Status::Pending => Self::Pending,
            Status::Processed => Self::Processed,
            Status::Dead => Self::Dead,
            Status::All => Self::All,
        }
    }
}

/// Runs `hookbox inbox`: 0 on success, 1 when the store failed, 2 for usage errors.
pub(crate) fn run(args: &InboxArgs) -> Result<ExitCode, UsageError> {
    let purge_policy = match &args.command {
        InboxCommand::Purge {
            keep,
            below_provider_minimum,
        } => Some(retention(keep, *below_provider_minimum)?),
        _ => None,
    };
    print_json_lines(execute(args, purge_policy))
}

/// Runs an operator command on a small runtime and prints its JSON lines: exit 0,
/// or 1 with the error on stderr when the store failed. Shared by `hookbox inbox`
/// and `hookbox outbox`.
pub(crate) fn print_json_lines(
    command: impl std::future::Future<Output = Result<Vec<Value>, String>>,
) -> Result<ExitCode, UsageError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|err| UsageError(format!("cannot start the runtime: {err}")))?;
    Ok(runtime.block_on(async {
        match command.await {
            Ok(lines) => {
                for line in lines {
                    println!("{line}");
                }
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::FAILURE
            }
        }
    }))
}

async fn execute(
    args: &InboxArgs,
    purge_policy: Option<RetentionPolicy>,
) -> Result<Vec<Value>, String> {
    // no migration: an operator command never changes the schema
    let store = open_admin(
        &args.store,
        args.schema.as_deref(),
        purge_policy.unwrap_or_default(),
    )
    .await
    .map_err(|err| error_chain(&err))?;
    let failed = |err: AnyStoreError| error_chain(&err);
    let rows = |rows: Vec<StoredDelivery>| rows.iter().map(summary).collect::<Vec<_>>();
    Ok(match &args.command {
        InboxCommand::Stats => vec![stats_json(store.stats().await.map_err(failed)?)],
        InboxCommand::List { status, limit } => {
            rows(store.list((*status).into(), *limit).await.map_err(failed)?)
        }
        InboxCommand::Dead { limit } => rows(
            store
                .list(InboxFilter::Dead, *limit)
                .await
                .map_err(failed)?,
        ),
        InboxCommand::Show { id } => match store.get(*id).await.map_err(failed)? {
            Some(row) => vec![detail(&row)],
            None => return Err(format!("no inbox row with id {id}")),
        },
        InboxCommand::Replay { id, all } => {
            let replayed = if *all {
                store
                    .replay_matching(InboxFilter::Dead)
                    .await
                    .map_err(failed)?
            } else {
                let id = id.ok_or("give a dead letter's id or --all")?;
                u64::from(store.replay(id).await.map_err(failed)?)
            };
            vec![json!({ "replayed": replayed })]
        }
        InboxCommand::Purge { .. } => {
            let Purged {
                keys,
                inbox_rows,
                outbox_messages,
            } = store
                .purge(OffsetDateTime::now_utc())
                .await
                .map_err(failed)?;
            vec![json!({
                "purged_keys": keys,
                "purged_inbox_rows": inbox_rows,
                "purged_outbox_messages": outbox_messages,
            })]
        }
    })
}

/// Builds the purge policy from `--keep provider=duration` values.
pub(crate) fn retention(
    keep: &[String],
    below_minimum: bool,
) -> Result<RetentionPolicy, UsageError> {
    let mut policy = RetentionPolicy::default();
    for rule in keep {
        let (name, duration) = rule
            .split_once('=')
            .ok_or_else(|| UsageError(format!("--keep {rule}: expected PROVIDER=DURATION")))?;
        let provider = ProviderName::from_str(name, true)
            .map_err(|_| UsageError(format!("--keep {rule}: unknown provider `{name}`")))?;
        let duration = parse_duration(duration).ok_or_else(|| {
            UsageError(format!("--keep {rule}: durations look like 90m, 24h, 30d"))
        })?;
        policy = if below_minimum {
            policy.keep_below_provider_minimum(provider.as_str(), duration)
        } else {
            policy
                .keep(provider.as_str(), provider.min_retention(), duration)
                .map_err(|err| {
                    // the library's message names its method; an operator needs the flag
                    UsageError(format!(
                        "--keep {rule}: keeping {} keys for {} s is shorter than its minimum of {} s: a resend after the purge would be applied twice; add --below-provider-minimum to accept that",
                        err.provider, err.keep_secs, err.minimum_secs
                    ))
                })?
        };
    }
    Ok(policy)
}

/// Parses `90s`, `90m`, `24h`, `30d`.
pub(crate) fn parse_duration(text: &str) -> Option<Duration> {
    let split = text.len().checked_sub(1)?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return None,
    };
    number.checked_mul(seconds).map(Duration::from_secs)
}

pub(crate) fn unix(at: Option<OffsetDateTime>) -> Value {
    at.map_or(Value::Null, |at| json!(at.unix_timestamp()))
}

fn stats_json(stats: InboxStats) -> Value {
    let now = OffsetDateTime::now_utc();
    json!({
        "pending": stats.pending,
        "processed": stats.processed,
        "dead": stats.dead,
        "oldest_pending": unix(stats.oldest_pending),
        "oldest_pending_age_secs": stats.oldest_pending.map(|at| (now - at).whole_seconds().max(0)),
    })
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

/// Adds `headers` and the raw bytes under `field` (with `<field>_encoding`) to a
/// summary: the bytes as text when they are UTF-8, else base64, never a lossy copy.
/// Shared by `hookbox inbox show` and `hookbox outbox show`.
pub(crate) fn with_bytes_and_headers(
    value: &mut Value,
    field: &str,
    bytes: &[u8],
    headers: &KeptHeaders,
) {
    let headers: Vec<Value> = headers
        .iter()
        .map(|(name, value)| json!([name.as_str(), String::from_utf8_lossy(value.as_bytes())]))
        .collect();
    let (text, encoding) = match std::str::from_utf8(bytes) {
        Ok(text) => (text.to_string(), "utf-8"),
        Err(_) => (
            base64::engine::general_purpose::STANDARD.encode(bytes),
            "base64",
        ),
    };
    if let Value::Object(map) = value {
        map.insert("headers".into(), Value::Array(headers));
        map.insert(field.into(), Value::String(text));
        map.insert(format!("{field}_encoding"), Value::String(encoding.into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_have_a_unit() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("24h"), Some(Duration::from_secs(86_400)));
        assert_eq!(
            parse_duration("30d"),
            Some(Duration::from_secs(30 * 86_400))
        );
        assert_eq!(parse_duration("30"), None);
        assert_eq!(parse_duration("h"), None);
        assert_eq!(parse_duration(""), None);
        assert_eq!(parse_duration("5w"), None);
    }

    #[test]
    fn a_keep_below_the_provider_minimum_is_refused_unless_asked_for() {
        let short = ["shopify=1h".to_string()];
        let refused = retention(&short, false).unwrap_err().0;
        assert!(refused.contains("--below-provider-minimum"), "{refused}");
        assert!(
            !refused.contains("keep_below_provider_minimum"),
            "{refused}"
        );
        let policy = retention(&short, true).unwrap();
        assert_eq!(policy.keep_for("shopify"), Duration::from_secs(3600));
        let ok = retention(&["shopify=24h".to_string()], false).unwrap();
        assert_eq!(ok.keep_for("shopify"), Duration::from_secs(86_400));
        assert!(retention(&["acme=24h".to_string()], false).is_err());
    }
}
