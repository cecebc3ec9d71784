//! The example over real HTTP: an order sent twice is stored once and counted once
//! under its shop; the same webhook id from another shop is that shop's own delivery;
//! a forged copy is refused.

use hookbox_example_testkit::{Sandbox, unique};
use hookbox_shopify::ShopifySigner;

const BIN: &str = env!("CARGO_BIN_EXE_example-shopify");
const PATH: &str = "/webhooks/shopify";
/// The example's documented demo secret.
const SECRET: &str = "hookbox-shopify-demo-secret";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_sent_twice_is_counted_once_per_shop_and_a_forgery_is_refused() {
    let sandbox = Sandbox::new();
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
