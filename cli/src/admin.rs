//! What `hookbox inbox` and `hookbox outbox` share: the commands' shapes over one
//! table (stats, list, show, replay one or all, purge), their `--limit` and
//! `--keep`, opening the store, the runtime, the JSON lines on stdout and the exit
//! codes.
//!
//! `inbox.rs` and `outbox.rs` keep what is their table's own: their arguments, their
//! rows' JSON, and an implementation of [`Table`] for their operator view
//! (`dyn InboxAdmin`, `dyn OutboxAdmin`). They turn their subcommand into a [`Verb`]
//! and hand it to [`run`].

#![allow(clippy::print_stdout)] // printing the JSON lines is this command's job

use std::fmt::Display;
use std::process::ExitCode;
use std::time::Duration;

use base64::Engine as _;
use clap::{Args, ValueEnum as _};
use hookbox_cli::store::OpenError;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{AnyStoreError, KeptHeaders, RetentionPolicy, error_chain};
use serde_json::{Value, json};

use crate::UsageError;
use crate::providers::ProviderName;

/// `--limit` of `list` and `dead`.
#[derive(Debug, Args)]
pub(crate) struct Limit {
    /// At most this many.
    #[arg(long, default_value_t = 20)]
    pub(crate) limit: u32,
}

/// One table's operator view as `hookbox inbox` or `hookbox outbox` prints it: the
/// verbs [`execute`] calls, each answering with its JSON.
pub(crate) trait Table {
    /// A row's id, as `show` and `replay` take it.
    type Id: Display;
    /// The rows `list --status` selects.
    type Filter;
    /// What `show` calls a row it cannot find: `no {ROW} with id {id}`.
    const ROW: &'static str;
    /// Why `replay` has nothing to do without an id or `--all` (clap asks first).
    const REPLAY_NEEDS: &'static str;

    /// Opens the view of the store `store` names, with `retention` as what a purge
    /// deletes; nothing is migrated.
    async fn open(
        store: &str,
        schema: Option<&str>,
        retention: RetentionPolicy,
    ) -> Result<Box<Self>, OpenError>;

    /// `stats`: the counts.
    async fn stats_line(&self) -> Result<Value, AnyStoreError>;

    /// `list` and `dead`: a summary of each row `filter` selects, at most `limit`.
    async fn list_lines(
        &self,
        filter: Self::Filter,
        limit: u32,
    ) -> Result<Vec<Value>, AnyStoreError>;

    /// `show`: one row with its bytes and headers; `None` when there is none.
    async fn show_line(&self, id: &Self::Id) -> Result<Option<Value>, AnyStoreError>;

    /// `replay <id>`: how many rows it made due again, or why it failed.
    async fn replay_one(&self, id: &Self::Id) -> Result<u64, String>;

    /// `replay --all`: makes every dead letter due again; how many.
    async fn replay_dead(&self) -> Result<u64, AnyStoreError>;

    /// `purge`: deletes what the retention lets go at `now`; how much.
    async fn purge_line(&self, now: OffsetDateTime) -> Result<Value, AnyStoreError>;
}

/// An operator command on a [`Table`], as the table's subcommand asked for it.
pub(crate) enum Verb<'a, T: Table + ?Sized> {
    /// `stats`.
    Stats,
    /// `list` (`dead` is `list` of the dead letters).
    List { filter: T::Filter, limit: u32 },
    /// `show <id>`.
    Show(T::Id),
    /// `replay <id>` or `replay --all`, answering `{"<answer>": count}`.
    Replay {
        id: Option<T::Id>,
        all: bool,
        answer: &'static str,
    },
    /// `purge`, with the retention its `--keep` values give.
    Purge {
        keep: &'a [String],
        below_provider_minimum: bool,
    },
}

/// Runs `verb` on the table of the store `store` names (`schema`: its Postgres
/// schema) on a small runtime and prints its JSON lines: exit 0, or 1 with the error
/// on stderr when the store failed; `Err` (exit 2) for usage errors.
pub(crate) fn run<T: Table + ?Sized>(
    store: &str,
    schema: Option<&str>,
    verb: Verb<'_, T>,
) -> Result<ExitCode, UsageError> {
    let purge_policy = match &verb {
        Verb::Purge {
            keep,
            below_provider_minimum,
        } => Some(retention(keep, *below_provider_minimum)?),
        _ => None,
    };
    print_json_lines(execute(
        store,
        schema,
        purge_policy.unwrap_or_default(),
        verb,
    ))
}

fn print_json_lines(
    command: impl Future<Output = Result<Vec<Value>, String>>,
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

async fn execute<T: Table + ?Sized>(
    store: &str,
    schema: Option<&str>,
    retention: RetentionPolicy,
    verb: Verb<'_, T>,
) -> Result<Vec<Value>, String> {
    // no migration: an operator command never changes the schema
    let table = T::open(store, schema, retention)
        .await
        .map_err(|err| error_chain(&err))?;
    let failed = |err: AnyStoreError| error_chain(&err);
    Ok(match verb {
        Verb::Stats => vec![table.stats_line().await.map_err(failed)?],
        Verb::List { filter, limit } => table.list_lines(filter, limit).await.map_err(failed)?,
        Verb::Show(id) => match table.show_line(&id).await.map_err(failed)? {
            Some(line) => vec![line],
            None => return Err(format!("no {} with id {id}", T::ROW)),
        },
        Verb::Replay { id, all, answer } => {
            let replayed = if all {
                table.replay_dead().await.map_err(failed)?
            } else {
                table.replay_one(&id.ok_or(T::REPLAY_NEEDS)?).await?
            };
            vec![json!({ answer: replayed })]
        }
        Verb::Purge { .. } => vec![
            table
                .purge_line(OffsetDateTime::now_utc())
                .await
                .map_err(failed)?,
        ],
    })
}

/// Builds the purge policy from `--keep provider=duration` values.
fn retention(keep: &[String], below_minimum: bool) -> Result<RetentionPolicy, UsageError> {
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

/// A time as unix seconds, or `null`.
pub(crate) fn unix(at: Option<OffsetDateTime>) -> Value {
    at.map_or(Value::Null, |at| json!(at.unix_timestamp()))
}

/// `stats`' line: the backlog (`pending`, the oldest pending row's time and age),
/// the rows done (`done`: `("processed", n)`, `("sent", n)`) and the dead letters.
pub(crate) fn counts(
    pending: u64,
    (done, done_count): (&str, u64),
    dead: u64,
    oldest_pending: Option<OffsetDateTime>,
) -> Value {
    let now = OffsetDateTime::now_utc();
    json!({
        "pending": pending,
        done: done_count,
        "dead": dead,
        "oldest_pending": unix(oldest_pending),
        "oldest_pending_age_secs": oldest_pending.map(|at| (now - at).whole_seconds().max(0)),
    })
}

/// Adds `headers` and the raw bytes under `field` (with `<field>_encoding`) to a
/// summary: the bytes as text when they are UTF-8, else base64, never a lossy copy.
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
