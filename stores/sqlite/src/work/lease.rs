//! The lease transaction of the inbox's worker, synchronous: it runs whole on the
//! blocking pool's thread (see the [`work`](super) module docs). It holds what that
//! transaction took, and dead-letters the rows it must not run again.

use diesel::RunQueryDsl as _;
use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::SqliteConnection;
use hookbox_core::spi::{RowFailure, RowOutcome, RowResult};
use hookbox_core::{RetryPolicy, StoredDelivery};

use crate::error::SqliteError;
use crate::rows::{InboxRow, now};
use crate::sql;

/// `last_error` for an attempt whose worker stopped before it finished.
const INTERRUPTED: &str = "the worker stopped before finishing this row (crash, kill or cancelled future); its lease expired";

/// What the lease transaction took.
#[derive(Default)]
pub(super) struct Leased {
    /// The rows this worker now holds, in due order.
    pub(super) rows: Vec<StoredDelivery>,
    /// Rows dead-lettered without running: every attempt so far died with its
    /// worker, or the row cannot be read back.
    pub(super) dead: Vec<RowOutcome>,
}

#[derive(diesel::QueryableByName)]
pub(super) struct Count {
    #[diesel(sql_type = BigInt)]
    pub(super) count: i64,
}

/// The lease transaction's statements, inside its `BEGIN IMMEDIATE`: up to
/// `max_rows` due rows, or one row alone when the first due row was interrupted.
pub(super) fn take_leases_on(
    conn: &mut SqliteConnection,
    token: i64,
    retry: &RetryPolicy,
    lease: i64,
    max_rows: u32,
) -> Result<Leased, SqliteError> {
    let now = now();
    let due = diesel::sql_query(sql::DUE_ROWS)
        .bind::<BigInt, _>(now)
        .bind::<BigInt, _>(i64::from(max_rows))
        .load::<InboxRow>(conn)?;
    let mut leased = Leased::default();
    let mut ids = Vec::with_capacity(due.len());
    for row in due {
        let id = row.id();
        let interrupted = row.was_interrupted();
        // a retry runs alone (`work` docs): what failed, panicked or killed its
        // last worker costs no neighbour anything more
        let alone = row.attempts() > 0;
        if alone && !ids.is_empty() {
            continue;
        }
        if interrupted && retry.is_dead(row.attempts()) {
            // every attempt so far died with its worker: stop feeding it workers
            let attempts = row.attempts();
            let (key, event_type) = row.facts();
            dead_letter(conn, id, INTERRUPTED, now, false)?;
            let failure = RowFailure::dead_letter(attempts, retry, INTERRUPTED.to_string());
            leased.dead.push(RowOutcome::new(
                id,
                key,
                event_type,
                RowResult::Failed(failure),
            ));
            continue;
        }
        let (key, event_type) = row.facts();
        let mut delivery = match row.into_delivery() {
            Ok(delivery) => delivery,
            Err(err) => {
                // retrying cannot repair the row: dead-letter it so it never
                // blocks the rows behind it, and say why
                let reason = err.to_string();
                dead_letter(conn, id, &reason, now, true)?;
                let count = diesel::sql_query(sql::ATTEMPTS)
                    .bind::<BigInt, _>(id)
                    .get_result::<Count>(conn)?;
                let attempts = u32::try_from(count.count).unwrap_or(0);
                let failure = RowFailure::dead_letter(attempts, retry, reason);
                leased.dead.push(RowOutcome::new(
                    id,
                    key,
                    event_type,
                    RowResult::Failed(failure),
                ));
                continue;
            }
        };
        if interrupted {
            delivery.last_error = Some(INTERRUPTED.to_string());
        }
        ids.push(id);
        leased.rows.push(delivery);
        if alone {
            break;
        }
    }
    if !ids.is_empty() {
        diesel::sql_query(format!("{}{}", sql::TAKE_LEASES, sql::id_list(ids)))
            .bind::<BigInt, _>(now.saturating_add(lease))
            .bind::<BigInt, _>(token)
            .bind::<Text, _>(INTERRUPTED)
            .execute(conn)?;
    }
    Ok(leased)
}

/// Makes row `id` a dead letter now, clearing its lease.
fn dead_letter(
    conn: &mut SqliteConnection,
    id: i64,
    reason: &str,
    now: i64,
    count_attempt: bool,
) -> Result<(), SqliteError> {
    diesel::sql_query(sql::DEAD_LETTER)
        .bind::<BigInt, _>(now)
        .bind::<Text, _>(reason)
        .bind::<BigInt, _>(i64::from(count_attempt))
        .bind::<BigInt, _>(id)
        .execute(conn)?;
    Ok(())
}
