//! `hookbox demo`: at-least-once delivery, received exactly once, on this machine.
//!
//! It starts a receiver ([`Webhook::inbox`] on a random loopback port) and workers
//! ([`run_worker`]) in this process, on embedded SQLite by default, then fires a
//! seeded stream of signed deliveries at the receiver over real HTTP from several
//! concurrent senders, with the faults of the seed's simulation: resends, two
//! copies at once, shuffled order, forged signatures and lost acknowledgements. When
//! every delivery is acknowledged and the inbox is drained, it prints a table like
//! the seed's, counted from the answers and the database, and exits 0 only when
//! every event was applied exactly once.
//!
//! The handler also stages a receipt email per applied event in the outbox;
//! relays send them to a counting HTTP sink while relay tasks are killed at random
//! ([`receipts`]), and the table shows receipts sent = events applied.
//!
//! The parts: [`traffic`] (the seeded model), [`sender`] (the HTTP senders),
//! [`ledger`] (the demo's tables and the worker's handler), [`receipts`] (the
//! outbox, its relays and the sink), [`report`] (the table), [`target`] (the store
//! it runs on), [`failure`] (the error they share).
#![allow(clippy::print_stdout)] // the table on stdout is the command's output

mod failure;
mod ledger;
mod receipts;
mod report;
mod sender;
mod target;
mod traffic;

use std::io::IsTerminal as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use hookbox_axum::{Webhook, axum};
use hookbox_core::http::Uri;
use hookbox_core::{
    InboxAdmin, Provider, Secrets, Signer, VerifyError, VerifyOptions, WorkerReport, error_chain,
    run_worker,
};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::{oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::UsageError;
use crate::providers::{self, ProviderConfig, ProviderName, SignerSettings};
use failure::Failure;
use ledger::{DemoConn, DemoStore};
use report::Report;
use sender::Sender;
use target::{Target, run_mysql, run_postgres, run_sqlite};
use traffic::Traffic;

pub(crate) const AFTER_HELP: &str = "\
Output: a table on stdout, counted from the HTTP answers and the database; a
progress bar on stderr while it runs (only when stderr is a terminal).

Exit status: 0 when every event was applied exactly once, the ledger equals the
expected total, every forgery was refused and every account ends on its latest
plan; 1 otherwise (the last line says what broke); 2 usage error.

Examples:
  hookbox demo
  hookbox demo --events 10000 --provider stripe --seed 7
  hookbox demo --store postgres://postgres@127.0.0.1:5432/test
  hookbox demo --store mysql://root@127.0.0.1:3306/test";

/// Where the receiver listens.
const PATH: &str = "/webhooks/demo";
/// Workers draining the inbox. On SQLite one leases the next row while the other
/// works (writes still take turns); Postgres and MySQL take rows with `SKIP LOCKED`.
const SQLITE_WORKERS: usize = 2;
const POSTGRES_WORKERS: usize = 4;
const MYSQL_WORKERS: usize = 4;
/// How long an idle worker waits before looking for a row again.
const WORKER_IDLE: Duration = Duration::from_millis(5);

/// Arguments of `hookbox demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// The store: a new SQLite file (kept afterwards), a `postgres://` URL (a fresh
    /// schema, dropped afterwards) or a `mysql://` URL (a fresh database on that server,
    /// dropped afterwards) [default: a temporary SQLite file, deleted afterwards].
    #[arg(long, value_name = "PATH|URL")]
    store: Option<String>,

    /// How many events to generate (about 10% more deliveries are sent).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    events: u32,

    /// The seed of the traffic: the same seed plans the same stream.
    #[arg(long, default_value_t = traffic::DEFAULT_SEED)]
    seed: u64,

    /// The provider whose signatures the senders make and the receiver verifies.
    #[arg(long, value_enum, default_value = "standard")]
    provider: ProviderName,
}

/// Runs the demo and prints its report.
///
/// # Errors
/// [`UsageError`] when `--store` names an existing file or the runtime cannot start.
pub(crate) fn run(args: &DemoArgs) -> Result<ExitCode, UsageError> {
    let target = Target::from_arg(args.store.as_deref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|err| UsageError(format!("cannot start the runtime: {err}")))?;
    let outcome = runtime.block_on(demo(args, &target));
    // the temporary file goes now, pass or fail
    drop(target);
    Ok(match outcome {
        Ok(report) => {
            print!("{report}");
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(err) => {
            eprintln!("error: {}", error_chain(&*err));
            ExitCode::FAILURE
        }
    })
}

/// The receiver's provider and the senders' signers: a genuine one, and one with
/// the wrong secret for the forgeries.
struct Keys {
    provider: Box<dyn Provider>,
    signer: Arc<dyn Signer>,
    forger: Arc<dyn Signer>,
}

impl Keys {
    fn new(name: ProviderName, seed: u64) -> Result<Self, VerifyError> {
        let mut rng = fastrand::Rng::with_seed(seed.rotate_left(32));
        let (secret, wrong) = (demo_secret(&mut rng), demo_secret(&mut rng));
        let settings = SignerSettings::default();
        // the URL Twilio and Square sign: the senders and the receiver agree on it
        let config = ProviderConfig {
            public_url: Some("https://hooks.example.com/demo"),
            scheme: None,
        };
        Ok(Self {
            provider: providers::provider(
                name,
                Secrets::from(secret.clone()),
                VerifyOptions::default(),
                &config,
            )?,
            signer: Arc::from(providers::signer(name, &[secret], &settings, &config)?),
            forger: Arc::from(providers::signer(name, &[wrong], &settings, &config)?),
        })
    }
}

/// Returns a secret every provider accepts: `whsec_` and base64, as Standard Webhooks
/// and Svix issue them (Stripe, GitHub and Shopify take any text).
fn demo_secret(rng: &mut fastrand::Rng) -> String {
    let bytes: Vec<u8> = std::iter::repeat_with(|| rng.u8(..)).take(24).collect();
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// What every run shares, whatever the store.
struct Setup {
    traffic: Arc<Traffic>,
    keys: Keys,
    provider: &'static str,
}

async fn demo(args: &DemoArgs, target: &Target) -> Result<Report, Failure> {
    let setup = Setup {
        traffic: Arc::new(Traffic::generate(args.events as usize, args.seed)),
        keys: Keys::new(args.provider, args.seed)?,
        provider: args.provider.as_str(),
    };
    match target {
        Target::Temporary(dir) => {
            let label = "SQLite (a temporary file, deleted afterwards)".to_string();
            run_sqlite(&dir.db(), label, setup).await
        }
        Target::File(path) => {
            let label = format!("SQLite ({})", path.display());
            run_sqlite(path, label, setup).await
        }
        Target::Postgres(url) => run_postgres(url, setup).await,
        Target::Mysql(url) => run_mysql(url, setup).await,
    }
}

/// Runs the demo on a migrated store: receiver, workers, senders, drain, report.
async fn run_on<S, C>(
    store: S,
    workers: usize,
    label: String,
    setup: Setup,
) -> Result<Report, Failure>
where
    S: DemoStore<C>,
    C: DemoConn + 'static,
{
    let Setup {
        traffic,
        keys,
        provider,
    } = setup;
    ledger::create_tables(&mut *store.checkout().await?).await?;
    let receiver = Receiver::start(Webhook::inbox(keys.provider, store.clone())).await?;
    let workers = Workers::start(&store, workers);
    let receipts = receipts::Receipts::start(&store, traffic.seed).await?;
    let progress = Progress::new(traffic.planned_requests(), traffic.events.len() as u64);
    let watcher = progress.watch(store.clone());

    let sender = Sender::new(
        receiver.uri()?,
        keys.signer,
        keys.forger,
        Arc::clone(&traffic),
        progress.sent.clone(),
    );
    let measured = send_and_drain(sender, &store, &traffic).await;

    // stopped whatever happened, so nothing writes while the report reads (or while
    // a Postgres schema or a MySQL database is dropped)
    if let Some(watcher) = watcher {
        watcher.abort();
        let _ = watcher.await;
    }
    progress.finish();
    let stopped = workers.stop().await;
    receiver.stop().await;
    let receipts = receipts.finish(&store, drain_deadline(&traffic)).await;
    let (tally, drained, elapsed) = measured?;
    let worker = stopped?;
    let receipts = receipts?;

    let tables = ledger::read_tables(&mut *store.checkout().await?).await?;
    let stats = InboxAdmin::stats(&store).await?;
    Ok(Report {
        provider,
        store: label,
        traffic,
        tally,
        worker,
        tables,
        stats,
        drained,
        elapsed,
        receipts,
    })
}

/// Sends the whole stream, then waits for the inbox to drain; returns the senders'
/// tally, whether it drained, and the time from the first delivery to the drain.
async fn send_and_drain<S: InboxAdmin>(
    sender: Sender,
    store: &S,
    traffic: &Traffic,
) -> Result<(sender::Tally, bool, Duration), Failure> {
    let started = Instant::now();
    let tally = Arc::new(sender).send_all().await;
    let drained = drain(store, drain_deadline(traffic)).await?;
    Ok((tally, drained, started.elapsed()))
}

/// The axum receiver on a random loopback port.
struct Receiver {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Receiver {
    async fn start(webhook: Webhook) -> Result<Self, Failure> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let router = webhook.into_router(PATH);
        let task = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
        });
        Ok(Self { addr, stop, task })
    }

    fn uri(&self) -> Result<Uri, Failure> {
        Ok(format!("http://{}{PATH}", self.addr).parse()?)
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        // the senders' connections are closed by now; do not wait on a stuck one
        if tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .is_err()
        {
            eprintln!("note: the receiver did not stop within 5 s");
        }
    }
}

/// Workers draining the inbox with the demo's handler until stopped.
struct Workers {
    stop: watch::Sender<bool>,
    tasks: JoinSet<Result<WorkerReport, Failure>>,
}

impl Workers {
    fn start<S, C>(store: &S, count: usize) -> Self
    where
        S: DemoStore<C>,
        C: DemoConn + 'static,
    {
        let (stop, stopped) = watch::channel(false);
        let mut tasks = JoinSet::new();
        for _ in 0..count {
            let store = store.clone();
            let mut stopped = stopped.clone();
            tasks.spawn(async move {
                let shutdown = async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                };
                let handler = ledger::handler(store.clone());
                Ok(run_worker(&store, handler, WORKER_IDLE, shutdown).await?)
            });
        }
        Self { stop, tasks }
    }

    /// Stops the workers after their current row; returns what they did, summed.
    ///
    /// # Errors
    /// A worker stopped early on a store error.
    async fn stop(mut self) -> Result<WorkerReport, Failure> {
        let _ = self.stop.send(true);
        let mut total = WorkerReport::default();
        while let Some(joined) = self.tasks.join_next().await {
            let report = joined??;
            total.processed += report.processed;
            total.failed += report.failed;
            total.dead += report.dead;
            total.store_errors += report.store_errors;
        }
        Ok(total)
    }
}

/// Waits until the inbox has no pending row, or `deadline` passed; returns whether
/// it drained.
async fn drain<S: InboxAdmin>(store: &S, deadline: Duration) -> Result<bool, Failure> {
    let until = Instant::now() + deadline;
    loop {
        if store.stats().await?.pending == 0 {
            return Ok(true);
        }
        if Instant::now() >= until {
            return Ok(false);
        }
        // `stats` counts the whole inbox: asking more often only slows the worker
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Generous: the worker does hundreds of rows a second even on SQLite.
fn drain_deadline(traffic: &Traffic) -> Duration {
    Duration::from_secs(30) + Duration::from_millis(10) * traffic.events.len() as u32
}

/// Two bars on stderr: requests answered, and inbox rows applied.
struct Progress {
    bars: MultiProgress,
    sent: ProgressBar,
    applied: ProgressBar,
}

impl Progress {
    fn new(requests: u64, events: u64) -> Self {
        // a bar written into a file or a pipe is only noise
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bars = MultiProgress::with_draw_target(target);
        let style = ProgressStyle::with_template("{prefix:>8} [{bar:40}] {pos}/{len}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        let bar = |len, prefix| {
            bars.add(
                ProgressBar::new(len)
                    .with_style(style.clone())
                    .with_prefix(prefix),
            )
        };
        let sent = bar(requests, "sent");
        let applied = bar(events, "applied");
        Self {
            bars,
            sent,
            applied,
        }
    }

    /// Moves the "applied" bar with the inbox's processed count, while it is shown.
    fn watch<S: InboxAdmin + Clone + 'static>(&self, store: S) -> Option<JoinHandle<()>> {
        if self.bars.is_hidden() {
            return None;
        }
        let applied = self.applied.clone();
        Some(tokio::spawn(async move {
            loop {
                if let Ok(stats) = store.stats().await {
                    applied.set_position(stats.processed);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }))
    }

    fn finish(&self) {
        self.sent.finish_and_clear();
        self.applied.finish_and_clear();
        let _ = self.bars.clear();
    }
}
