//! `hookbox outbox` against a real SQLite file and a real Postgres schema: the
//! operator's view of the backlog, dead letters, a resend on request, and the purge.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::Duration;

use hookbox_core::spi::Settlement;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{DedupeKey, IdempotencyStore, Message, MessageId, OutboxStore};
use hookbox_diesel_pg::diesel_async::{
    AsyncConnection as _, AsyncPgConnection, SimpleAsyncConnection as _,
};
use hookbox_diesel_pg::{PgOptions, PgStore};
use hookbox_sqlite::{SqliteOptions, SqliteStore};
use serde_json::Value;

mod common;

use common::{TempDir, json_lines, pg_url};

/// Stages three messages and leaves one sent, one dead and one pending; returns
/// their ids in that order.
async fn populate<S: IdempotencyStore + OutboxStore>(store: &S) -> [MessageId; 3] {
    let key = DedupeKey::new("cli", "stripe", "evt_outbox");
    let mut ids = Vec::new();
    store
        .process_once(&key, async |conn| {
            let mut outbox = store.outbox(&key, "receipt");
            for name in ["sent", "dead", "pending"] {
                ids.push(outbox.stage(conn, Message::new("email", name)).await?);
            }
            Ok(())
        })
        .await
        .unwrap();
    let now = OffsetDateTime::now_utc() + Duration::from_secs(1);
    for leased in store.lease(10, Duration::from_secs(30), now).await.unwrap() {
        let settlement = match &leased.message.payload[..] {
            b"sent" => Settlement::Sent,
            // as the relay records a sink's refusal: `{kind} sink: {answer}`
            b"dead" => Settlement::Dead {
                error: "http sink: permanent failure: the sink answered 422 Unprocessable Entity",
            },
            _ => Settlement::Retry {
                error: "503 from the mail API",
                at: now,
            },
        };
        assert!(store.settle(leased.lease, settlement, now).await.unwrap());
    }
    ids.try_into().unwrap()
}

fn outbox(store: &[&str], args: &[&str]) -> (i32, Vec<Value>) {
    let output = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .arg("outbox")
        .args(store)
        .args(args)
        .output()
        .unwrap();
    json_lines(output)
}

/// The checks both stores answer the same way.
fn operate(store: &[&str], [sent, dead, pending]: &[MessageId; 3]) {
    let (code, stats) = outbox(store, &["stats"]);
    assert_eq!(code, 0);
    assert_eq!(
        (&stats[0]["pending"], &stats[0]["sent"], &stats[0]["dead"]),
        (&Value::from(1), &Value::from(1), &Value::from(1))
    );
    assert!(stats[0]["oldest_pending_age_secs"].is_i64());

    let (_, listed) = outbox(store, &["list"]);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], pending.as_str());
    assert_eq!(listed[0]["last_error"], "503 from the mail API");

    let (_, dead_letters) = outbox(store, &["dead"]);
    assert_eq!(dead_letters.len(), 1);
    assert_eq!(dead_letters[0]["id"], dead.as_str());
    assert_eq!(dead_letters[0]["sink_kind"], "http");
    assert_eq!(
        dead_letters[0]["sink_answer"],
        "permanent failure: the sink answered 422 Unprocessable Entity"
    );
    // an error recorded without a sink has no kind
    assert_eq!(listed[0]["sink_kind"], Value::Null);

    let (_, shown) = outbox(store, &["show", sent.as_str()]);
    assert_eq!(shown[0]["status"], "sent");
    assert_eq!(shown[0]["payload"], "sent");
    assert_eq!(shown[0]["delivery_id"], "evt_outbox");
    assert_eq!(shown[0]["handler"], "receipt");

    // a pending message is already due: refused, and the command says so
    let (code, _) = outbox(store, &["replay", pending.as_str()]);
    assert_eq!(code, 1);
    let (code, replayed) = outbox(store, &["replay", "--all"]);
    assert_eq!((code, &replayed[0]["replayed"]), (0, &Value::from(1)));
    let (_, stats) = outbox(store, &["stats"]);
    assert_eq!(
        (&stats[0]["pending"], &stats[0]["dead"]),
        (&Value::from(2), &Value::from(0))
    );
    // the former spellings still work and still answer as they did
    let (code, _) = outbox(store, &["retry", pending.as_str()]);
    assert_eq!(code, 1);
    let (code, retried) = outbox(store, &["retry", "--dead"]);
    assert_eq!((code, &retried[0]["retried"]), (0, &Value::from(0)));

    // within the retention nothing is purged
    let (code, purged) = outbox(store, &["purge"]);
    assert_eq!(
        (code, &purged[0]["purged_outbox_messages"]),
        (0, &Value::from(0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hookbox_outbox_shows_and_operates_a_sqlite_outbox() {
    let dir = TempDir::new("outbox");
    let path = dir.0.join("hookbox.db");
    let store = SqliteStore::open(&path, SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let ids = populate(&store).await;
    drop(store);
    let db = path.to_str().unwrap();
    operate(&["--store", db], &ids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hookbox_outbox_shows_and_operates_a_postgres_outbox() {
    let Some(url) = pg_url().await else { return };
    let schema = format!("hb_cli_outbox_{:016x}", fastrand::u64(..));
    let mut admin = AsyncPgConnection::establish(&url).await.unwrap();
    admin
        .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
        .await
        .unwrap();
    let store = PgStore::connect(&url, PgOptions::new().with_schema(schema.clone()))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let ids = populate(&store).await;
    drop(store);
    let args = ["--store", url.as_str(), "--schema", schema.as_str()];
    let outcome = std::panic::catch_unwind(|| operate(&args, &ids));
    admin
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .await
        .unwrap();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Runs `hookbox outbox relay` with `args` after the subcommand; returns the exit
/// code, the JSON lines on stdout and stderr.
fn relay(args: &[&str]) -> (i32, Vec<Value>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["outbox", "relay"])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let code = output.status.code().unwrap_or(-1);
    let lines = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (code, lines, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hookbox_outbox_relay_sends_to_the_named_sinks_and_leaves_the_others_pending() {
    let dir = TempDir::new("outbox-relay");
    let path = dir.0.join("hookbox.db");
    let store = SqliteStore::open(&path, SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let key = DedupeKey::new("cli", "stripe", "evt_relay");
    store
        .process_once(&key, async |conn| {
            let mut outbox = store.outbox(&key, "receipt");
            for n in 0..3 {
                outbox
                    .stage(conn, Message::new("email", format!("receipt {n}")))
                    .await?;
            }
            outbox.stage(conn, Message::new("crm", "contact")).await?;
            Ok(())
        })
        .await
        .unwrap();
    let db = path.to_str().unwrap();

    // --store after the subcommand; only `email` has a sink, and `log` only because
    // it is asked for by name
    let (code, lines, stderr) = relay(&[
        "--store",
        db,
        "--sink",
        "email=log",
        "--lease",
        "5s",
        "--until-empty",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(lines[0]["relay"], "ready");
    assert_eq!(lines[0]["sinks"][0]["kind"], "log");
    assert_eq!(lines[0]["lease_secs"], 5.0);
    let last = lines.last().unwrap();
    assert_eq!(
        (&last["relay"], &last["sent"]),
        (&Value::from("stopped"), &Value::from(3))
    );
    assert!(
        stderr.contains("WARN") && stderr.contains("this relay has no sink of its name"),
        "{stderr}"
    );
    let (_, pending) = outbox(&["--store", db], &["list"]);
    assert_eq!(pending.len(), 1, "the crm message waits for its sink");
    assert_eq!(pending[0]["sink"], "crm");
    assert_eq!(pending[0]["attempts"], 0);

    // a sink that cannot be reached stops the relay at start, naming it
    let (code, _, stderr) = relay(&[
        "--store",
        db,
        "--sink",
        "crm=nats://127.0.0.1:1/crm",
        "--until-empty",
    ]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("sink `crm`") && stderr.contains("connecting to NATS"),
        "{stderr}"
    );
    // usage errors: no URL, an unknown scheme, no store
    for bad in [["--sink", "crm"], ["--sink", "crm=kafka://b:9092/t"]] {
        let mut args = vec!["--store", db];
        args.extend(bad);
        let (code, _, _) = relay(&args);
        assert_eq!(code, 2, "{bad:?}");
    }
    let output = Command::new(env!("CARGO_BIN_EXE_hookbox"))
        .args(["outbox", "relay", "--sink", "email=log"])
        .env_remove("HOOKBOX_STORE")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--store"));
}
