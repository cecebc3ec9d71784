//! The measurements: claim loops timed in alternating rounds, and the worker rows
//! (receive, then drain).

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hookbox_bench::load::Loops;
use hookbox_bench::rounds::{self, median};
use hookbox_bench::{BoxErr, env};
use hookbox_core::bytes::Bytes;
use hookbox_core::{DedupeKey, KeptHeaders, VerifiedDelivery, Worked};

use crate::target::{ACCOUNTS, Side, Target, bench_key};

/// What the worker rows carry: a small Stripe-shaped event.
const BODY: &[u8] = br#"{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","api_version":"2024-06-20","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3NG8Du2eZvKYlo2C1","object":"payment_intent","amount":2000,"currency":"usd"}}}"#;

/// Which keys a run claims.
#[derive(Clone)]
enum Keys {
    /// New keys under a label no other run uses.
    Fresh(Arc<str>),
    /// Keys claimed before, in turn.
    Existing(Arc<Vec<DedupeKey>>),
}

impl Keys {
    fn fresh() -> Self {
        Self::Fresh(next_label().into())
    }

    fn key(&self, task: usize, tasks: usize, n: u64) -> Cow<'_, DedupeKey> {
        match self {
            Self::Fresh(label) => Cow::Owned(bench_key(label, task, n)),
            Self::Existing(keys) => {
                Cow::Borrowed(&keys[(n as usize * tasks + task) % keys.len().max(1)])
            }
        }
    }
}

fn next_label() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("r{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// What one timed run did.
struct Run {
    ops: u64,
    applied: u64,
    per_task: Vec<u64>,
    secs: f64,
}

impl Run {
    fn rate(&self) -> f64 {
        self.ops as f64 / self.secs
    }
}

/// Runs `tasks` concurrent loops of one claim transaction each until `duration`
/// has passed.
async fn run(
    target: &Arc<Target>,
    side: Side,
    tasks: usize,
    keys: &Keys,
    duration: Duration,
) -> Result<Run, BoxErr> {
    let deadline = Instant::now() + duration;
    let mut loops = Loops::start();
    for task in 0..tasks {
        let (target, keys) = (Arc::clone(target), keys.clone());
        loops.spawn(async move {
            let account = ACCOUNTS[task % ACCOUNTS.len()];
            let (mut n, mut applied) = (0u64, 0u64);
            while Instant::now() < deadline {
                let key = keys.key(task, tasks, n);
                applied += u64::from(target.claim(side, &key, account).await?);
                n += 1;
            }
            Ok::<_, BoxErr>((n, applied))
        });
    }
    let (loops, elapsed) = loops.join().await;
    let mut run = Run {
        ops: 0,
        applied: 0,
        per_task: Vec::with_capacity(tasks),
        secs: elapsed.as_secs_f64(),
    };
    for result in loops {
        let (n, applied) = result??;
        run.ops += n;
        run.applied += applied;
        run.per_task.push(n);
    }
    target.applied.fetch_add(run.applied, Ordering::Relaxed);
    Ok(run)
}

/// How long each measurement runs.
pub(crate) struct Timing {
    pub(crate) warm: Duration,
    pub(crate) round: Duration,
    pub(crate) rounds: usize,
    pub(crate) drain: Duration,
}

impl Timing {
    /// Rounds of `HOOKBOX_BENCH_ROUND_MS` (default 1000), a warm-up of 30% of one,
    /// worker drains of two.
    pub(crate) fn from_env() -> Self {
        let round = env::millis("HOOKBOX_BENCH_ROUND_MS", 1000);
        Self {
            warm: round * 3 / 10,
            round,
            rounds: 3,
            drain: round * 2,
        }
    }
}

/// The rates of alternating hookbox and raw rounds (and `process_once_blocking`
/// rounds, when measured).
pub(crate) struct Pair {
    pub(crate) hookbox: Vec<f64>,
    /// Empty unless `Side::Blocking` was measured.
    pub(crate) blocking: Vec<f64>,
    pub(crate) raw: Vec<f64>,
    /// The label and per-task counts of the first measured hookbox round of fresh
    /// keys: the keys it claimed, for the duplicate rows.
    first: Option<(Arc<str>, Vec<u64>)>,
}

impl Pair {
    /// The keys the first measured hookbox round of fresh keys claimed.
    pub(crate) fn claimed_keys(&self) -> Vec<DedupeKey> {
        let Some((label, per_task)) = &self.first else {
            return Vec::new();
        };
        per_task
            .iter()
            .enumerate()
            .flat_map(|(task, &n)| (0..n).map(move |n| bench_key(label, task, n)))
            .collect()
    }

    /// The median rate of the hookbox rounds.
    pub(crate) fn hookbox_median(&self) -> f64 {
        median(&self.hookbox)
    }
}

/// Hookbox's `process_once` beside the raw loop.
pub(crate) const PAIR: &[Side] = &[Side::Hookbox, Side::Raw];
/// Both of `hookbox-sqlite`'s claim paths beside the raw loop; `Blocking` in the
/// middle, so that it is as near to each of the others, in every round order.
pub(crate) const SQLITE_TRIO: &[Side] = &[Side::Hookbox, Side::Blocking, Side::Raw];

/// Measures `sides` in alternating rounds; `existing` is `None` for fresh keys
/// (every claim must apply) or the keys to claim again (none may apply).
pub(crate) async fn pair(
    target: &Arc<Target>,
    sides: &[Side],
    tasks: usize,
    existing: Option<&Arc<Vec<DedupeKey>>>,
    timing: &Timing,
    anomalies: &mut Vec<String>,
) -> Result<Pair, BoxErr> {
    let keys = || existing.map_or_else(Keys::fresh, |k| Keys::Existing(Arc::clone(k)));
    let mut check = |side: Side, run: &Run| {
        let expected = if existing.is_none() { run.ops } else { 0 };
        if run.applied != expected {
            anomalies.push(format!(
                "{side:?} at {tasks} tasks applied {} of {} claims, expected {expected}",
                run.applied, run.ops
            ));
        }
    };
    for &side in sides {
        let warm = run(target, side, tasks, &keys(), timing.warm).await?;
        check(side, &warm);
    }
    let mut pair = Pair {
        hookbox: Vec::new(),
        blocking: Vec::new(),
        raw: Vec::new(),
        first: None,
    };
    // H R, R H, H R (or H B R, R B H, H B R): a steady drift of the machine's load
    // favours no side
    for i in rounds::alternating(sides.len(), timing.rounds) {
        let (side, keys) = (sides[i], keys());
        let measured = run(target, side, tasks, &keys, timing.round).await?;
        check(side, &measured);
        match side {
            Side::Hookbox => {
                if let (None, Keys::Fresh(label)) = (&pair.first, &keys) {
                    pair.first = Some((Arc::clone(label), measured.per_task.clone()));
                }
                pair.hookbox.push(measured.rate());
            }
            Side::Blocking => pair.blocking.push(measured.rate()),
            Side::Raw => pair.raw.push(measured.rate()),
        }
    }
    Ok(pair)
}

/// What one worker row measured.
pub(crate) struct Drained {
    pub(crate) received: u64,
    pub(crate) receive_rate: f64,
    pub(crate) processed: u64,
    pub(crate) rate: f64,
}

/// Receives `rows` deliveries (4 tasks), then drains with `workers` tasks calling
/// `work_one` until the inbox is empty or `timing.drain` has passed.
pub(crate) async fn worker_row(
    target: &Arc<Target>,
    workers: usize,
    rows: u64,
    timing: &Timing,
    anomalies: &mut Vec<String>,
) -> Result<Drained, BoxErr> {
    const RECEIVERS: usize = 4;
    let label: Arc<str> = next_label().into();
    let mut receivers = Loops::start();
    for task in 0..RECEIVERS {
        let (target, label) = (Arc::clone(target), Arc::clone(&label));
        receivers.spawn(async move {
            let mut n = task as u64;
            while n < rows {
                let delivery = VerifiedDelivery::new(
                    bench_key(&label, task, n),
                    Bytes::from_static(BODY),
                    KeptHeaders::default(),
                );
                target.receive(&delivery).await?;
                n += RECEIVERS as u64;
            }
            Ok::<_, BoxErr>(())
        });
    }
    let (receivers, elapsed) = receivers.join().await;
    for result in receivers {
        result??;
    }
    let receive_rate = rows as f64 / elapsed.as_secs_f64();

    let deadline = Instant::now() + timing.drain;
    let mut drains = Loops::start();
    for _ in 0..workers {
        let target = Arc::clone(target);
        drains.spawn(async move {
            let (mut processed, mut failed) = (0u64, 0u64);
            while Instant::now() < deadline {
                match target.work_one().await? {
                    Worked::Processed { .. } => processed += 1,
                    Worked::Failed { .. } => failed += 1,
                    Worked::Idle => break,
                }
            }
            Ok::<_, BoxErr>((processed, failed))
        });
    }
    let (drains, elapsed) = drains.join().await;
    let (mut processed, mut failed) = (0, 0);
    for result in drains {
        let (p, f) = result??;
        processed += p;
        failed += f;
    }
    let secs = elapsed.as_secs_f64();
    target.applied.fetch_add(processed, Ordering::Relaxed);
    if failed > 0 {
        anomalies.push(format!("the worker's handler failed {failed} times"));
    }
    Ok(Drained {
        received: rows,
        receive_rate,
        processed,
        rate: processed as f64 / secs,
    })
}

/// Rows for the worker bench: about what the claim rate fills in one drain.
pub(crate) fn worker_rows(claims_per_sec: f64, timing: &Timing) -> u64 {
    (claims_per_sec * timing.drain.as_secs_f64()).clamp(500.0, 50_000.0) as u64
}
