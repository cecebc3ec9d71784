//! The outbox on SQLite: messages staged in the claim's transaction, and a lease
//! per message for the relay instead of `SKIP LOCKED`.
//!
//! - **stage** is one `INSERT … ON CONFLICT (message_id) DO NOTHING` on the
//!   caller's connection, inside the caller's transaction: the message commits with
//!   the claim and the handler's writes or not at all, and a message staged again
//!   (a handler retried after a rollback, a replayed delivery) keeps its first row.
//! - **lease** is one short `BEGIN IMMEDIATE` transaction, run in one trip to the
//!   blocking pool so the write lock is held for the statements only: select the due
//!   messages in staging order, skipping any whose ordering key has an earlier
//!   message still pending (sent and dead ones do not block), then count an attempt
//!   on each and write a random `lease_token` with `leased_until = now + lease`.
//!   Other relays, in this process or another one on the same file, skip them until
//!   the lease expires. The send itself runs outside any transaction.
//! - **settle** is one `UPDATE` that matches the lease's `seq` and token, so a relay
//!   whose lease expired (and whose message another relay took) changes nothing.
//!
//! An earlier message of a key that another relay holds is still pending: it blocks
//! the later ones until it is sent or dead, which is what keeps the order per key
//! when its send fails and is retried.
//!
//! The operator's queries (one message, the lists, replays, counts, the purge of
//! sent messages), [`OutboxAdmin`](hookbox_core::OutboxAdmin), are in [`admin`];
//! the row in [`rows`](crate::rows).

use std::time::Duration;

mod admin;

use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::SqliteConnection;
use diesel_async::RunQueryDsl as _;
use hookbox_core::spi::{Leased, Settlement, Staged, StagedMessage};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{BoxFuture, OutboxStore};

use crate::connect::Conn;
use crate::error::SqliteError;
use crate::rows::{duration_micros, micros};
use crate::store::SqliteStore;

// the columns `stage_query!` writes (and the key); the others take their defaults
// and are read and written with the SQL text below
diesel::table! {
    hookbox_outbox (seq) {
        seq -> BigInt,
        message_id -> Text,
        source -> Text,
        provider -> Text,
        delivery_id -> Text,
        tenant -> Nullable<Text>,
        handler -> Text,
        sequence -> BigInt,
        sink -> Text,
        ordering_key -> Nullable<Text>,
        payload -> Binary,
        headers -> Text,
    }
}

/// `OutboxStore::stage` for `$message` (a `&StagedMessage`): `INSERT … ON CONFLICT
/// (message_id) DO NOTHING`, so a message staged again (a retried handler, a
/// replayed delivery) keeps its first row; one row inserted means it is new.
/// `staged_at` and `next_attempt_at` take the column defaults. Built (not
/// `sql_query`), like [`claim_query!`](crate::blocking::claim_query), so that a
/// handler staging on every delivery reuses one prepared statement per connection.
macro_rules! stage_query {
    ($message:expr) => {{
        use crate::outbox::hookbox_outbox::dsl as outbox;
        use diesel::ExpressionMethods as _;
        let staged: &hookbox_core::spi::StagedMessage = $message;
        diesel::insert_into(outbox::hookbox_outbox)
            .values((
                outbox::message_id.eq(staged.id.as_str()),
                outbox::source.eq(staged.key.scope()),
                outbox::provider.eq(staged.key.provider()),
                outbox::delivery_id.eq(staged.key.delivery_id()),
                outbox::tenant.eq(staged.key.tenant()),
                outbox::handler.eq(staged.handler.as_str()),
                outbox::sequence.eq(i64::from(staged.sequence)),
                outbox::sink.eq(staged.message.sink()),
                outbox::ordering_key.eq(staged.message.ordering_key()),
                outbox::payload.eq(staged.message.payload().as_ref()),
                outbox::headers.eq(staged.message.headers().to_json()),
            ))
            .on_conflict(outbox::message_id)
            .do_nothing()
    }};
}

/// The lease transaction on the plain connection (see the module docs), apart so
/// that diesel's sync `RunQueryDsl` does not meet the async one.
mod blocking_lease {
    use diesel::RunQueryDsl as _;
    use diesel::sql_types::{BigInt, Text};
    use diesel::sqlite::SqliteConnection;
    use hookbox_core::spi::{Lease, Leased};

    use crate::error::SqliteError;
    use crate::rows::{OutboxRow, select_outbox};

    /// The messages a relay may send now, in staging order: pending, due, no live
    /// lease, and no earlier message of their ordering key still pending (one leased by
    /// another relay counts: it may yet fail and be retried, and the order per key must
    /// hold). Binds: now, limit.
    ///
    /// `INDEXED BY` the due index: left to itself the planner walks the table in `seq`
    /// order for the `ORDER BY … LIMIT`, through every sent message the retention
    /// keeps (all older than the pending ones) on every poll; the index holds pending
    /// messages only, which are then sorted.
    pub(super) const OUTBOX_DUE: &str = select_outbox!(
        "AS o INDEXED BY hookbox_outbox_due WHERE sent_at IS NULL AND dead_at IS NULL \
         AND next_attempt_at <= ?1 AND (leased_until IS NULL OR leased_until <= ?1) \
         AND (ordering_key IS NULL OR NOT EXISTS (SELECT 1 FROM hookbox_outbox AS e \
              WHERE e.ordering_key = o.ordering_key AND e.seq < o.seq \
              AND e.sent_at IS NULL AND e.dead_at IS NULL)) \
         ORDER BY seq LIMIT ?2"
    );

    /// Leases one message and counts the attempt. Binds: leased_until, token, seq.
    const OUTBOX_TAKE_LEASE: &str = "UPDATE hookbox_outbox \
         SET attempts = attempts + 1, leased_until = ?, lease_token = ? WHERE seq = ?";

    /// Makes a message that cannot be read back a dead letter during a lease, so it
    /// never blocks the messages behind it. Binds: dead_at, last_error, seq.
    const OUTBOX_DEAD_UNREADABLE: &str = "UPDATE hookbox_outbox SET dead_at = ?, \
         last_error = ?, leased_until = NULL, lease_token = NULL WHERE seq = ?";

    /// Leases up to `limit` due messages until `until`, all times in unix
    /// microseconds, in one `BEGIN IMMEDIATE` transaction.
    pub(super) fn lease(
        conn: &mut SqliteConnection,
        limit: u32,
        until: i64,
        now: i64,
    ) -> Result<Vec<Leased>, SqliteError> {
        conn.immediate_transaction(|conn| {
            let rows = diesel::sql_query(OUTBOX_DUE)
                .bind::<BigInt, _>(now)
                .bind::<BigInt, _>(i64::from(limit))
                .load::<OutboxRow>(conn)?;
            let mut leased = Vec::with_capacity(rows.len());
            for row in rows {
                let seq = row.seq();
                let mut message = match row.into_message() {
                    Ok(message) => message,
                    Err(err) => {
                        // retrying cannot repair the row: dead-letter it so it never
                        // blocks the messages of its key behind it, and say why
                        diesel::sql_query(OUTBOX_DEAD_UNREADABLE)
                            .bind::<BigInt, _>(now)
                            .bind::<Text, _>(err.to_string())
                            .bind::<BigInt, _>(seq)
                            .execute(conn)?;
                        continue;
                    }
                };
                // never 0: a settle with a zero token (a lease that was never taken)
                // can match nothing
                let token = fastrand::i64(1..);
                diesel::sql_query(OUTBOX_TAKE_LEASE)
                    .bind::<BigInt, _>(until)
                    .bind::<BigInt, _>(token)
                    .bind::<BigInt, _>(seq)
                    .execute(conn)?;
                // the row as it is now: this send counted
                message.attempts = message.attempts.saturating_add(1);
                leased.push(Leased {
                    message,
                    lease: Lease { seq, token },
                });
            }
            Ok(leased)
        })
    }
}

/// A settlement that owns its text, to cross into the blocking pool.
enum OwnedSettlement {
    Sent,
    Retry { error: String, at: OffsetDateTime },
    Dead { error: String },
    Release { error: String, at: OffsetDateTime },
}

impl From<Settlement<'_>> for OwnedSettlement {
    fn from(settlement: Settlement<'_>) -> Self {
        match settlement {
            Settlement::Sent => Self::Sent,
            Settlement::Retry { error, at } => Self::Retry {
                error: error.to_string(),
                at,
            },
            Settlement::Dead { error } => Self::Dead {
                error: error.to_string(),
            },
            Settlement::Release { error, at } => Self::Release {
                error: error.to_string(),
                at,
            },
        }
    }
}

impl OwnedSettlement {
    fn borrowed(&self) -> Settlement<'_> {
        match self {
            Self::Sent => Settlement::Sent,
            Self::Retry { error, at } => Settlement::Retry { error, at: *at },
            Self::Dead { error } => Settlement::Dead { error },
            Self::Release { error, at } => Settlement::Release { error, at: *at },
        }
    }
}

/// `Settlement::Sent`, while the lease is still the caller's; the lease cleared.
/// Binds: sent_at, seq, token.
const OUTBOX_SENT: &str = "UPDATE hookbox_outbox \
     SET sent_at = ?, leased_until = NULL, lease_token = NULL \
     WHERE seq = ? AND lease_token = ? AND sent_at IS NULL AND dead_at IS NULL";

/// `Settlement::Retry`, while the lease is still the caller's; the lease cleared.
/// Binds: last_error, next_attempt_at, seq, token.
const OUTBOX_RETRY: &str = "UPDATE hookbox_outbox \
     SET last_error = ?, next_attempt_at = ?, leased_until = NULL, lease_token = NULL \
     WHERE seq = ? AND lease_token = ? AND sent_at IS NULL AND dead_at IS NULL";

/// `Settlement::Dead`, while the lease is still the caller's; the lease cleared.
/// Binds: dead_at, last_error, seq, token.
const OUTBOX_DEAD: &str = "UPDATE hookbox_outbox \
     SET dead_at = ?, last_error = ?, leased_until = NULL, lease_token = NULL \
     WHERE seq = ? AND lease_token = ? AND sent_at IS NULL AND dead_at IS NULL";

/// `Settlement::Release`, while the lease is still the caller's: the lease cleared
/// and its attempt given back. Binds: last_error, next_attempt_at, seq, token.
const OUTBOX_RELEASE: &str = "UPDATE hookbox_outbox \
     SET attempts = MAX(attempts - 1, 0), last_error = ?, next_attempt_at = ?, \
     leased_until = NULL, lease_token = NULL \
     WHERE seq = ? AND lease_token = ? AND sent_at IS NULL AND dead_at IS NULL";

/// The statement that records `settlement` on the row `lease` holds, matching its
/// token (a relay whose lease expired changes nothing); `now` in unix
/// microseconds.
fn settle_query(
    lease: hookbox_core::spi::Lease,
    settlement: Settlement<'_>,
    now: i64,
) -> diesel::query_builder::BoxedSqlQuery<'_, diesel::sqlite::Sqlite, diesel::query_builder::SqlQuery>
{
    let query = match settlement {
        Settlement::Sent => diesel::sql_query(OUTBOX_SENT)
            .into_boxed()
            .bind::<BigInt, _>(now),
        Settlement::Retry { error, at } => diesel::sql_query(OUTBOX_RETRY)
            .into_boxed()
            .bind::<Text, _>(error)
            .bind::<BigInt, _>(micros(at)),
        Settlement::Dead { error } => diesel::sql_query(OUTBOX_DEAD)
            .into_boxed()
            .bind::<BigInt, _>(now)
            .bind::<Text, _>(error),
        Settlement::Release { error, at } => diesel::sql_query(OUTBOX_RELEASE)
            .into_boxed()
            .bind::<Text, _>(error)
            .bind::<BigInt, _>(micros(at)),
    };
    query
        .bind::<BigInt, _>(lease.seq)
        .bind::<BigInt, _>(lease.token)
}

impl OutboxStore for SqliteStore {
    fn stage<'a>(
        &'a self,
        conn: &'a mut Conn,
        message: &'a StagedMessage,
    ) -> BoxFuture<'a, Result<Staged, SqliteError>> {
        Box::pin(async move {
            // one statement on the caller's connection, one blocking-pool trip; the
            // caller's transaction commits it or rolls it back
            let inserted = stage_query!(message).execute(conn).await?;
            Ok(if inserted == 1 {
                Staged::New
            } else {
                Staged::AlreadyStaged
            })
        })
    }

    fn lease(
        &self,
        limit: u32,
        lease: Duration,
        now: OffsetDateTime,
    ) -> BoxFuture<'_, Result<Vec<Leased>, SqliteError>> {
        Box::pin(async move {
            if limit == 0 {
                return Ok(Vec::new());
            }
            let now = micros(now);
            let until = now.saturating_add(duration_micros(lease));
            let mut conn = self.connection().await?;
            // the whole transaction in one trip: if this future is dropped, the
            // blocking task still commits (or rolls back) before the connection is
            // used again, and the write lock is never held across an await
            conn.spawn_blocking(move |conn: &mut SqliteConnection| {
                Ok(blocking_lease::lease(conn, limit, until, now))
            })
            .await?
        })
    }

    fn settle<'a>(
        &'a self,
        lease: hookbox_core::spi::Lease,
        settlement: Settlement<'a>,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<bool, SqliteError>> {
        Box::pin(async move {
            let now = micros(now);
            let mut conn = self.connection().await?;
            // one statement in autocommit, matching the lease's token: a relay whose
            // lease expired changes nothing
            let settled = settle_query(lease, settlement, now)
                .execute(&mut *conn)
                .await?;
            Ok(settled == 1)
        })
    }

    fn settle_many<'a>(
        &'a self,
        settlements: &'a [(hookbox_core::spi::Lease, Settlement<'a>)],
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Vec<bool>, SqliteError>> {
        Box::pin(async move {
            if settlements.is_empty() {
                return Ok(Vec::new());
            }
            let now = micros(now);
            // owned for the blocking pool: one `BEGIN IMMEDIATE` for the whole batch,
            // one trip, the write lock held for the statements only
            let owned: Vec<(hookbox_core::spi::Lease, OwnedSettlement)> = settlements
                .iter()
                .map(|(lease, settlement)| (*lease, OwnedSettlement::from(*settlement)))
                .collect();
            let mut conn = self.connection().await?;
            conn.spawn_blocking(move |conn: &mut SqliteConnection| {
                Ok(conn.immediate_transaction(|conn| {
                    owned
                        .iter()
                        .map(|(lease, settlement)| {
                            let query = settle_query(*lease, settlement.borrowed(), now);
                            diesel::RunQueryDsl::execute(query, conn).map(|n| n == 1)
                        })
                        .collect::<Result<Vec<bool>, diesel::result::Error>>()
                        .map_err(SqliteError::from)
                }))
            })
            .await?
        })
    }
}
