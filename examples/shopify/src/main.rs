//! A Shopify webhook receiver: `POST /webhooks/shopify` verifies each delivery and
//! stores it in the inbox; a worker counts every `orders/create` order under the shop
//! that sent it, exactly once, in the same transaction that marks the delivery
//! processed. The shop (`X-Shopify-Shop-Domain`) is the delivery's tenant: hookbox
//! scopes the dedupe key by it, so two shops' webhook ids never collide.
//!
//! The store, the endpoint, the worker and shutdown are `hookbox-example-kit`'s
//! (`examples/kit`); this file keeps only what is this example's own.
//!
//! Configuration (see README.md): `PORT`, `WEBHOOK_SECRET`, `HOOKBOX_STORE` (a SQLite
//! file, or a `postgres://` URL), `HOOKBOX_REDIS_URL` (optional front cache).

use hookbox_core::StoredDelivery;
use hookbox_example_kit::{Error, Example, Statement};
use hookbox_shopify::Shopify;
use hookbox_sqlite::diesel;
use hookbox_sqlite::diesel::sql_types::{BigInt, Text};

/// The demo signing secret; set `WEBHOOK_SECRET` to your app's client secret.
const DEMO_SECRET: &str = "hookbox-shopify-demo-secret";

// One SQL text for both backends: `$1`, `$2` are PostgreSQL's placeholders, and SQLite
// reads them as parameters numbered in the order they first appear.
const CREATE: &str = "CREATE TABLE IF NOT EXISTS shop_orders \
    (shop TEXT PRIMARY KEY, orders BIGINT NOT NULL, last_order BIGINT NOT NULL)";
const RECORD: &str = "INSERT INTO shop_orders (shop, orders, last_order) VALUES ($1, 1, $2) \
    ON CONFLICT (shop) DO UPDATE \
    SET orders = shop_orders.orders + 1, last_order = excluded.last_order";

/// Reads what a stored delivery asks for: count an `orders/create` order under its
/// shop. Other topics need nothing (`None`); the worker marks them processed all the
/// same. An error (no shop, no order id) rolls back, and the worker retries the row,
/// then dead-letters it.
fn record_order(row: &StoredDelivery) -> Result<Option<impl Statement>, Error> {
    if row.event_type.as_deref() != Some("orders/create") {
        return Ok(None);
    }
    // the tenant: every key, row and query of this delivery belongs to this shop
    let shop = row.key.tenant().ok_or("no X-Shopify-Shop-Domain")?;
    let order: serde_json::Value = row.parse()?;
    let order_id = order["id"].as_i64().ok_or("no order id")?;
    tracing::info!(shop, order_id, "recording order");
    Ok(Some(
        diesel::sql_query(RECORD)
            .bind::<Text, _>(shop.to_owned())
            .bind::<BigInt, _>(order_id),
    ))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let example = Example {
        provider: Shopify::new,
        demo_secret: DEMO_SECRET,
        path: "/webhooks/shopify",
        create_table: CREATE,
        default_db: "hookbox-shopify.db",
        log: hookbox_example_kit::log!(),
    };
    hookbox_example_kit::run(example, record_order).await
}
