//! The relay's metrics through the `metrics` facade (feature `metrics`).

use std::time::{Duration, Instant};

use hookbox_core::OutboxAdmin;
use hookbox_core::time::OffsetDateTime;

/// How often a relay reads the outbox's counts for its gauges.
const GAUGES_EVERY: Duration = Duration::from_secs(10);

/// Counts one send's recorded outcome.
pub(crate) fn send(sink: &str, outcome: &'static str) {
    metrics::counter!("hookbox_outbox_sends_total", "sink" => sink.to_string(), "outcome" => outcome)
        .increment(1);
}

/// Records how long one send took, answered or timed out.
pub(crate) fn send_took(sink: &str, took: Duration) {
    metrics::histogram!("hookbox_outbox_send_duration_seconds", "sink" => sink.to_string())
        .record(took.as_secs_f64());
}

/// When the relay last set the outbox's gauges.
#[derive(Default)]
pub(crate) struct Gauges {
    last: Option<Instant>,
}

impl Gauges {
    /// Reads the outbox's counts and sets the gauges, at most every
    /// [`GAUGES_EVERY`]; a failed read leaves them as they were.
    pub(crate) async fn refresh<S: OutboxAdmin>(&mut self, store: &S) {
        if self.last.is_some_and(|last| last.elapsed() < GAUGES_EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        if let Ok(stats) = store.stats().await {
            let age = stats.oldest_pending.map_or(0.0, |at| {
                (OffsetDateTime::now_utc() - at).as_seconds_f64().max(0.0)
            });
            metrics::gauge!("hookbox_outbox_pending").set(stats.pending as f64);
            metrics::gauge!("hookbox_outbox_dead").set(stats.dead as f64);
            metrics::gauge!("hookbox_outbox_oldest_pending_age_seconds").set(age);
        }
    }
}
