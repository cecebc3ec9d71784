//! The edge's metrics through the `metrics` facade (feature `metrics`): one counter
//! per delivery by outcome, one per error kind, and the acknowledgement latency.

use std::time::Instant;

use crate::{EdgeError, Outcome};

/// Records one answered delivery.
pub(crate) fn delivery(provider: &str, started: Instant, result: &Result<Outcome, EdgeError>) {
    let outcome = outcome(result);
    metrics::counter!(
        "hookbox_deliveries_total",
        "provider" => provider.to_string(),
        "outcome" => outcome
    )
    .increment(1);
    if let Err(err) = result {
        metrics::counter!(
            "hookbox_delivery_errors_total",
            "provider" => provider.to_string(),
            "kind" => err.kind()
        )
        .increment(1);
    }
    metrics::histogram!(
        "hookbox_ack_duration_seconds",
        "provider" => provider.to_string(),
        "outcome" => outcome
    )
    .record(started.elapsed().as_secs_f64());
}

/// The `outcome` label: what the sender was told, in a word or two.
fn outcome(result: &Result<Outcome, EdgeError>) -> &'static str {
    match result {
        Ok(outcome) => outcome.as_str(),
        Err(err) if err.is_transient() => "unavailable",
        Err(err) if err.status().is_client_error() => "rejected",
        Err(_) => "failed",
    }
}
