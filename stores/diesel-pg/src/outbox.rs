//! The outbox: [`OutboxStore`] for [`PgStore`]. Messages are staged on the caller's
//! connection, leased to relays with `FOR UPDATE SKIP LOCKED` and a lease token,
//! settled by the lease's holder only, and purged once sent.
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
use diesel::sql_types::{Array, BigInt, Bytea, Integer, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use hookbox_core::spi::{Lease, Leased, Settlement, Staged, StagedMessage};
use hookbox_core::{BoxFuture, OutboxStore, error_chain};
use time::{OffsetDateTime, PrimitiveDateTime};

use self::row::{OutboxRow, row_columns};
use crate::error::PgError;
use crate::store::PgStore;

/// Leases due messages in one autocommitted statement. `$1` is the relay's `now`,
/// `$2` the limit, `$3` the end of the lease, `$4` the call's token.
///
/// Why two relays running this at once cannot break the guarantees, under READ
/// COMMITTED:
///
/// - One message, one live lease. A relay takes a row only by locking it (`FOR
///   UPDATE OF o`), and the row stays locked until the statement commits the new
///   lease. A row another relay has locked is skipped (`SKIP LOCKED`), never waited
///   for. A row another relay leased and committed after this statement's snapshot
///   is locked in its newest version, and PostgreSQL re-checks the `WHERE` of `o` on
///   that version (EvalPlanQual): its `leased_until` is now in the future, so it is
///   left out. `settle` and an operator's `replay` meet the lease the same way, on
///   the row lock, so a settle with an old token matches nothing once a new lease
///   committed.
/// - Order per key. The `NOT EXISTS` reads earlier rows of the key without locking
///   them (`OF o`): a row leased, or being leased, by another relay is still neither
///   sent nor dead, so it still holds back every later row of its key. The snapshot
///   can be older than the truth only in one direction that matters here: a settle
///   committed after the snapshot (a row became sent or dead) is not seen, which
///   only holds a later row back until the next call. Within one call, the earliest
///   pending row of a key is the only one of its key that can pass. A row becomes
///   pending again only through `OutboxAdmin::replay` / `replay_matching`, an
///   operator's explicit request to send it again, after the later ones if those
///   went meanwhile.
///
/// Not covered, by any relay-side check: two transactions staging messages with the
/// same ordering key at the same time take their `seq` when they insert, but commit
/// in either order. A later `seq` committed first is sent before the earlier one
/// exists for the relay. Messages staged in one transaction, or in transactions that
/// commit one after the other, keep their order.
const LEASE: &str = concat!(
    "WITH due AS ( \
       SELECT o.seq FROM hookbox_outbox o \
       WHERE o.sent_at IS NULL AND o.dead_at IS NULL \
         AND o.next_attempt_at <= $1 \
         AND (o.leased_until IS NULL OR o.leased_until <= $1) \
         AND (o.ordering_key IS NULL OR NOT EXISTS ( \
           SELECT 1 FROM hookbox_outbox e \
           WHERE e.ordering_key = o.ordering_key AND e.seq < o.seq \
             AND e.sent_at IS NULL AND e.dead_at IS NULL)) \
       ORDER BY o.seq \
       LIMIT $2 \
       FOR UPDATE OF o SKIP LOCKED) \
     UPDATE hookbox_outbox m \
     SET attempts = m.attempts + 1, leased_until = $3, lease_token = $4 \
     FROM due WHERE m.seq = due.seq \
     RETURNING ",
    row_columns!()
);

/// Settles a message if the lease is still held: `$3`/`$4` set `sent_at`/`dead_at`,
/// `$5` replaces `last_error` and `$6` `next_attempt_at` when given.
const SETTLE: &str = "UPDATE hookbox_outbox SET \
       sent_at = $3, dead_at = $4, \
       last_error = COALESCE($5, last_error), \
       next_attempt_at = COALESCE($6, next_attempt_at), \
       attempts = GREATEST(attempts - $7, 0), \
       leased_until = NULL, lease_token = NULL \
     WHERE seq = $1 AND lease_token = $2 AND sent_at IS NULL AND dead_at IS NULL";

/// [`SETTLE`] for a batch in one statement (so one transaction): the columns as
/// parallel arrays; returns the seq of each row whose lease was still held.
const SETTLE_MANY: &str = "UPDATE hookbox_outbox AS m SET \
       sent_at = s.sent_at, dead_at = s.dead_at, \
       last_error = COALESCE(s.error, m.last_error), \
       next_attempt_at = COALESCE(s.at, m.next_attempt_at), \
       attempts = GREATEST(m.attempts - s.give_back, 0), \
       leased_until = NULL, lease_token = NULL \
     FROM UNNEST($1::bigint[], $2::bigint[], $3::timestamptz[], $4::timestamptz[], \
                 $5::text[], $6::timestamptz[], $7::int[]) \
       AS s(seq, token, sent_at, dead_at, error, at, give_back) \
     WHERE m.seq = s.seq AND m.lease_token = s.token \
       AND m.sent_at IS NULL AND m.dead_at IS NULL \
     RETURNING m.seq";

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

#[derive(QueryableByName)]
struct SettledSeq {
    #[diesel(sql_type = BigInt)]
    seq: i64,
}

/// A dead letter made of a row whose headers cannot be read back, so it holds up
/// neither the relay nor the later messages of its ordering key.
const BURY: &str = "UPDATE hookbox_outbox SET \
       dead_at = $3, last_error = $4, leased_until = NULL, lease_token = NULL \
     WHERE seq = $1 AND lease_token = $2";

/// Stages one message; `$1`…`$11` in column order, the key as `hookbox_inbox` keeps
/// it.
const STAGE: &str = "INSERT INTO hookbox_outbox (message_id, source, provider, \
       delivery_id, tenant, handler, sequence, sink, ordering_key, payload, headers) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
     ON CONFLICT (message_id) DO NOTHING";

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
/// represents (far inside PostgreSQL's range).
fn lease_end(now: OffsetDateTime, lease: Duration) -> OffsetDateTime {
    time::Duration::try_from(lease)
        .ok()
        .and_then(|lease| now.checked_add(lease))
        .unwrap_or(PrimitiveDateTime::MAX.assume_utc())
}

impl OutboxStore for PgStore {
    fn stage<'a>(
        &'a self,
        conn: &'a mut AsyncPgConnection,
        message: &'a StagedMessage,
    ) -> BoxFuture<'a, Result<Staged, PgError>> {
        Box::pin(async move {
            let sequence = i32::try_from(message.sequence).map_err(|err| {
                PgError::Query(diesel::result::Error::SerializationError(Box::new(err)))
            })?;
            let key = &message.key;
            let body = &message.message;
            // one statement in the caller's transaction, which this never begins or
            // ends: the row commits with the caller's writes or not at all. A failure
            // is returned for the caller to pass on; one the caller swallows is still
            // caught before its commit by the connection's failure watch
            // (`process_once` and the worker check it). A copy of the id staged by a
            // transaction still open makes this wait for it (up to `lock_timeout`).
            let inserted = diesel::sql_query(STAGE)
                .bind::<Text, _>(message.id.as_str())
                .bind::<Text, _>(key.scope())
                .bind::<Text, _>(key.provider())
                .bind::<Text, _>(key.delivery_id())
                .bind::<Nullable<Text>, _>(key.tenant())
                .bind::<Text, _>(&message.handler)
                .bind::<Integer, _>(sequence)
                .bind::<Text, _>(body.sink())
                .bind::<Nullable<Text>, _>(body.ordering_key())
                .bind::<Bytea, _>(body.payload().as_ref())
                .bind::<Text, _>(body.headers().to_json())
                .execute(conn)
                .await
                .map_err(PgError::query)?;
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
    ) -> BoxFuture<'_, Result<Vec<Leased>, PgError>> {
        Box::pin(async move {
            if limit == 0 {
                return Ok(Vec::new());
            }
            let token = new_token(now);
            let until = lease_end(now, lease);
            self.with_connection(async move |conn| {
                let mut rows = diesel::sql_query(LEASE)
                    .bind::<Timestamptz, _>(now)
                    .bind::<BigInt, _>(i64::from(limit))
                    .bind::<Timestamptz, _>(until)
                    .bind::<BigInt, _>(token)
                    .load::<OutboxRow>(conn)
                    .await
                    .map_err(PgError::query)?;
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
                                .bind::<BigInt, _>(seq)
                                .bind::<BigInt, _>(token)
                                .bind::<Timestamptz, _>(now)
                                .bind::<Text, _>(error_chain(&err))
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
    ) -> BoxFuture<'a, Result<bool, PgError>> {
        let (sent_at, dead_at, error, at, give_back) = settle_columns(settlement, now);
        Box::pin(self.with_connection(async move |conn| {
            // a concurrent lease of the same row holds its row lock until it commits;
            // this waits for it and then re-checks the token on the new version
            let settled = diesel::sql_query(SETTLE)
                .bind::<BigInt, _>(lease.seq)
                .bind::<BigInt, _>(lease.token)
                .bind::<Nullable<Timestamptz>, _>(sent_at)
                .bind::<Nullable<Timestamptz>, _>(dead_at)
                .bind::<Nullable<Text>, _>(error)
                .bind::<Nullable<Timestamptz>, _>(at)
                .bind::<Integer, _>(give_back)
                .execute(conn)
                .await
                .map_err(PgError::query)?;
            Ok(settled == 1)
        }))
    }

    fn settle_many<'a>(
        &'a self,
        settlements: &'a [(Lease, Settlement<'a>)],
        now: OffsetDateTime,
    ) -> BoxFuture<'a, Result<Vec<bool>, PgError>> {
        Box::pin(async move {
            if settlements.is_empty() {
                return Ok(Vec::new());
            }
            let n = settlements.len();
            let (mut seqs, mut tokens) = (Vec::with_capacity(n), Vec::with_capacity(n));
            let (mut sent, mut dead) = (Vec::with_capacity(n), Vec::with_capacity(n));
            let (mut errors, mut ats, mut give_backs) = (
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
            );
            for (lease, settlement) in settlements {
                let (sent_at, dead_at, error, at, give_back) = settle_columns(*settlement, now);
                seqs.push(lease.seq);
                tokens.push(lease.token);
                sent.push(sent_at);
                dead.push(dead_at);
                errors.push(error);
                ats.push(at);
                give_backs.push(give_back);
            }
            let settled = self
                .with_connection(async move |conn| {
                    // one statement, so one transaction: the batch is recorded whole
                    // or not at all
                    diesel::sql_query(SETTLE_MANY)
                        .bind::<Array<BigInt>, _>(&seqs)
                        .bind::<Array<BigInt>, _>(&tokens)
                        .bind::<Array<Nullable<Timestamptz>>, _>(&sent)
                        .bind::<Array<Nullable<Timestamptz>>, _>(&dead)
                        .bind::<Array<Nullable<Text>>, _>(&errors)
                        .bind::<Array<Nullable<Timestamptz>>, _>(&ats)
                        .bind::<Array<Integer>, _>(&give_backs)
                        .load::<SettledSeq>(conn)
                        .await
                        .map_err(PgError::query)
                })
                .await?;
            let held: std::collections::HashSet<i64> =
                settled.into_iter().map(|row| row.seq).collect();
            Ok(settlements
                .iter()
                .map(|(lease, _)| held.contains(&lease.seq))
                .collect())
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
