//! The outbox: [`OutboxStore`] for [`MysqlStore`]. Messages are staged on the
//! caller's connection, leased to relays with `FOR UPDATE SKIP LOCKED` and a lease
//! token, settled by the lease's holder only, and purged once sent.
//!
//! The row and its columns are in [`row`]; the operator's verbs,
//! [`OutboxAdmin`](hookbox_core::OutboxAdmin) (one message, the lists, replays,
//! counts, the purge of sent messages), with their queries in [`admin`]; the
//! purge's deletes in [`purge`](crate::purge).

mod admin;
mod row;

use std::hash::{BuildHasher as _, RandomState};
use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Blob, Datetime, Integer, Nullable, Text};
use diesel_async::{AsyncConnection as _, AsyncMysqlConnection, RunQueryDsl};
use hookbox_core::spi::{Lease, Leased, Settlement, Staged, StagedMessage};
use hookbox_core::{BoxFuture, OutboxStore, error_chain};
use time::{OffsetDateTime, PrimitiveDateTime};

use self::row::OutboxRow;
use crate::error::MysqlError;
use crate::store::MysqlStore;
use crate::watch::insert_new;

/// Picks and locks the due messages of a lease, inside its short transaction: the
/// first `?` and second `?` are the relay's `now`, the third the limit. The rows come
/// back as they will be once leased (`attempts + 1`).
///
/// Why two relays running this at once cannot break the guarantees, under READ
/// COMMITTED (the pool's level):
///
/// - One message, one live lease. A relay takes a row only by locking it (`FOR
///   UPDATE`), and keeps the lock until its transaction commits the new lease. A
///   row another relay has locked is skipped (`SKIP LOCKED`), never waited for. A
///   locking read in InnoDB reads the row's newest committed version, so a row
///   another relay leased and committed is seen with its `leased_until` in the
///   future and left out. `settle` and an operator's `replay` meet the lease the same
///   way, on the row lock, so a settle with an old token matches nothing once a new
///   lease committed.
/// - Order per key. The `NOT EXISTS` reads earlier rows of the key without locking
///   them (a locking clause of the outer query does not lock a subquery's rows): a
///   row leased, or being leased, by another relay is still neither sent nor dead,
///   so it still holds back every later row of its key. The read can be older than
///   the truth only in one direction that matters here: a settle committed after it
///   (a row became sent or dead) is not seen, which only holds a later row back until
///   the next call. Within one call, the earliest pending row of a key is the only
///   one of its key that can pass. A row becomes pending again only through
///   `OutboxAdmin::replay` / `replay_matching`, an operator's explicit request to
///   send it again, after the later ones if those went meanwhile.
///
/// Not covered, by any relay-side check: two transactions staging messages with the
/// same ordering key at the same time take their `seq` when they insert, but commit
/// in either order. A later `seq` committed first is sent before the earlier one
/// exists for the relay. Messages staged in one transaction, or in transactions that
/// commit one after the other, keep their order.
const LEASE_PICK: &str = "SELECT m.seq, m.message_id, m.source, m.provider, m.delivery_id, \
       m.tenant, m.handler, m.sequence, m.sink, m.ordering_key, m.payload, m.headers, \
       m.staged_at, m.attempts + 1 AS attempts, m.last_error, m.next_attempt_at, \
       m.sent_at, m.dead_at \
     FROM hookbox_outbox m \
     WHERE m.sent_at IS NULL AND m.dead_at IS NULL \
       AND m.next_attempt_at <= ? \
       AND (m.leased_until IS NULL OR m.leased_until <= ?) \
       AND (m.ordering_key IS NULL OR NOT EXISTS ( \
         SELECT 1 FROM hookbox_outbox e \
         WHERE e.ordering_key = m.ordering_key AND e.seq < m.seq \
           AND e.sent_at IS NULL AND e.dead_at IS NULL)) \
     ORDER BY m.seq \
     LIMIT ? \
     FOR UPDATE SKIP LOCKED";

/// Settles a message if the lease is still held: binds `sent_at`, `dead_at`, the
/// new `last_error` and `next_attempt_at` (each kept when `NULL`), the attempts
/// given back, then the row's `seq` and the lease's token. The connection counts
/// the rows an `UPDATE` matched (`CLIENT_FOUND_ROWS`), so 1 means the lease was held.
const SETTLE: &str = "UPDATE hookbox_outbox SET \
       sent_at = ?, dead_at = ?, \
       last_error = COALESCE(?, last_error), \
       next_attempt_at = COALESCE(?, next_attempt_at), \
       attempts = GREATEST(attempts - ?, 0), \
       leased_until = NULL, lease_token = NULL \
     WHERE seq = ? AND lease_token = ? AND sent_at IS NULL AND dead_at IS NULL";

/// The columns [`SETTLE`] writes for `settlement`: sent_at, dead_at, last_error,
/// next_attempt_at and the attempts given back.
fn settle_columns<'a>(
    settlement: Settlement<'a>,
    now: OffsetDateTime,
) -> (
    Option<OffsetDateTime>,
    Option<OffsetDateTime>,
    Option<&'a str>,
    Option<OffsetDateTime>,
    i32,
) {
    match settlement {
        Settlement::Sent => (Some(now), None, None, None, 0),
        Settlement::Retry { error, at } => (None, None, Some(error), Some(at), 0),
        Settlement::Dead { error } => (None, Some(now), Some(error), None, 0),
        Settlement::Release { error, at } => (None, None, Some(error), Some(at), 1),
    }
}

/// Runs [`SETTLE`] for one lease; `true` when the lease was still held.
async fn settle_one(
    conn: &mut AsyncMysqlConnection,
    lease: Lease,
    settlement: Settlement<'_>,
    now: OffsetDateTime,
) -> QueryResult<bool> {
    let (sent_at, dead_at, error, at, give_back) = settle_columns(settlement, now);
    // a concurrent lease of the same row holds its row lock until it commits; this
    // waits for it and then checks the token on the committed version
    let settled = diesel::sql_query(SETTLE)
        .bind::<Nullable<Datetime>, _>(sent_at)
        .bind::<Nullable<Datetime>, _>(dead_at)
        .bind::<Nullable<Text>, _>(error)
        .bind::<Nullable<Datetime>, _>(at)
        .bind::<Integer, _>(give_back)
        .bind::<BigInt, _>(lease.seq)
        .bind::<BigInt, _>(lease.token)
        .execute(conn)
        .await?;
    Ok(settled == 1)
}

/// A row's seq and lease token, as [`settle_sent`]'s locking read returns them.
#[derive(QueryableByName)]
struct HeldLease {
    #[diesel(sql_type = BigInt)]
    seq: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    lease_token: Option<i64>,
}

/// Settles `sent` (each with its index in the caller's batch) as sent at `now`, in
/// the caller's transaction, and returns for each index whether its lease was still
/// held. Two statements whatever the count: a locking read of the rows (it waits for
/// a concurrent lease of one of them to commit, as [`SETTLE`] does, and keeps them
/// until the caller commits), then one `UPDATE` of the rows whose token still
/// matches.
async fn settle_sent(
    conn: &mut AsyncMysqlConnection,
    sent: &[(usize, Lease)],
    now: OffsetDateTime,
) -> QueryResult<Vec<(usize, bool)>> {
    if sent.is_empty() {
        return Ok(Vec::new());
    }
    // seqs are integers: nothing to escape
    let list = |seqs: &mut dyn Iterator<Item = i64>| {
        seqs.map(|seq| seq.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let current: Vec<HeldLease> = diesel::sql_query(format!(
        "SELECT seq, lease_token FROM hookbox_outbox \
         WHERE seq IN ({}) AND sent_at IS NULL AND dead_at IS NULL \
         ORDER BY seq FOR UPDATE",
        list(&mut sent.iter().map(|(_, lease)| lease.seq))
    ))
    .load(conn)
    .await?;
    let outcome: Vec<(usize, bool)> = sent
        .iter()
        .map(|(i, lease)| {
            let held = current
                .iter()
                .any(|row| row.seq == lease.seq && row.lease_token == Some(lease.token));
            (*i, held)
        })
        .collect();
    let held_seqs: Vec<i64> = sent
        .iter()
        .zip(&outcome)
        .filter(|(_, (_, held))| *held)
        .map(|((_, lease), _)| lease.seq)
        .collect();
    if !held_seqs.is_empty() {
        diesel::sql_query(format!(
            "UPDATE hookbox_outbox SET sent_at = ?, leased_until = NULL, lease_token = NULL \
             WHERE seq IN ({})",
            list(&mut held_seqs.iter().copied())
        ))
        .bind::<Datetime, _>(now)
        .execute(conn)
        .await?;
    }
    Ok(outcome)
}

/// A dead letter made of a row whose headers cannot be read back, so it holds up
/// neither the relay nor the later messages of its ordering key.
const BURY: &str = "UPDATE hookbox_outbox SET \
       dead_at = ?, last_error = ?, leased_until = NULL, lease_token = NULL \
     WHERE seq = ? AND lease_token = ?";

/// Stages one message, in column order, the key as `hookbox_inbox` keeps it.
const STAGE: &str = "INSERT INTO hookbox_outbox (message_id, source, provider, \
       delivery_id, tenant, handler, sequence, sink, ordering_key, payload, headers, \
       staged_at, next_attempt_at) \
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))";

/// A fresh lease token: random (std's per-instance random hasher keys), never 0, so
/// that a [`Lease`] made up with token 0 matches no row.
fn new_token(now: OffsetDateTime) -> i64 {
    let bits = RandomState::new().hash_one(now.unix_timestamp_nanos());
    match i64::from_ne_bytes(bits.to_ne_bytes()) {
        0 => 1,
        token => token,
    }
}

/// The end of a lease of `lease` from `now`, saturating at the latest time `time`
/// represents (the end of year 9999, as `DATETIME`'s range).
fn lease_end(now: OffsetDateTime, lease: Duration) -> OffsetDateTime {
    time::Duration::try_from(lease)
        .ok()
        .and_then(|lease| now.checked_add(lease))
        .unwrap_or(PrimitiveDateTime::MAX.assume_utc())
}

impl OutboxStore for MysqlStore {
    fn stage<'a>(
        &'a self,
        conn: &'a mut AsyncMysqlConnection,
        message: &'a StagedMessage,
    ) -> BoxFuture<'a, Result<Staged, MysqlError>> {
        Box::pin(async move {
            let sequence = i32::try_from(message.sequence).map_err(|err| {
                MysqlError::Query(diesel::result::Error::SerializationError(Box::new(err)))
            })?;
            let key = &message.key;
            let body = &message.message;
            let headers = body.headers().to_json();
            // one statement in the caller's transaction, which this never begins or
            // ends: the row commits with the caller's writes or not at all. A copy
            // of the id is the duplicate-key error, which InnoDB answers by rolling
            // back this statement alone; a copy staged by a transaction still open
            // makes this wait for it (up to the lock timeout). Any other failure is
            // returned for the caller to pass on; one the caller swallows is still
            // caught before its commit by the connection's failure watch
            // (`process_once` and the worker check it).
            let inserted = insert_new(conn, async |conn| {
                diesel::sql_query(STAGE)
                    .bind::<Text, _>(message.id.as_str())
                    .bind::<Text, _>(key.scope())
                    .bind::<Text, _>(key.provider())
                    .bind::<Text, _>(key.delivery_id())
                    .bind::<Nullable<Text>, _>(key.tenant())
                    .bind::<Text, _>(&message.handler)
                    .bind::<Integer, _>(sequence)
                    .bind::<Text, _>(body.sink())
                    .bind::<Nullable<Text>, _>(body.ordering_key())
                    .bind::<Blob, _>(body.payload().as_ref())
                    .bind::<Text, _>(&headers)
                    .execute(conn)
                    .await
            })
            .await
            .map_err(MysqlError::query)?;
            Ok(if inserted {
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
    ) -> BoxFuture<'_, Result<Vec<Leased>, MysqlError>> {
        Box::pin(async move {
            if limit == 0 {
                return Ok(Vec::new());
            }
            let token = new_token(now);
            let until = lease_end(now, lease);
            self.with_connection(async move |conn| {
                // a short transaction of its own (MySQL has no `UPDATE … RETURNING`):
                // pick and lock, record the lease, commit; the send runs after it
                let mut rows = conn
                    .transaction(async |conn| {
                        let rows = diesel::sql_query(LEASE_PICK)
                            .bind::<Datetime, _>(now)
                            .bind::<Datetime, _>(now)
                            .bind::<BigInt, _>(i64::from(limit))
                            .load::<OutboxRow>(conn)
                            .await?;
                        if rows.is_empty() {
                            return Ok(rows);
                        }
                        // seqs are integers: nothing to escape
                        let seqs = rows
                            .iter()
                            .map(|row| row.seq.to_string())
                            .collect::<Vec<_>>()
                            .join(", ");
                        diesel::sql_query(format!(
                            "UPDATE hookbox_outbox SET attempts = attempts + 1, \
                               leased_until = ?, lease_token = ? WHERE seq IN ({seqs})"
                        ))
                        .bind::<Datetime, _>(until)
                        .bind::<BigInt, _>(token)
                        .execute(conn)
                        .await?;
                        Ok::<_, diesel::result::Error>(rows)
                    })
                    .await
                    .map_err(MysqlError::query)?;
                rows.sort_by_key(|row| row.seq);
                let mut leased = Vec::with_capacity(rows.len());
                for row in rows {
                    let seq = row.seq;
                    match row.into_message() {
                        Ok(message) => leased.push(Leased {
                            message,
                            lease: Lease { seq, token },
                        }),
                        Err(err) => {
                            // nothing a relay could send: a dead letter at once. Should
                            // that fail, the row stays leased and comes back here when
                            // the lease expires; the readable messages are returned
                            // either way
                            let _ = diesel::sql_query(BURY)
                                .bind::<Datetime, _>(now)
                                .bind::<Text, _>(error_chain(&err))
                                .bind::<BigInt, _>(seq)
                                .bind::<BigInt, _>(token)
                                .execute(conn)
                                .await;
                        }
                    }
                }
                Ok(leased)
            })
            .await
        })
    }

    fn settle<'a>(
        &'a self,
        lease: Lease,
        settlement: Settlement<'a>,
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<bool, MysqlError>> {
        Box::pin(self.with_connection(async move |conn| {
            settle_one(conn, lease, settlement, now)
                .await
                .map_err(MysqlError::query)
        }))
    }

    fn settle_many<'a>(
        &'a self,
        settlements: &'a [(Lease, Settlement<'a>)],
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Vec<bool>, MysqlError>> {
        Box::pin(async move {
            if settlements.is_empty() {
                return Ok(Vec::new());
            }
            self.with_connection(async move |conn| {
                // one transaction: the batch is recorded whole or not at all
                conn.transaction(async |conn| {
                    let mut held = vec![false; settlements.len()];
                    // the sends that went (nearly all of a batch): two statements for
                    // the lot rather than one round trip each, so a settle is short
                    // and a relay that dies has little sent and not yet recorded
                    let sent: Vec<(usize, Lease)> = settlements
                        .iter()
                        .enumerate()
                        .filter(|(_, (_, settlement))| matches!(settlement, Settlement::Sent))
                        .map(|(i, (lease, _))| (i, *lease))
                        .collect();
                    for (i, was_held) in settle_sent(conn, &sent, now).await? {
                        held[i] = was_held;
                    }
                    for (i, (lease, settlement)) in settlements.iter().enumerate() {
                        if !matches!(settlement, Settlement::Sent) {
                            held[i] = settle_one(conn, *lease, *settlement, now).await?;
                        }
                    }
                    Ok::<_, diesel::result::Error>(held)
                })
                .await
                .map_err(MysqlError::query)
            })
            .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_differ_and_are_never_zero() {
        let now = OffsetDateTime::now_utc();
        let tokens: std::collections::HashSet<i64> = (0..1_000).map(|_| new_token(now)).collect();
        assert_eq!(tokens.len(), 1_000);
        assert!(!tokens.contains(&0));
    }

    #[test]
    fn a_lease_too_long_for_time_saturates() {
        let now = OffsetDateTime::UNIX_EPOCH;
        assert_eq!(
            lease_end(now, Duration::from_secs(30)),
            now + Duration::from_secs(30)
        );
        assert_eq!(
            lease_end(now, Duration::MAX),
            PrimitiveDateTime::MAX.assume_utc()
        );
    }
}
