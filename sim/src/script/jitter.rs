//! The sender side: retries with and without jitter after an outage, and the load
//! they put on the receiver when it comes back.

use std::collections::HashMap;

use crate::seed::{Mulberry32, SEED};

/// One retry mode's row.
pub(super) struct JitterRow {
    pub(super) mode: &'static str,
    pub(super) attempts: u64,
    pub(super) peak_after: u64,
    pub(super) last_ok: i64,
}

/// 1,000 failed deliveries retried with exponential backoff, without and with full
/// jitter, until the receiver is back at t=300 s.
pub(super) fn jitter() -> Vec<JitterRow> {
    const N: usize = 1000;
    const RECOVER: f64 = 300.0;
    const BASE: f64 = 1.0;
    const CAP: f64 = 3600.0;
    let mut out = Vec::new();
    for mode in ["exponential, no jitter", "exponential, full jitter"] {
        let full = mode.contains("full");
        let mut rnd = Mulberry32(SEED.wrapping_add(u32::from(full)));
        let mut buckets: HashMap<i64, u64> = HashMap::new();
        let mut attempts = 0u64;
        let mut last_ok: f64 = 0.0;
        for _ in 0..N {
            let mut t: f64 = 0.0;
            let mut k: i32 = 0;
            loop {
                attempts += 1;
                let sec = t.floor() as i64;
                *buckets.entry(sec).or_insert(0) += 1;
                if t >= RECOVER {
                    last_ok = last_ok.max(t);
                    break;
                }
                let d = CAP.min(BASE * 2f64.powi(k));
                k += 1;
                t += if full { rnd.next() * d } else { d };
            }
        }
        let peak_after = buckets
            .iter()
            .filter(|(sec, _)| **sec >= RECOVER as i64)
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(0);
        // Math.round on a positive number: half rounds up
        out.push(JitterRow {
            mode,
            attempts,
            peak_after,
            last_ok: (last_ok + 0.5).floor() as i64,
        });
    }
    out
}
