//! The demo's outside effect: a "receipt email" per applied event, staged in the
//! outbox by the handler and sent by relays to a counting HTTP sink, while relay
//! tasks are killed at random moments.
//!
//! The sink plays an email API that honours `Idempotency-Key`: it applies each key
//! once and answers 2xx to a resend of a key it has already applied. A relay killed
//! after the sink got a request and before the relay recorded the answer leaves its
//! lease to expire; another relay sends the message again with the same key, and the
//! sink absorbs it. The report shows receipts sent = events applied, each key
//! applied once.

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookbox_axum::axum;
use hookbox_core::http::{HeaderMap, StatusCode};
use hookbox_core::{OutboxAdmin, OutboxStats, OutboxStore, RetryPolicy};
use hookbox_outbox::{HttpSink, RelayPolicy, Sinks, run_relay};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::failure::Failure;

/// The sink name the handler stages receipts for.
pub(crate) const SINK: &str = "email";
/// The handler name the receipts' ids derive from.
pub(crate) const HANDLER: &str = "receipt";
/// Relay tasks running at once.
const RELAYS: usize = 2;
/// A relay's lease: short, so a killed relay's messages come back within a second.
const LEASE: Duration = Duration::from_secs(1);

/// What the sink saw.
#[derive(Debug, Default)]
struct Seen {
    keys: Mutex<HashSet<String>>,
    requests: AtomicU64,
    absorbed: AtomicU64,
}

/// What the receipts part of a run measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ReceiptTally {
    /// The outbox's counts after the drain.
    pub(crate) outbox: OutboxStats,
    /// Requests the sink got.
    pub(crate) requests: u64,
    /// Distinct Idempotency-Keys the sink applied.
    pub(crate) keys_applied: u64,
    /// Requests with a key already applied (resends after a crash), answered 2xx.
    pub(crate) absorbed: u64,
    /// Relay tasks killed mid-flight.
    pub(crate) crashes: u64,
    /// `false` when messages were still pending at the deadline.
    pub(crate) drained: bool,
}

/// The counting sink on a loopback port.
struct SinkServer {
    url: String,
    seen: Arc<Seen>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

impl SinkServer {
    async fn start() -> Result<Self, Failure> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr: SocketAddr = listener.local_addr()?;
        let seen = Arc::new(Seen::default());
        let state = Arc::clone(&seen);
        let router = axum::Router::new().route(
            "/receipts",
            axum::routing::post(move |headers: HeaderMap| {
                let seen = Arc::clone(&state);
                async move { apply(&seen, &headers).await }
            }),
        );
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
        });
        Ok(Self {
            url: format!("http://{addr}/receipts"),
            seen,
            stop,
            task,
        })
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
    }
}

/// The email API: a moment of work (so a relay killed at a random time is often
/// mid-request), then apply the key once.
async fn apply(seen: &Seen, headers: &HeaderMap) -> StatusCode {
    seen.requests.fetch_add(1, Ordering::Relaxed);
    let Some(key) = headers
        .get("idempotency-key")
        .and_then(|key| key.to_str().ok())
    else {
        return StatusCode::BAD_REQUEST;
    };
    tokio::time::sleep(Duration::from_millis(2)).await;
    let first = seen
        .keys
        .lock()
        .map(|mut keys| keys.insert(key.to_string()))
        .unwrap_or(false);
    if !first {
        seen.absorbed.fetch_add(1, Ordering::Relaxed);
    }
    StatusCode::OK
}

/// Relay tasks with a chaos task that kills one at a random moment and starts a
/// fresh one, as a process crash and a restart would.
pub(crate) struct Receipts {
    sink: SinkServer,
    stop_relays: watch::Sender<bool>,
    stop_chaos: oneshot::Sender<()>,
    chaos: JoinHandle<Vec<JoinHandle<()>>>,
    crashes: Arc<AtomicU64>,
}

impl Receipts {
    /// Starts the sink, the relays and the chaos, seeded by `seed`.
    pub(crate) async fn start<S>(store: &S, seed: u64) -> Result<Self, Failure>
    where
        S: OutboxStore + OutboxAdmin + Clone + 'static,
    {
        let sink = SinkServer::start().await?;
        let sinks = Sinks::new().with(SINK, HttpSink::new(&sink.url)?);
        let (stop_relays, stopped) = watch::channel(false);
        let spawn = {
            let store = store.clone();
            move || {
                let (store, sinks, mut stopped) = (store.clone(), sinks.clone(), stopped.clone());
                tokio::spawn(async move {
                    let shutdown = async move {
                        let _ = stopped.wait_for(|stop| *stop).await;
                    };
                    if let Err(err) = run_relay(&store, &sinks, policy(), shutdown).await {
                        eprintln!("relay stopped: {}", hookbox_core::error_chain(&err));
                    }
                })
            }
        };
        let crashes = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&crashes);
        let (stop_chaos, mut chaos_stopped) = oneshot::channel::<()>();
        let chaos = tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(seed ^ 0x05ee_d0fc_4a05);
            let mut relays: Vec<JoinHandle<()>> = (0..RELAYS).map(|_| spawn()).collect();
            loop {
                let pause = Duration::from_millis(rng.u64(100..400));
                tokio::select! {
                    _ = &mut chaos_stopped => return relays,
                    () = tokio::time::sleep(pause) => {}
                }
                // abort: the relay's future is dropped wherever it is (mid-send,
                // before the record), as SIGKILL would stop a process
                let victim = rng.usize(..relays.len());
                relays[victim].abort();
                counted.fetch_add(1, Ordering::Relaxed);
                relays[victim] = spawn();
            }
        });
        Ok(Self {
            sink,
            stop_relays,
            stop_chaos,
            chaos,
            crashes,
        })
    }

    /// Stops the crashes, waits until the outbox has nothing pending (or
    /// `deadline`), stops the relays gracefully and the sink, and returns the tally.
    pub(crate) async fn finish<S: OutboxAdmin>(
        self,
        store: &S,
        deadline: Duration,
    ) -> Result<ReceiptTally, Failure> {
        let _ = self.stop_chaos.send(());
        let relays = self.chaos.await?;
        let until = tokio::time::Instant::now() + deadline;
        let drained = loop {
            if store.stats().await?.pending == 0 {
                break true;
            }
            if tokio::time::Instant::now() >= until {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let _ = self.stop_relays.send(true);
        for relay in relays {
            let _ = relay.await;
        }
        let seen = Arc::clone(&self.sink.seen);
        self.sink.stop().await;
        let keys_applied = seen.keys.lock().map(|keys| keys.len()).unwrap_or(0) as u64;
        Ok(ReceiptTally {
            outbox: store.stats().await?,
            requests: seen.requests.load(Ordering::Relaxed),
            keys_applied,
            absorbed: seen.absorbed.load(Ordering::Relaxed),
            crashes: self.crashes.load(Ordering::Relaxed),
            drained,
        })
    }
}

/// Quick retries and a short lease, so the demo's crashes heal in about a second.
fn policy() -> RelayPolicy {
    RelayPolicy {
        retry: RetryPolicy {
            max_attempts: 20,
            base: Duration::from_millis(10),
            cap: Duration::from_millis(200),
        },
        lease: LEASE,
        send_timeout: Duration::from_millis(500),
        batch: 16,
        concurrency: 64,
        idle: Duration::from_millis(10),
    }
}
