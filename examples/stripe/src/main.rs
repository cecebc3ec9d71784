//! A Stripe webhook receiver: `POST /webhooks/stripe` verifies each delivery and stores
//! it in the inbox; a worker credits the customer of every `payment_intent.succeeded`
//! event exactly once, in the same transaction that marks the delivery processed.
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
use hookbox_stripe::Stripe;

/// The demo signing secret; set `WEBHOOK_SECRET` to your endpoint's `whsec_…`.
const DEMO_SECRET: &str = "whsec_hookbox_stripe_demo";

// One SQL text for both backends: `$1`, `$2` are PostgreSQL's placeholders, and SQLite
// reads them as parameters numbered in the order they first appear.
const CREATE: &str = "CREATE TABLE IF NOT EXISTS balances \
    (account TEXT PRIMARY KEY, balance BIGINT NOT NULL)";
const CREDIT: &str = "INSERT INTO balances (account, balance) VALUES ($1, $2) \
    ON CONFLICT (account) DO UPDATE SET balance = balances.balance + excluded.balance";

/// Reads what a stored delivery asks for: credit the customer of a
/// `payment_intent.succeeded` event. Other events need nothing (`None`); the worker
/// marks them processed all the same. An error (a body without the fields) rolls
/// back, and the worker retries the row, then dead-letters it.
fn credit(row: &StoredDelivery) -> Result<Option<impl Statement>, Error> {
    if row.event_type.as_deref() != Some("payment_intent.succeeded") {
        return Ok(None);
    }
    let event: serde_json::Value = row.parse()?;
    let intent = &event["data"]["object"];
    let account = intent["customer"]
        .as_str()
        .ok_or("no data.object.customer")?;
    let amount = intent["amount"].as_i64().ok_or("no data.object.amount")?;
    tracing::info!(account, amount, "crediting");
    Ok(Some(
        diesel::sql_query(CREDIT)
            .bind::<Text, _>(account.to_owned())
            .bind::<BigInt, _>(amount),
    ))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let example = Example {
        provider: Stripe::new,
        demo_secret: DEMO_SECRET,
        path: "/webhooks/stripe",
        create_table: CREATE,
        default_db: "hookbox-stripe.db",
        log: hookbox_example_kit::log!(),
    };
    hookbox_example_kit::run(example, credit).await
}
