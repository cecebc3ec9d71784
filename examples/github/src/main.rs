//! A GitHub webhook receiver: `POST /webhooks/github` verifies each delivery and
//! stores it in the inbox; a worker counts every `push` per repository, with its
//! commits, exactly once, in the same transaction that marks the delivery processed.
//!
//! The store, the endpoint, the worker and shutdown are `hookbox-example-kit`'s
//! (`examples/kit`); this file keeps only what is this example's own.
//!
//! Configuration (see README.md): `PORT`, `WEBHOOK_SECRET`, `HOOKBOX_STORE` (a SQLite
//! file, or a `postgres://` URL), `HOOKBOX_REDIS_URL` (optional front cache).

use hookbox_core::StoredDelivery;
use hookbox_example_kit::{Error, Example, Statement};
use hookbox_github::GitHub;
use hookbox_sqlite::diesel;
use hookbox_sqlite::diesel::sql_types::{BigInt, Text};

/// The demo signing secret; set `WEBHOOK_SECRET` to your webhook's secret.
const DEMO_SECRET: &str = "hookbox-github-demo-secret";

// One SQL text for both backends: `$1`, `$2` are PostgreSQL's placeholders, and SQLite
// reads them as parameters numbered in the order they first appear.
const CREATE: &str = "CREATE TABLE IF NOT EXISTS pushes \
    (repo TEXT PRIMARY KEY, pushes BIGINT NOT NULL, commits BIGINT NOT NULL)";
const COUNT: &str = "INSERT INTO pushes (repo, pushes, commits) VALUES ($1, 1, $2) \
    ON CONFLICT (repo) DO UPDATE SET pushes = pushes.pushes + 1, \
    commits = pushes.commits + excluded.commits";

/// Reads what a stored delivery asks for: count a `push` (and its commits) under its
/// repository. Other events (`ping`, …) need nothing (`None`); the worker marks them
/// processed all the same. An error (no repository) rolls back, and the worker
/// retries the row, then dead-letters it.
fn count_push(row: &StoredDelivery) -> Result<Option<impl Statement>, Error> {
    if row.event_type.as_deref() != Some("push") {
        return Ok(None);
    }
    let push: serde_json::Value = row.parse()?;
    let repo = push["repository"]["full_name"]
        .as_str()
        .ok_or("no repository.full_name")?;
    let commits = push["commits"].as_array().map_or(0, Vec::len);
    let commits = i64::try_from(commits)?;
    tracing::info!(repo, commits, "counting push");
    Ok(Some(
        diesel::sql_query(COUNT)
            .bind::<Text, _>(repo.to_owned())
            .bind::<BigInt, _>(commits),
    ))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let example = Example {
        provider: GitHub::new,
        demo_secret: DEMO_SECRET,
        path: "/webhooks/github",
        create_table: CREATE,
        default_db: "hookbox-github.db",
        log: hookbox_example_kit::log!(),
    };
    hookbox_example_kit::run(example, count_push).await
}
