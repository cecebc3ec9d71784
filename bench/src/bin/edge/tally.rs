//! What a phase of a cell counted: every request's answer and latency.

use std::collections::BTreeMap;
use std::time::Duration;

/// What one request got.
pub(crate) enum Answer {
    /// 2xx, `"outcome":"stored"` (or `Received::Stored`).
    Stored,
    /// 2xx, `"outcome":"duplicate"` (or `Received::Duplicate`).
    Duplicate,
    /// 2xx from the bare handler.
    Ok,
    /// A non-2xx status, with the start of its body.
    Status(u16, String),
    /// No answer: a connection or body error, or a store error without HTTP.
    Failed(String),
}

/// What a phase of a cell counted.
#[derive(Default)]
pub(crate) struct Tally {
    latencies: Vec<Duration>,
    pub(crate) stored: u64,
    pub(crate) duplicate: u64,
    pub(crate) ok: u64,
    pub(crate) statuses: BTreeMap<u16, u64>,
    pub(crate) failed: u64,
    pub(crate) first_error: Option<String>,
    pub(crate) ran_out: bool,
    pub(crate) elapsed: Duration,
    pub(crate) warm_errors: u64,
}

impl Tally {
    pub(crate) fn record(&mut self, answer: Answer, latency: Duration) {
        match answer {
            Answer::Stored => self.stored += 1,
            Answer::Duplicate => self.duplicate += 1,
            Answer::Ok => self.ok += 1,
            Answer::Status(status, body) => {
                *self.statuses.entry(status).or_default() += 1;
                self.first_error
                    .get_or_insert_with(|| format!("HTTP {status}: {body}"));
                return;
            }
            Answer::Failed(message) => {
                self.failed += 1;
                self.first_error.get_or_insert(message);
                return;
            }
        }
        self.latencies.push(latency);
    }

    /// Adds another loop's (or round's) counts; `elapsed` adds up across rounds.
    pub(crate) fn merge(&mut self, other: Self) {
        self.latencies.extend(other.latencies);
        self.stored += other.stored;
        self.duplicate += other.duplicate;
        self.ok += other.ok;
        for (status, count) in other.statuses {
            *self.statuses.entry(status).or_default() += count;
        }
        self.failed += other.failed;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.ran_out |= other.ran_out;
        self.elapsed += other.elapsed;
        self.warm_errors += other.warm_errors;
    }

    /// Folds a warm-up in: only its errors count.
    pub(crate) fn warmed(mut self, warm: Self) -> Self {
        self.warm_errors += warm.errors();
        if self.first_error.is_none() {
            self.first_error = warm.first_error;
        }
        self
    }

    /// Acknowledged requests (2xx, or stored without HTTP).
    pub(crate) fn acked(&self) -> u64 {
        self.stored + self.duplicate + self.ok
    }

    pub(crate) fn errors(&self) -> u64 {
        self.statuses.values().sum::<u64>() + self.failed
    }

    pub(crate) fn rate(&self) -> f64 {
        self.acked() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub(crate) fn percentile(&self, p: f64) -> Option<Duration> {
        // `latencies` is sorted by `sorted`
        let n = self.latencies.len();
        (n > 0).then(|| {
            let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
            self.latencies[rank - 1]
        })
    }

    pub(crate) fn sorted(mut self) -> Self {
        self.latencies.sort_unstable();
        self
    }
}
