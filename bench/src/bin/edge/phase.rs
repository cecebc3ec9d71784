//! The phases of a cell: loops that send (or receive) as fast as they are answered
//! for a fixed time, alone or alternating with a second side in rounds.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hookbox_bench::load::Loops;
use hookbox_bench::{BoxErr, env, rounds};
use tokio::runtime::Runtime;

use crate::tally::{Answer, Tally};

/// Concurrent connections (request loops) per cell.
pub(crate) const CONNECTIONS: [usize; 3] = [1, 16, 64];
/// Connections of the rows with a worker draining beside the edge.
pub(crate) const WORKER_CONNECTIONS: usize = 64;

/// How long each phase of a cell runs.
pub(crate) struct Timing {
    pub(crate) warm: Duration,
    pub(crate) cell: Duration,
}

impl Timing {
    /// `HOOKBOX_BENCH_WARM_MS` (default 300) and `HOOKBOX_BENCH_CELL_MS` (default
    /// 2000).
    pub(crate) fn from_env() -> Self {
        Self {
            warm: env::millis("HOOKBOX_BENCH_WARM_MS", 300),
            cell: env::millis("HOOKBOX_BENCH_CELL_MS", 2000),
        }
    }
}

/// Requests signed for a fresh side's first phase (its warm-up), and the least for
/// any later phase, whose budget is sized from the fastest phase before.
const WARM_REQUESTS: usize = 8_000;
/// The most requests signed for one measured fresh phase.
const MAX_SIGNED: usize = 200_000;

/// What the loops draw from: a list taken once each (fresh) or round robin
/// (duplicates, the ceiling).
struct Batch<T> {
    items: Vec<Arc<T>>,
    next: AtomicUsize,
    cycle: bool,
}

impl<T> Batch<T> {
    fn once(items: Vec<Arc<T>>) -> Self {
        Self {
            items,
            next: AtomicUsize::new(0),
            cycle: false,
        }
    }

    fn cycle(items: Vec<Arc<T>>) -> Self {
        Self {
            items,
            next: AtomicUsize::new(0),
            cycle: true,
        }
    }

    /// The next item; `None` when a one-shot list is used up.
    fn take(&self) -> Option<Arc<T>> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let n = if self.cycle && !self.items.is_empty() {
            n % self.items.len()
        } else {
            n
        };
        self.items.get(n).map(Arc::clone)
    }
}

/// Runs `conns` loops, each taking the next item and awaiting `op` on it, until
/// `duration` has passed or the batch is used up.
///
/// With `pace` (requests per second in all), each loop sends on a schedule of
/// `conns / pace` seconds between requests, the loops spread evenly over one period,
/// instead of as fast as it is answered: an offered load, for latency at a given
/// rate. A loop behind its schedule sends at once.
async fn phase<T, F, Fut>(
    conns: usize,
    batch: Arc<Batch<T>>,
    duration: Duration,
    op: F,
    pace: Option<f64>,
) -> Tally
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Answer> + Send + 'static,
{
    let until = Instant::now() + duration;
    let mut loops = Loops::start();
    let period = pace.map(|rate| Duration::from_secs_f64(conns as f64 / rate.max(1e-3)));
    for n in 0..conns {
        let (batch, op) = (Arc::clone(&batch), op.clone());
        let mut next = period.map(|period| Instant::now() + period * n as u32 / conns as u32);
        loops.spawn(async move {
            let mut tally = Tally::default();
            while Instant::now() < until {
                if let (Some(at), Some(period)) = (next.as_mut(), period) {
                    tokio::time::sleep_until((*at).into()).await;
                    *at = (*at + period).max(Instant::now());
                }
                let Some(item) = batch.take() else {
                    tally.ran_out = true;
                    break;
                };
                let sent = Instant::now();
                let answer = op(item).await;
                tally.record(answer, sent.elapsed());
            }
            tally
        });
    }
    let (loops, elapsed) = loops.join().await;
    let mut total = Tally::default();
    for tally in loops {
        match tally {
            Ok(tally) => total.merge(tally),
            Err(err) => total.record(
                Answer::Failed(format!("loop failed: {err}")),
                Duration::ZERO,
            ),
        }
    }
    // the loops' own elapsed times are zero: the phase's wall time is the divisor
    total.elapsed = elapsed;
    total
}

/// What a cell sends.
pub(crate) enum Feed<'a, T> {
    /// The same items, round robin.
    Cycle(Vec<Arc<T>>),
    /// New items only: signs `n` more each time it is called.
    Fresh(&'a dyn Fn(usize) -> Result<Vec<Arc<T>>, BoxErr>),
}

/// One side of a cell: loops on a runtime, what they send, and what they do with it.
pub(crate) struct Side<'a, T, F> {
    pub(crate) rt: &'a Runtime,
    pub(crate) conns: usize,
    pub(crate) feed: Feed<'a, T>,
    pub(crate) op: F,
    pub(crate) peak_rate: Option<f64>,
    /// An offered load in requests per second; `None`: as fast as answered.
    pub(crate) pace: Option<f64>,
}

/// A side of a cell, whatever it sends.
pub(crate) trait Phase {
    /// Runs the loops for `duration`.
    fn run(&mut self, duration: Duration) -> Result<Tally, BoxErr>;
}

impl<T, F, Fut> Phase for Side<'_, T, F>
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Answer> + Send + 'static,
{
    fn run(&mut self, duration: Duration) -> Result<Tally, BoxErr> {
        let batch = match &self.feed {
            Feed::Cycle(items) => Batch::cycle(items.clone()),
            Feed::Fresh(sign) => {
                // enough for this phase at three times the fastest rate seen so far
                // (an fsync stall makes a round slow, the next one fast); a phase that
                // still uses them up stops early and says so
                let budget = self.peak_rate.map_or(WARM_REQUESTS, |rate| {
                    (rate * duration.as_secs_f64() * 3.0) as usize + 16 * self.conns
                });
                Batch::once(sign(budget.clamp(WARM_REQUESTS, MAX_SIGNED))?)
            }
        };
        let tally = self.rt.block_on(phase(
            self.conns,
            Arc::new(batch),
            duration,
            self.op.clone(),
            self.pace,
        ));
        self.peak_rate = Some(self.peak_rate.unwrap_or(0.0).max(tally.rate()));
        Ok(tally)
    }
}

/// Measures one side alone: a warm-up, then one measured phase.
pub(crate) fn single(side: &mut dyn Phase, timing: &Timing) -> Result<Tally, BoxErr> {
    let warm = side.run(timing.warm)?;
    Ok(side.run(timing.cell)?.warmed(warm).sorted())
}

/// Rounds per side of a paired cell.
pub(crate) const ROUNDS: u32 = 4;

/// Measures two sides whose ratio is a target: both warm up, then they alternate in
/// rounds (A B B A A B B A) that add up to a cell's length each, so drift on a busy
/// machine hits both alike.
pub(crate) fn paired(
    a: &mut dyn Phase,
    b: &mut dyn Phase,
    timing: &Timing,
) -> Result<(Tally, Tally), BoxErr> {
    let (warm_a, warm_b) = (a.run(timing.warm)?, b.run(timing.warm)?);
    let round = timing.cell / ROUNDS;
    let (mut total_a, mut total_b) = (Tally::default(), Tally::default());
    for side in rounds::alternating(2, ROUNDS as usize) {
        if side == 0 {
            total_a.merge(a.run(round)?);
        } else {
            total_b.merge(b.run(round)?);
        }
    }
    Ok((
        total_a.warmed(warm_a).sorted(),
        total_b.warmed(warm_b).sorted(),
    ))
}
