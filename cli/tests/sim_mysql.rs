//! `hookbox sim --store mysql://…` as a user runs it: the same replay as
//! `sim_postgres.rs` on MySQL or MariaDB, a fresh database per handler and crash
//! design. Reads `HOOKBOX_MYSQL_URL`; skips without it unless
//! `HOOKBOX_REQUIRE_SERVICES=1`.
//!
//! Concurrency is real, so only what must hold whatever the interleaving is asserted:
//! (c) and (d) exact, the atomic crash design losing nothing, the split design losing
//! one event per kill. (b)'s double applies are racy: printed, not asserted.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use diesel::sql_types::Text;
use diesel_async::RunQueryDsl as _;
use hookbox_diesel_mysql::testing::mysql_url;
use hookbox_diesel_mysql::{MysqlOptions, MysqlStore, diesel, diesel_async};

mod sim_run;

use sim_run::{prefix, replay_and_check};

#[derive(diesel::QueryableByName)]
struct Name {
    #[diesel(sql_type = Text)]
    name: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn correct_designs_stay_exact_under_real_concurrency_and_kills_on_mysql() {
    let Some(url) = mysql_url().await else { return };
    let stdout = replay_and_check(&url);
    assert!(stdout.starts_with("webhook-sim on MySQL "), "{stdout}");

    // every database of the run is gone
    let prefix = prefix(&stdout, "databases");
    let store = MysqlStore::connect(&url, MysqlOptions::new().with_max_connections(1))
        .await
        .unwrap();
    let mut conn = store.connection().await.unwrap();
    let left: Vec<String> =
        diesel::sql_query("SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA")
            .load::<Name>(&mut *conn)
            .await
            .unwrap()
            .into_iter()
            .map(|n| n.name)
            .filter(|n| n.starts_with(prefix))
            .collect();
    assert!(left.is_empty(), "databases left behind: {left:?}");
}
