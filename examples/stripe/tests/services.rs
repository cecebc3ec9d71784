//! The example on the services its README switches to: PostgreSQL or MySQL (a
//! `--features postgres` or `--features mysql` build, `HOOKBOX_STORE=postgres://…` or
//! `mysql://…`) and the Redis front cache (`HOOKBOX_REDIS_URL`). Reads
//! `HOOKBOX_PG_URL` or `HOOKBOX_MYSQL_URL`, and `HOOKBOX_REDIS_URL`; skips without
//! them unless `HOOKBOX_REQUIRE_SERVICES=1`.
//!
//! Only a Postgres or MySQL build of the binary speaks to a database server, and only
//! one with the `redis` feature (a default) has the cache:
//! `cargo test -p example-stripe --features postgres` (or `mysql`).
#![cfg(all(any(feature = "postgres", feature = "mysql"), feature = "redis"))]

use hookbox_stripe::StripeSigner;
use hookbox_testkit::{Backend, Sandbox, redis_url, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-stripe");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/stripe";
/// The example's documented demo secret.
const SECRET: &str = "whsec_hookbox_stripe_demo";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_database_server_with_the_redis_cache_a_payment_sent_twice_is_credited_once() {
    let Some(sandbox) = Sandbox::for_build(BACKEND).await else {
        return;
    };
    let Some(redis) = redis_url() else { return };
    let example = sandbox.start_with(BIN, &[], &[("HOOKBOX_REDIS_URL", &redis)]);
    let stripe = StripeSigner::new(SECRET).unwrap();
    let body = format!(
        r#"{{"id":"{}","type":"payment_intent.succeeded","data":{{"object":{{"amount":2000,"customer":"cus_bob"}}}}}}"#,
        unique("evt")
    );

    for expected in ["stored", "duplicate", "duplicate"] {
        let answer = example.send(PATH, &stripe, "", body.as_bytes()).await;
        assert_eq!(
            (answer.status, answer.outcome().as_str()),
            (200, expected),
            "{answer:?}"
        );
    }
    let forger = StripeSigner::new("whsec_not_the_endpoint_secret").unwrap();
    let forged = example.send(PATH, &forger, "", body.as_bytes()).await;
    assert_eq!(forged.status, 401, "{forged:?}");

    let stats = sandbox.wait_processed(1).await;
    assert_eq!(stats.processed, 1, "{stats:?}");
    let balance = sandbox
        .query_i64("SELECT balance AS n FROM balances WHERE account = 'cus_bob'")
        .await;
    assert_eq!(balance, 2000, "credited exactly once");
    drop(example);
}
