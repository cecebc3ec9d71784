//! `hookbox sim --store postgres://…` as a user runs it: the built binary, a prefix of
//! the seed's stream, real concurrent workers and SIGKILLed worker processes, the
//! printed tables read back. Reads `HOOKBOX_PG_URL`; skips without it unless
//! `HOOKBOX_REQUIRE_SERVICES=1`. The usage errors need no server.
//!
//! Concurrency is real, so only what must hold whatever the interleaving is asserted:
//! (c) and (d) exact, the atomic crash design losing nothing, the split design losing
//! one event per kill. (b)'s double applies are racy: printed, not asserted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use diesel::sql_types::Text;
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _};
use hookbox_diesel_pg::{diesel, diesel_async};

mod common;
mod sim_run;

use common::pg_url;
use sim_run::{prefix, replay_and_check, sim};

#[derive(diesel::QueryableByName)]
struct Name {
    #[diesel(sql_type = Text)]
    nspname: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn correct_designs_stay_exact_under_real_concurrency_and_kills() {
    let Some(url) = pg_url().await else { return };
    let stdout = replay_and_check(&url);

    // every schema of the run is gone
    let prefix = prefix(&stdout, "schemas");
    let mut conn = AsyncPgConnection::establish(&url).await.unwrap();
    let left: Vec<String> = diesel::sql_query("SELECT nspname FROM pg_namespace")
        .load::<Name>(&mut conn)
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.nspname)
        .filter(|n| n.starts_with(prefix))
        .collect();
    assert!(left.is_empty(), "schemas left behind: {left:?}");
}

#[test]
fn store_must_be_a_postgres_or_mysql_url() {
    let output = sim(&["--store", "webhooks.db"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("postgres://"), "{stderr}");
    assert!(stderr.contains("mysql://"), "{stderr}");
}

#[test]
fn postgres_options_need_a_store() {
    for args in [
        &["--workers", "8"][..],
        &["--events", "10"],
        &["--io-delay-ms", "5"],
    ] {
        let output = sim(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--store"), "{args:?}: {stderr}");
    }
}

#[test]
fn one_worker_is_a_usage_error() {
    let output = sim(&[
        "--store",
        "postgres://nobody@127.0.0.1:1/none",
        "--workers",
        "1",
    ]);
    assert_eq!(output.status.code(), Some(2));
}
