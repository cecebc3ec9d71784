//! The example over real HTTP, on the backend it was built for (SQLite by default, a
//! PostgreSQL schema with `--features postgres`, a MySQL database with
//! `--features mysql`): an order sent twice is stored once
//! and counted once under its shop; the same webhook id from another shop is that
//! shop's own delivery; a forged copy is refused; `orders/updated` arriving out of
//! order never overwrites a newer order, and a same-second tie keeps the stored one.

use hookbox_shopify::ShopifySigner;
use hookbox_testkit::{Backend, Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-shopify");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/shopify";
/// The example's documented demo secret.
const SECRET: &str = "hookbox-shopify-demo-secret";
const ORDER_ID: i64 = 820_982_911_946_154_508;

/// The sandbox for this build's backend; `None` when its server is wanted and absent.
async fn sandbox() -> Option<Sandbox> {
    Sandbox::for_build(BACKEND).await
}

/// An `orders/updated` body: the order as it was at `updated_at`.
fn updated(total_price: &str, updated_at: &str) -> Vec<u8> {
    format!(r#"{{"id":{ORDER_ID},"total_price":"{total_price}","updated_at":"{updated_at}"}}"#)
        .into_bytes()
}

/// How many rows of `orders` hold this order of `shop` at `total_price`.
fn order_at(shop: &str, total_price: &str) -> String {
    format!(
        "SELECT COUNT(*) AS n FROM orders WHERE shop = '{shop}' AND order_id = {ORDER_ID} \
         AND total_price = '{total_price}'"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_sent_twice_is_counted_once_per_shop_and_a_forgery_is_refused() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let example = sandbox.start(BIN, &[]);
    let (alpha, beta) = (
        unique("alpha") + ".myshopify.com",
        unique("beta") + ".myshopify.com",
    );
    let signer = |shop: &str| ShopifySigner::new(SECRET).unwrap().shop_domain(shop);
    let id = unique("webhook");
    let body = br#"{"id":820982911946154508,"total_price":"254.98"}"#;

    let first = example.send(PATH, &signer(&alpha), &id, body).await;
    assert_eq!(
        (first.status, first.outcome().as_str()),
        (200, "stored"),
        "{first:?}"
    );
    let retry = example.send(PATH, &signer(&alpha), &id, body).await;
    assert_eq!(
        (retry.status, retry.outcome().as_str()),
        (200, "duplicate"),
        "{retry:?}"
    );
    // the dedupe key is scoped by shop: another shop's delivery with this id is new
    let other = example.send(PATH, &signer(&beta), &id, body).await;
    assert_eq!(
        (other.status, other.outcome().as_str()),
        (200, "stored"),
        "{other:?}"
    );

    let forger = ShopifySigner::new("not-the-app-secret")
        .unwrap()
        .shop_domain(&alpha);
    let forged = example.send(PATH, &forger, &unique("webhook"), body).await;
    assert_eq!(
        (forged.status, forged.outcome().as_str()),
        (401, "signature_mismatch"),
        "{forged:?}"
    );

    let stats = sandbox.wait_processed(2).await;
    assert_eq!(
        stats.processed, 2,
        "one row per shop: the duplicate and the forgery were not stored"
    );
    for shop in [&alpha, &beta] {
        let orders = sandbox
            .query_i64(&format!(
                "SELECT orders AS n FROM shop_orders WHERE shop = '{shop}'"
            ))
            .await;
        assert_eq!(orders, 1, "{shop}'s order counted exactly once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_update_arriving_after_a_newer_one_is_skipped() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let example = sandbox.start(BIN, &[]);
    let shop = unique("shop") + ".myshopify.com";
    let signer = ShopifySigner::new(SECRET)
        .unwrap()
        .shop_domain(&shop)
        .topic("orders/updated");

    // the newer state first, as Shopify may deliver it
    let newer = updated("300.00", "2024-10-28T10:05:00-04:00");
    let answer = example
        .send(PATH, &signer, &unique("webhook"), &newer)
        .await;
    assert_eq!(answer.outcome(), "stored", "{answer:?}");
    sandbox.wait_processed(1).await;
    assert_eq!(sandbox.query_i64(&order_at(&shop, "300.00")).await, 1);

    // then the older one: stored and processed, but the table keeps the newer
    let older = updated("254.98", "2024-10-28T10:00:00-04:00");
    let answer = example
        .send(PATH, &signer, &unique("webhook"), &older)
        .await;
    assert_eq!(answer.outcome(), "stored", "{answer:?}");
    sandbox.wait_processed(2).await;
    assert_eq!(
        sandbox.query_i64(&order_at(&shop, "300.00")).await,
        1,
        "the newer order stays:\n{}",
        example.log()
    );
    assert_eq!(sandbox.query_i64(&order_at(&shop, "254.98")).await, 0);
    assert!(
        example.log().contains("stale update skipped"),
        "{}",
        example.log()
    );

    // the same instant written in another offset is not newer either
    let same = updated("999.00", "2024-10-28T14:05:00Z");
    let answer = example.send(PATH, &signer, &unique("webhook"), &same).await;
    assert_eq!(answer.outcome(), "stored", "{answer:?}");
    sandbox.wait_processed(3).await;
    assert_eq!(
        sandbox.query_i64(&order_at(&shop, "300.00")).await,
        1,
        "a same-second tie keeps the stored order:\n{}",
        example.log()
    );
    assert!(
        example.log().contains("re-fetch it from the Admin API"),
        "a tie asks for the order to be re-fetched:\n{}",
        example.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_work_and_exits_with_status_0() {
    let Some(sandbox) = sandbox().await else {
        return;
    };
    let mut example = sandbox.start(BIN, &[]);
    let signer = ShopifySigner::new(SECRET)
        .unwrap()
        .shop_domain(unique("shop") + ".myshopify.com");
    let body = br#"{"id":820982911946154508,"total_price":"254.98"}"#;
    let stored = example.send(PATH, &signer, &unique("webhook"), body).await;
    assert_eq!(stored.outcome(), "stored", "{stored:?}");
    sandbox.wait_processed(1).await;

    let status = example.terminate().await;
    assert!(
        status.success(),
        "exit after SIGTERM: {status}\n{}",
        example.log()
    );
    assert!(example.log().contains("stopped"), "{}", example.log());
}
