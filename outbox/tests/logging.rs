//! The relay's log lines, read back: a failed send at WARN and a dead letter at
//! ERROR with the message and its sink, a message without a sink at WARN. Alone in
//! its test binary, so no other test's callsites share the subscriber.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Behaviour, SinkServer, stage_events};
use hookbox_core::{OutboxAdmin, OutboxStore, RetryPolicy};
use hookbox_outbox::{HttpSink, RelayPolicy, Sinks, relay_once};
use hookbox_sqlite::testing::TempDir;
use hookbox_sqlite::{SqliteOptions, SqliteStore};

async fn sqlite(dir: &TempDir) -> SqliteStore {
    let store = SqliteStore::open(&dir.db(), SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

fn quick(max_attempts: u32) -> RelayPolicy {
    RelayPolicy {
        retry: RetryPolicy {
            max_attempts,
            base: Duration::ZERO,
            cap: Duration::ZERO,
        },
        idle: Duration::from_millis(10),
        ..RelayPolicy::default()
    }
}

async fn drain<S: OutboxStore + OutboxAdmin>(store: &S, sinks: &Sinks, policy: &RelayPolicy) {
    for _ in 0..1_000 {
        relay_once(store, sinks, policy).await.unwrap();
        if store.stats().await.unwrap().pending == 0 {
            return;
        }
    }
    panic!("the outbox never drained");
}

/// Log lines written to a buffer the test reads.
#[derive(Clone, Default)]
struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_failed_sends_log_warn_and_dead_letters_log_error_with_the_message() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let dir = TempDir::new();
    let store = sqlite(&dir).await;
    let sink = SinkServer::start(Behaviour {
        status: Some(503),
        ..Behaviour::default()
    })
    .await;
    let ids = stage_events(&store, 1, 1, 1).await;
    let sinks = Sinks::new().with("email", HttpSink::new(&sink.url).unwrap());
    drain(&store, &sinks, &quick(2)).await;
    let text = lines.text();
    let warn = text
        .lines()
        .find(|line| line.contains("outbox send failed; retrying"))
        .unwrap_or_else(|| panic!("a WARN line: {text}"));
    for field in [
        " WARN ",
        &format!("message_id={}", ids[0]),
        "sink=email",
        "attempt=1",
        "max_attempts=2",
        "next_attempt_at=",
        "503 Service Unavailable",
    ] {
        assert!(warn.contains(field), "{field} in {warn}");
    }
    let error = text
        .lines()
        .find(|line| line.contains("outbox message is dead"))
        .unwrap_or_else(|| panic!("an ERROR line: {text}"));
    for field in [" ERROR ", &format!("message_id={}", ids[0]), "attempt=2"] {
        assert!(error.contains(field), "{field} in {error}");
    }

    // a message whose sink this relay lacks: WARN, naming the sink
    stage_events(&store, 2, 1, 1).await;
    relay_once(&store, &Sinks::new(), &quick(2)).await.unwrap();
    let text = lines.text();
    assert!(
        text.lines().any(|line| line.contains(" WARN ")
            && line.contains("this relay has no sink of its name")
            && line.contains("sink=email")),
        "{text}"
    );
}
