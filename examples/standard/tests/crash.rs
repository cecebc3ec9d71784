//! The receiver killed with SIGKILL while many deliveries are in flight, so that some
//! are queued for, or inside, a group commit: every delivery that got a 2xx is in
//! the store afterwards. The count lost is printed and must be 0.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookbox_standard::StandardSigner;
use hookbox_testkit::{Sandbox, unique};

const BIN: &str = env!("CARGO_BIN_EXE_example-standard");
const PATH: &str = "/webhooks/standard";
const SECRET: &str = "whsec_aG9va2JveC1zdGFuZGFyZC1kZW1vLXNlY3JldCEh";
const BODY: &[u8] = br#"{"type":"contact.created","data":{"id":"contact_1"}}"#;
const SENDERS: usize = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_delivery_survives_a_sigkill_of_the_receiver() {
    let Some(sandbox) = Sandbox::for_build(cfg!(feature = "postgres")).await else {
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
