//! Retention: [`Purge`] for [`MysqlStore`] (expired keys, processed inbox rows and
//! sent outbox messages), the outbox's own share of it, and the batched deletes
//! both run on, rule by rule and then the rest
//! ([`RetentionPolicy::cutoffs`]). The store's [`Purge::purge`] (also the inbox's
//! [`InboxAdmin::purge`](hookbox_core::InboxAdmin::purge)) and the outbox's
//! [`OutboxAdmin::purge`](hookbox_core::OutboxAdmin::purge) (in `outbox::admin`)
//! both start here.

use diesel_async::{AsyncMysqlConnection, RunQueryDsl};
use hookbox_core::spi::Cutoffs;
use hookbox_core::{BoxFuture, Purge, Purged, RetentionPolicy};
use time::OffsetDateTime;

use crate::error::MysqlError;
use crate::store::MysqlStore;

/// One table's purge: the `DELETE … WHERE` up to the provider condition, and the
/// column its cutoff applies to. The statement is completed with `provider IN
/// (…)` (the providers a rule names) or `provider NOT IN (…)` (those without a rule
/// of their own), `AND <column> < ?` and `LIMIT ?`.
struct Table {
    delete: &'static str,
    at: &'static str,
}

const PURGE_KEYS: Table = Table {
    delete: "DELETE FROM hookbox_processed_keys WHERE ",
    at: "received_at",
};
// processed rows only: pending rows and dead letters are never purged
const PURGE_ROWS: Table = Table {
    delete: "DELETE FROM hookbox_inbox WHERE processed_at IS NOT NULL AND dead_at IS NULL AND ",
    at: "received_at",
};
// sent messages only: pending ones and dead letters stay
const PURGE_OUTBOX: Table = Table {
    delete: "DELETE FROM hookbox_outbox WHERE sent_at IS NOT NULL AND ",
    at: "sent_at",
};

/// Deletes expired keys, processed inbox rows and sent outbox messages, provider by
/// provider, on one pooled connection; unprocessed rows, dead letters and unsent
/// messages stay.
impl Purge for MysqlStore {
    fn purge(&self, now: OffsetDateTime) -> BoxFuture<'_, Result<Purged, MysqlError>> {
        Box::pin(self.with_connection(async move |conn| {
            purge_all(conn, self.inner.options.retention(), now).await
        }))
    }
}

/// Deletes expired keys, processed inbox rows and sent outbox messages, provider by
/// provider, in batches of `policy.batch()` rows per statement, each its own
/// transaction, so a purge never holds many locks for long.
async fn purge_all(
    conn: &mut AsyncMysqlConnection,
    policy: &RetentionPolicy,
    now: OffsetDateTime,
) -> Result<Purged, MysqlError> {
    let cutoffs = policy.cutoffs(now);
    let batch = i64::from(policy.batch());
    Ok(Purged {
        keys: by_provider(conn, &cutoffs, &PURGE_KEYS, batch).await?,
        inbox_rows: by_provider(conn, &cutoffs, &PURGE_ROWS, batch).await?,
        outbox_messages: by_provider(conn, &cutoffs, &PURGE_OUTBOX, batch).await?,
    })
}

/// Deletes sent messages past their provider's retention, with the same rules and
/// batches as the keys and inbox rows ([`Purge::purge`] deletes them too).
pub(crate) async fn purge_sent(
    conn: &mut AsyncMysqlConnection,
    policy: &RetentionPolicy,
    now: OffsetDateTime,
) -> Result<u64, MysqlError> {
    let batch = i64::from(policy.batch());
    by_provider(conn, &policy.cutoffs(now), &PURGE_OUTBOX, batch).await
}

/// Deletes one table's rows past `cutoffs`: each ruled provider's, then every other
/// provider's; returns how many.
async fn by_provider(
    conn: &mut AsyncMysqlConnection,
    cutoffs: &Cutoffs,
    table: &Table,
    batch: i64,
) -> Result<u64, MysqlError> {
    let mut total = 0;
    for (provider, before) in &cutoffs.per_provider {
        total += delete_in_batches(
            conn,
            table,
            Providers::In(std::slice::from_ref(provider)),
            *before,
            batch,
        )
        .await?;
    }
    total += delete_in_batches(
        conn,
        table,
        Providers::NotIn(&cutoffs.ruled),
        cutoffs.others,
        batch,
    )
    .await?;
    Ok(total)
}

/// Which providers' rows a statement deletes.
#[derive(Clone, Copy)]
enum Providers<'a> {
    In(&'a [String]),
    NotIn(&'a [String]),
}

impl Providers<'_> {
    /// The condition, with one `?` per provider (`IN ()` is not SQL: no provider
    /// to leave out is no condition).
    fn condition(self) -> String {
        let list = |n: usize| vec!["?"; n].join(", ");
        match self {
            Self::In([]) => "FALSE".to_string(),
            Self::In(names) => format!("provider IN ({})", list(names.len())),
            Self::NotIn([]) => "TRUE".to_string(),
            Self::NotIn(names) => format!("provider NOT IN ({})", list(names.len())),
        }
    }
}

/// Runs a `DELETE … LIMIT batch` statement until it deletes fewer than `batch`
/// rows; returns the total.
async fn delete_in_batches(
    conn: &mut AsyncMysqlConnection,
    table: &Table,
    providers: Providers<'_>,
    before: OffsetDateTime,
    batch: i64,
) -> Result<u64, MysqlError> {
    use diesel::sql_types::{BigInt, Datetime, Text};
    let sql = format!(
        "{}{} AND {} < ? LIMIT ?",
        table.delete,
        providers.condition(),
        table.at
    );
    let names = match providers {
        Providers::In(names) | Providers::NotIn(names) => names,
    };
    let mut total = 0;
    loop {
        let mut query = diesel::sql_query(sql.as_str()).into_boxed();
        for name in names {
            query = query.bind::<Text, _>(name);
        }
        let deleted = query
            .bind::<Datetime, _>(before)
            .bind::<BigInt, _>(batch)
            .execute(conn)
            .await
            .map_err(MysqlError::query)?;
        total += deleted as u64;
        if (deleted as i64) < batch {
            return Ok(total);
        }
    }
}
