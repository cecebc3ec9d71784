//! A Svix webhook receiver: `POST /webhooks/svix` verifies each delivery and stores it
//! in the inbox; a worker writes every event to a ledger exactly once, in the same
//! transaction that marks the delivery processed.
//!
//! The store, the endpoint, the worker and shutdown are `hookbox-example-kit`'s
//! (`examples/kit`); this file keeps only what is this example's own.
//!
//! Configuration (see README.md): `PORT`, `WEBHOOK_SECRET`, `HOOKBOX_STORE` (a SQLite
//! file, or a `postgres://` URL), `HOOKBOX_REDIS_URL` (optional front cache).

use hookbox_core::StoredDelivery;
use hookbox_example_kit::{Error, Example, Statement};
use hookbox_sqlite::diesel;
use hookbox_sqlite::diesel::sql_types::{BigInt, Text};
use hookbox_svix::Svix;

/// The demo signing secret; set `WEBHOOK_SECRET` to your endpoint's `whsec_…` secret.
const DEMO_SECRET: &str = "whsec_aG9va2JveC1zdml4LWRlbW8tc2VjcmV0";

// One SQL text for both backends: `$1`, `$2` are PostgreSQL's placeholders, and SQLite
// reads them as parameters numbered in the order they first appear. No UNIQUE key on
// purpose: the inbox alone keeps each event to one ledger line.
const CREATE: &str = "CREATE TABLE IF NOT EXISTS event_ledger \
    (delivery_id TEXT NOT NULL, event_type TEXT NOT NULL, applied_at BIGINT NOT NULL)";
const RECORD: &str =
    "INSERT INTO event_ledger (delivery_id, event_type, applied_at) VALUES ($1, $2, $3)";

/// Reads what a stored delivery asks for: one ledger line with its id and the
/// payload's `type`. An error (a body that is not JSON, no `type`) rolls back, and the
/// worker retries the row, then dead-letters it.
fn record_event(row: &StoredDelivery) -> Result<Option<impl Statement>, Error> {
    let event: serde_json::Value = row.parse()?;
    let event_type = event["type"].as_str().ok_or("no type")?;
    let now = hookbox_core::time::OffsetDateTime::now_utc().unix_timestamp();
    tracing::info!(event_type, "recording event");
    Ok(Some(
        diesel::sql_query(RECORD)
            .bind::<Text, _>(row.key.delivery_id().to_owned())
            .bind::<Text, _>(event_type.to_owned())
            .bind::<BigInt, _>(now),
    ))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let example = Example {
        provider: Svix::new,
        demo_secret: DEMO_SECRET,
        path: "/webhooks/svix",
        create_table: CREATE,
        default_db: "hookbox-svix.db",
        log: hookbox_example_kit::log!(),
    };
    hookbox_example_kit::run(example, record_event).await
}
