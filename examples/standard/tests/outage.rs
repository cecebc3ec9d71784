//! The receiver (`serve --no-worker`) while its database goes away and comes back,
//! with deliveries streaming in: every delivery sent while the database is down gets
//! 503 with the edge's JSON error `store_unavailable` (never a 2xx it did not store),
//! the receiver answers 2xx again by itself once the database is back, and every
//! delivery that got a 2xx is in the inbox.
//!
//! MySQL builds only: the database that goes away is a private MariaDB server the
//! test kills and restarts (`hookbox_testkit::mysql_server`), so the shared server
//! other tests use is never disturbed. A SQLite file has no server to lose, and the
//! Postgres builds have no private server helper.
#![cfg(feature = "mysql")]

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hookbox_standard::StandardSigner;
use hookbox_testkit::mysql_server::PrivateServer;
use hookbox_testkit::{Answer, DEADLINE, MysqlDatabase, Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-standard");
const PATH: &str = "/webhooks/standard";
/// The example's documented demo secret.
const SECRET: &str = "whsec_aG9va2JveC1zdGFuZGFyZC1kZW1vLXNlY3JldCEh";
const BODY: &[u8] = br#"{"type":"contact.created","data":{"id":"contact_1"}}"#;
/// Concurrent senders, so some requests are in flight when the server dies.
const SENDERS: usize = 4;
/// How long the database stays down.
const OUTAGE: Duration = Duration::from_secs(2);

/// One delivery sent: its id, when it was sent and answered, and the answer.
#[derive(Debug, Clone)]
struct Sent {
    id: String,
    sent: Instant,
    answered: Instant,
    answer: Answer,
}

/// Waits until `done` holds for the deliveries sent so far, up to [`DEADLINE`].
async fn wait_for(log: &Mutex<Vec<Sent>>, what: &str, done: impl Fn(&[Sent]) -> bool) {
    let started = Instant::now();
    while !done(&log.lock().expect("the delivery log")) {
        assert!(
            started.elapsed() < DEADLINE,
            "{what}: not within {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_a_database_outage_deliveries_get_503_and_the_receiver_recovers_by_itself() {
    let Some(mut server) = PrivateServer::start(None).await else {
        return;
    };
    let database = MysqlDatabase::create_on(&server.url("127.0.0.1", "mysql", "")).await;
    let sandbox = Sandbox::on_mysql(&database);
    let receiver = sandbox.start(BIN, &["serve", "--no-worker"]);

    let log = Arc::new(Mutex::new(Vec::<Sent>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let run = unique("outage");
    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            let (to, log, stop, run) = (receiver.sender(), log.clone(), stop.clone(), run.clone());
            tokio::spawn(async move {
                let signer = StandardSigner::new(SECRET).unwrap();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let id = format!("{run}_{sender}_{n}");
                    n += 1;
                    let sent = Instant::now();
                    // the receiver must stay up through the outage: no answer fails
                    let answer = to
                        .try_send(PATH, &signer, &id, BODY)
                        .await
                        .unwrap_or_else(|err| panic!("{id}: no answer: {err}"));
                    let answered = Instant::now();
                    log.lock().unwrap().push(Sent {
                        id,
                        sent,
                        answered,
                        answer,
                    });
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
            })
        })
        .collect();
    let acked = |sent: &Sent| sent.answer.status == 200;

    // up: deliveries are stored
    wait_for(&log, "10 deliveries stored before the outage", |log| {
        log.iter().filter(|s| acked(s)).count() >= 10
    })
    .await;
    // down: SIGKILL, as a crashed server; connections drop, new ones are refused
    server.kill();
    let killed = Instant::now();
    tokio::time::sleep(OUTAGE).await;
    let restarting = Instant::now();
    // back, on the same data and port
    server.restart().await;
    let restarted = Instant::now();
    // the receiver reconnects by itself: nothing is restarted or told
    wait_for(&log, "20 deliveries stored after the restart", |log| {
        log.iter()
            .filter(|s| s.sent >= restarted && acked(s))
            .count()
            >= 20
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for sender in senders {
        sender.await.unwrap();
    }
    let log = log.lock().unwrap().clone();

    // every answer is a stored delivery or the edge's transient store error
    for sent in &log {
        let answer = &sent.answer;
        match answer.status {
            200 => assert_eq!(answer.outcome(), "stored", "{}: {answer:?}", sent.id),
            503 => {
                let body: serde_json::Value = serde_json::from_str(&answer.body)
                    .unwrap_or_else(|err| panic!("{}: not JSON ({err}): {answer:?}", sent.id));
                assert_eq!(body["ok"], false, "{}: {answer:?}", sent.id);
                assert_eq!(
                    body["error"], "store_unavailable",
                    "{}: {answer:?}",
                    sent.id
                );
            }
            _ => panic!(
                "{}: neither stored nor 503 store_unavailable: {answer:?}\n{}",
                sent.id,
                receiver.log()
            ),
        }
    }
    // sent and answered while the server was down: all refused, none stored
    let during: Vec<&Sent> = log
        .iter()
        .filter(|s| s.sent >= killed && s.answered <= restarting)
        .collect();
    let acked_during: Vec<&str> = during
        .iter()
        .filter(|s| s.answer.status != 503)
        .map(|s| s.id.as_str())
        .collect();
    assert!(
        acked_during.is_empty(),
        "answered other than 503 while the database was down: {acked_during:?}"
    );
    assert!(
        during.len() >= 5,
        "only {} deliveries were answered during the {OUTAGE:?} outage: a request hung",
        during.len()
    );

    let stored: HashSet<String> = sandbox
        .rows()
        .await
        .into_iter()
        .map(|row| row.key.delivery_id().to_string())
        .collect();
    let acked_ids: Vec<&str> = log
        .iter()
        .filter(|s| acked(s))
        .map(|s| s.id.as_str())
        .collect();
    let lost: Vec<&&str> = acked_ids
        .iter()
        .filter(|id| !stored.contains(**id))
        .collect();
    let stored_during: Vec<&str> = during
        .iter()
        .map(|s| s.id.as_str())
        .filter(|id| stored.contains(*id))
        .collect();
    println!(
        "{} deliveries sent, {} acknowledged, {} refused during the outage, {} rows stored",
        log.len(),
        acked_ids.len(),
        during.len(),
        stored.len()
    );
    assert!(lost.is_empty(), "acknowledged but not stored: {lost:?}");
    assert!(
        stored_during.is_empty(),
        "stored while the database was down: {stored_during:?}"
    );
}
