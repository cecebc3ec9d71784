//! The lease transaction of the inbox's worker, synchronous: it runs whole on the
//! blocking pool's thread (see the [`work`](super) module docs). It holds what that
//! transaction took, and dead-letters the rows it must not run again.

use diesel::RunQueryDsl as _;
use diesel::sql_types::{BigInt, Text};
use diesel::sqlite::SqliteConnection;
use hookbox_core::spi::{RowFailure, RowOutcome, RowResult};
use hookbox_core::{RetryPolicy, StoredDelivery};

use crate::error::SqliteError;
use crate::rows::{InboxRow, now, select_inbox};

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

/// Up to `limit` due rows no live lease holds, in due order. Binds: now, limit.
const DUE_ROWS: &str = select_inbox!(
    "WHERE processed_at IS NULL AND dead_at IS NULL \
     AND next_attempt_at <= ?1 AND (leased_until IS NULL OR leased_until <= ?1) \
     ORDER BY next_attempt_at, id LIMIT ?2"
);

/// Takes the lease on the rows whose ids follow (written into the statement, see
/// [`id_list`]) and counts their attempt; a row that still carried a lease was
/// interrupted, and says so in `last_error`. `next_attempt_at` moves with the lease
/// so the due index skips leased rows. Binds: leased_until, token, the interrupted
/// text.
const TAKE_LEASES: &str = "UPDATE hookbox_inbox SET attempts = attempts + 1, \
     leased_until = ?1, next_attempt_at = ?1, lease_token = ?2, \
     last_error = CASE WHEN lease_token IS NULL THEN last_error ELSE ?3 END \
     WHERE id IN ";

/// `(1, 2, 3)`: row ids written into a statement (integers, so nothing to escape;
/// one statement instead of one per row).
pub(crate) fn id_list(ids: impl IntoIterator<Item = i64>) -> String {
    let mut list = String::from("(");
    for (i, id) in ids.into_iter().enumerate() {
        if i > 0 {
            list.push_str(", ");
        }
        list.push_str(&id.to_string());
    }
    list.push(')');
    list
}

/// A row's attempts, as `count`. Binds: id.
const ATTEMPTS: &str = "SELECT attempts AS count FROM hookbox_inbox WHERE id = ?";

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
    let due = diesel::sql_query(DUE_ROWS)
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
                let count = diesel::sql_query(ATTEMPTS)
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
        diesel::sql_query(format!("{}{}", TAKE_LEASES, id_list(ids)))
            .bind::<BigInt, _>(now.saturating_add(lease))
            .bind::<BigInt, _>(token)
            .bind::<Text, _>(INTERRUPTED)
            .execute(conn)?;
    }
    Ok(leased)
}

/// Makes a row a dead letter now. Binds: dead_at, last_error, attempts to add
/// (0 or 1), id.
const DEAD_LETTER: &str = "UPDATE hookbox_inbox SET dead_at = ?, last_error = ?, \
     attempts = attempts + ?, leased_until = NULL, lease_token = NULL WHERE id = ?";

/// Makes row `id` a dead letter now, clearing its lease.
fn dead_letter(
    conn: &mut SqliteConnection,
    id: i64,
    reason: &str,
    now: i64,
    count_attempt: bool,
) -> Result<(), SqliteError> {
    diesel::sql_query(DEAD_LETTER)
        .bind::<BigInt, _>(now)
        .bind::<Text, _>(reason)
        .bind::<BigInt, _>(i64::from(count_attempt))
        .bind::<BigInt, _>(id)
        .execute(conn)?;
    Ok(())
}
