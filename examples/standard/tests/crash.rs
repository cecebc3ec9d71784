//! The receiver killed with SIGKILL while many deliveries are in flight, so that some
//! are queued for, or inside, a group commit: every delivery that got a 2xx is in
//! the store afterwards. The count lost is printed and must be 0.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookbox_standard::StandardSigner;
use hookbox_testkit::{Backend, Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-standard");
/// The database this build of the example stores in.
const BACKEND: Backend =
    Backend::from_features(cfg!(feature = "postgres"), cfg!(feature = "mysql"));
const PATH: &str = "/webhooks/standard";
const SECRET: &str = "whsec_aG9va2JveC1zdGFuZGFyZC1kZW1vLXNlY3JldCEh";
const BODY: &[u8] = br#"{"type":"contact.created","data":{"id":"contact_1"}}"#;
const SENDERS: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_delivery_survives_a_sigkill_of_the_receiver() {
    let Some(sandbox) = Sandbox::for_build(BACKEND).await else {
        return;
    };
    // the receiver alone: no worker, so every stored row stays in the inbox to count
    let example = sandbox.start(BIN, &["serve", "--no-worker"]);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let run = unique("crash");
    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            let (sender_to, acked, run) = (example.sender(), acked.clone(), run.clone());
            tokio::spawn(async move {
                let signer = StandardSigner::new(SECRET).unwrap();
                for n in 0..50 {
                    let id = format!("{run}_{sender}_{n}");
                    match sender_to.try_send(PATH, &signer, &id, BODY).await {
                        Ok(answer) if answer.status == 200 => acked.lock().unwrap().push(id),
                        Ok(_) => {}
                        Err(_) => return, // the receiver is gone
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    example.kill_now();
    for sender in senders {
        sender.await.unwrap();
    }

    let acked = acked.lock().unwrap().clone();
    let stored: std::collections::HashSet<String> = sandbox
        .rows()
        .await
        .into_iter()
        .map(|row| row.key.delivery_id().to_string())
        .collect();
    let lost: Vec<&String> = acked.iter().filter(|id| !stored.contains(*id)).collect();
    println!(
        "{} deliveries acknowledged before the SIGKILL, {} rows stored, {} lost",
        acked.len(),
        stored.len(),
        lost.len()
    );
    assert!(
        !acked.is_empty(),
        "the receiver acknowledged nothing before the kill"
    );
    assert!(lost.is_empty(), "acknowledged but not stored: {lost:?}");
}

/// The worker process killed with SIGKILL again and again while it drains a backlog,
/// some of its batches mid-transaction: afterwards every delivery is applied exactly
/// once (one ledger line each) and none is a dead letter. On SQLite a killed batch's
/// rows wait for their lease (30 s) and are then retried one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_delivery_is_applied_once_across_sigkills_of_the_worker() {
    const DELIVERIES: usize = 2_000;
    const KILLS: usize = 5;
    let Some(sandbox) = Sandbox::for_build(BACKEND).await else {
        return;
    };
    let receiver = sandbox.start(BIN, &["serve", "--no-worker"]);
    let run = unique("workerkill");
    let senders: Vec<_> = (0..SENDERS)
        .map(|sender| {
            let (sender_to, run) = (receiver.sender(), run.clone());
            tokio::spawn(async move {
                let signer = StandardSigner::new(SECRET).unwrap();
                for n in (sender..DELIVERIES).step_by(SENDERS) {
                    let answer = sender_to
                        .try_send(PATH, &signer, &format!("{run}_{n}"), BODY)
                        .await
                        .expect("the receiver answers");
                    assert_eq!(answer.status, 200, "delivery {n}");
                }
            })
        })
        .collect();
    for sender in senders {
        sender.await.unwrap();
    }
    assert_eq!(sandbox.stats().await.pending, DELIVERIES as u64);

    // kill workers while they drain; the delay grows until a kill lands mid-drain
    let mut delay = Duration::from_millis(50);
    let mut mid_drain = 0;
    for _ in 0..KILLS {
        let before = sandbox.stats().await;
        let mut worker = sandbox.spawn(BIN, &["worker"]);
        tokio::time::sleep(delay).await;
        worker.kill_now();
        worker.exited().await;
        let after = sandbox.stats().await;
        println!(
            "worker killed after {delay:?}: processed {} -> {}, pending {}",
            before.processed, after.processed, after.pending
        );
        if after.processed > before.processed && after.pending > 0 {
            mid_drain += 1;
        } else if after.processed == before.processed {
            delay *= 2;
        }
        if after.pending == 0 {
            break;
        }
    }
    assert!(
        mid_drain > 0,
        "no kill landed while the worker was draining\n{}",
        sandbox.logs()
    );

    let _worker = sandbox.spawn(BIN, &["worker"]);
    sandbox.wait_processed(DELIVERIES as u64).await;
    let lines = sandbox
        .query_i64(&format!(
            "SELECT COUNT(*) AS n FROM event_ledger WHERE delivery_id LIKE '{run}_%'"
        ))
        .await;
    let distinct = sandbox
        .query_i64(&format!(
            "SELECT COUNT(DISTINCT delivery_id) AS n FROM event_ledger WHERE delivery_id LIKE '{run}_%'"
        ))
        .await;
    println!("{DELIVERIES} deliveries, {lines} ledger lines, {distinct} distinct");
    assert_eq!(distinct, DELIVERIES as i64, "every delivery applied");
    assert_eq!(lines, DELIVERIES as i64, "none applied twice");
}
