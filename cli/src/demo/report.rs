//! The report: the seed's table, filled from the answers the senders got and the
//! tables the worker wrote, and the verdict.

use std::fmt::{self, Write as _};
use std::time::Duration;

use hookbox_core::{InboxStats, WorkerReport};

use super::ledger::{STALE_REFUSED, Tables};
use super::receipts::ReceiptTally;
use super::sender::Tally;
use super::traffic::{P_ACK_LOST, Traffic};

/// Everything one run measured.
#[derive(Debug)]
pub(crate) struct Report {
    /// What ran: the provider and the store, for the heading.
    pub(crate) provider: &'static str,
    pub(crate) store: String,
    pub(crate) traffic: std::sync::Arc<Traffic>,
    pub(crate) tally: Tally,
    /// What the workers did, summed.
    pub(crate) worker: WorkerReport,
    pub(crate) tables: Tables,
    pub(crate) stats: InboxStats,
    /// `false` when the inbox still had pending rows at the deadline.
    pub(crate) drained: bool,
    /// From the first delivery sent to the inbox drained.
    pub(crate) elapsed: Duration,
    /// The receipt emails: the outbox, the relays and the sink.
    pub(crate) receipts: ReceiptTally,
}

/// The counts the verdict is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    events: u64,
    applied_once: u64,
    applied_more: u64,
    never_applied: u64,
    stale_refused: i64,
    accounts_with_plans: u64,
    on_latest_plan: u64,
    ledger: i64,
    expected: i64,
}

impl Report {
    fn counts(&self) -> Counts {
        let traffic = &self.traffic;
        let tables = &self.tables;
        let mut counts = Counts {
            events: traffic.events.len() as u64,
            applied_once: 0,
            applied_more: 0,
            never_applied: 0,
            stale_refused: tables.outcomes.get(STALE_REFUSED).copied().unwrap_or(0),
            accounts_with_plans: traffic.latest_plan.len() as u64,
            on_latest_plan: 0,
            ledger: tables.credits.values().sum(),
            expected: traffic.expected_ledger(),
        };
        for event in &traffic.events {
            match tables.applied.get(event.id()).copied().unwrap_or(0) {
                0 => counts.never_applied += 1,
                1 => counts.applied_once += 1,
                _ => counts.applied_more += 1,
            }
        }
        counts.on_latest_plan = traffic
            .latest_plan
            .iter()
            .filter(|(account, latest)| tables.plan_versions.get(*account) == Some(latest))
            .count() as u64;
        counts
    }

    /// Returns what broke, one phrase each; empty when the run is correct.
    pub(crate) fn failures(&self) -> Vec<String> {
        let c = self.counts();
        let t = &self.tally;
        let mut broken = Vec::new();
        if !self.drained {
            broken.push(format!(
                "the inbox did not drain: {} rows still pending",
                self.stats.pending
            ));
        }
        if c.ledger != c.expected {
            broken.push(format!("ledger {} != expected {}", c.ledger, c.expected));
        }
        if c.applied_more > 0 {
            broken.push(format!("{} events applied more than once", c.applied_more));
        }
        if c.never_applied > 0 {
            broken.push(format!("{} events never applied (lost)", c.never_applied));
        }
        if t.forged_refused != t.forged_sent {
            broken.push(format!(
                "{} of {} forgeries not refused with 401",
                t.forged_sent - t.forged_refused,
                t.forged_sent
            ));
        }
        if self.tables.forged > 0 {
            broken.push(format!(
                "{} forged bodies stored and applied",
                self.tables.forged
            ));
        }
        if c.on_latest_plan != c.accounts_with_plans {
            broken.push(format!(
                "{} accounts not on their latest plan",
                c.accounts_with_plans - c.on_latest_plan
            ));
        }
        let unacknowledged = t.acknowledged.iter().filter(|acked| !**acked).count();
        if unacknowledged > 0 {
            broken.push(format!(
                "{unacknowledged} events never acknowledged with a 2xx"
            ));
        }
        if t.genuine_refused > 0 {
            broken.push(format!(
                "{} genuine deliveries refused with 4xx",
                t.genuine_refused
            ));
        }
        if t.gave_up > 0 {
            broken.push(format!("the sender gave up on {} events", t.gave_up));
        }
        if self.stats.dead > 0 {
            broken.push(format!("{} dead letters", self.stats.dead));
        }
        let r = &self.receipts;
        if !r.drained {
            broken.push(format!(
                "the outbox did not drain: {} receipts still pending",
                r.outbox.pending
            ));
        }
        if r.outbox.sent != c.events {
            broken.push(format!(
                "{} receipts sent for {} events",
                r.outbox.sent, c.events
            ));
        }
        if r.keys_applied != r.outbox.sent {
            broken.push(format!(
                "the sink applied {} Idempotency-Keys for {} receipts sent",
                r.keys_applied, r.outbox.sent
            ));
        }
        if r.outbox.dead > 0 {
            broken.push(format!("{} receipts dead-lettered", r.outbox.dead));
        }
        broken
    }

    /// Returns `true` when every check passed.
    pub(crate) fn passed(&self) -> bool {
        self.failures().is_empty()
    }
}

/// The table's lines: a label, a count, and the value it must have where the run has
/// a right answer.
struct Lines(String);

impl Lines {
    fn count(&mut self, label: &str, count: impl Into<i128>) {
        self.line(label, count.into(), String::new());
    }

    fn check(&mut self, label: &str, count: impl Into<i128>, must_be: impl Into<i128>) {
        self.line(label, count.into(), must_be.into().to_string());
    }

    fn line(&mut self, label: &str, count: i128, must_be: String) {
        let line = format!("{label:<40}{count:>10}{must_be:>12}");
        let _ = writeln!(self.0, "{}", line.trim_end());
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.counts();
        let t = &self.tally;
        let traffic = &self.traffic;
        let faults = traffic.faults;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "hookbox demo: {} events over {} accounts, seed {}, provider {}, store {}",
            c.events, traffic.accounts, traffic.seed, self.provider, self.store
        );
        let _ = writeln!(
            out,
            "faults planned: {} resent later, {} sent as two concurrent copies, {} shuffled \
             (up to 20 positions), {} forged copies; each 2xx lost with chance {P_ACK_LOST}",
            faults.resends, faults.concurrent_pairs, faults.shuffled, faults.forged
        );
        let _ = writeln!(out);
        let _ = writeln!(out, "{:<40}{:>10}{:>12}", "", "count", "must be");
        let mut table = Lines(out);
        let (events, plans) = (c.events, c.accounts_with_plans);
        let acknowledged = t.acknowledged.iter().filter(|acked| **acked).count() as u64;
        table.count("deliveries sent", t.requests);
        table.count("  2xx", t.ok);
        table.count("  4xx", t.client_errors);
        table.count("  5xx", t.server_errors);
        table.count("  no answer", t.unanswered);
        table.check("events acknowledged (a 2xx seen)", acknowledged, events);
        table.count("acks lost (2xx ignored, sent again)", t.lost_acks);
        table.count("resent after a 5xx or no answer", t.retries);
        table.check("events applied once", c.applied_once, events);
        table.check("events applied more than once", c.applied_more, 0);
        table.check("events never applied", c.never_applied, 0);
        table.count("duplicates absorbed (2xx duplicate)", t.duplicates);
        table.count(
            "handler failures (rolled back, retried)",
            self.worker.failed,
        );
        table.check("forgeries rejected (401)", t.forged_refused, t.forged_sent);
        table.check("forgeries stored", self.tables.forged, 0);
        table.count("stale updates refused", c.stale_refused);
        table.check("accounts on their latest plan", c.on_latest_plan, plans);
        table.check("dead letters", self.stats.dead, 0);
        table.check("inbox rows still pending", self.stats.pending, 0);
        table.check("ledger", c.ledger, c.expected);
        let r = &self.receipts;
        table.check("receipts sent through the outbox", r.outbox.sent, events);
        table.check(
            "  Idempotency-Keys applied at the sink",
            r.keys_applied,
            events,
        );
        table.count("  sink requests", r.requests);
        table.count("  resent after a relay crash (absorbed)", r.absorbed);
        table.count("  relay crashes injected", r.crashes);
        table.check(
            "  receipts still pending or dead",
            r.outbox.pending + r.outbox.dead,
            0,
        );
        let mut out = table.0;
        let seconds = self.elapsed.as_secs_f64();
        let rate = if seconds > 0.0 {
            t.requests as f64 / seconds
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "{:<40}{:>10}  ({rate:.0} deliveries/s, received, verified, stored and applied)",
            "elapsed",
            format!("{seconds:.2} s")
        );
        let _ = writeln!(out);
        let failures = self.failures();
        if failures.is_empty() {
            let _ = writeln!(
                out,
                "ok: every event applied exactly once, the ledger equals the expected total, \
                 every forgery refused, every account on its latest plan, one receipt per \
                 event applied at the sink"
            );
        } else {
            let _ = writeln!(out, "FAILED: {}", failures.join("; "));
        }
        f.write_str(&out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use hookbox_core::OutboxStats;

    use crate::demo::ledger::{CREDITED, PLAN_SET};
    use crate::demo::traffic::Change;

    /// The tables a correct run leaves: every event applied once.
    fn correct_tables(traffic: &Traffic) -> Tables {
        let mut tables = Tables::default();
        for event in &traffic.events {
            tables.applied.insert(event.id().to_string(), 1);
            let account = event.payload.account.clone();
            let outcome = match &event.payload.change {
                Change::Credit { amount } => {
                    *tables.credits.entry(account).or_default() += amount;
                    CREDITED
                }
                Change::Plan { version, .. } => {
                    tables.plan_versions.insert(account, *version);
                    PLAN_SET
                }
            };
            *tables.outcomes.entry(outcome.to_string()).or_default() += 1;
        }
        tables
    }

    fn report(traffic: Arc<Traffic>, tables: Tables) -> Report {
        let events = traffic.events.len();
        Report {
            provider: "standard",
            store: "test".to_string(),
            traffic,
            tally: Tally {
                acknowledged: vec![true; events],
                forged_sent: 3,
                forged_refused: 3,
                ..Tally::default()
            },
            worker: WorkerReport::default(),
            tables,
            stats: InboxStats::default(),
            drained: true,
            elapsed: Duration::from_secs(1),
            receipts: ReceiptTally {
                outbox: OutboxStats {
                    sent: events as u64,
                    ..OutboxStats::default()
                },
                requests: events as u64 + 2,
                keys_applied: events as u64,
                absorbed: 2,
                crashes: 4,
                drained: true,
            },
        }
    }

    #[test]
    fn a_correct_run_passes_and_says_so() {
        let traffic = Arc::new(Traffic::generate(200, 5));
        let report = report(Arc::clone(&traffic), correct_tables(&traffic));
        assert_eq!(report.failures(), Vec::<String>::new());
        let text = report.to_string();
        assert!(text.contains("\nok: "), "{text}");
        let expected = traffic.expected_ledger();
        assert!(
            text.contains(&format!("{expected:>10}{expected:>12}")),
            "{text}"
        );
    }

    #[test]
    fn a_double_apply_a_lost_event_a_stale_plan_and_a_stored_forgery_each_fail_the_run() {
        let traffic = Arc::new(Traffic::generate(200, 5));
        let mut tables = correct_tables(&traffic);
        let credit = traffic
            .events
            .iter()
            .find(|e| e.credit() > 0)
            .map(|e| (e.id().to_string(), e.payload.account.clone()))
            .unwrap();
        // applied twice
        tables.applied.insert(credit.0.clone(), 2);
        *tables.credits.entry(credit.1).or_default() += 100;
        // never applied
        let lost = traffic.events[1].id().to_string();
        tables.applied.remove(&lost);
        // an account left on an older plan
        let (account, _) = traffic.latest_plan.iter().next().unwrap();
        tables.plan_versions.insert(account.clone(), 0);
        tables.forged = 1;
        let mut report = report(traffic, tables);
        report.tally.forged_refused = 2;
        report.tally.acknowledged[7] = false;
        report.receipts.keys_applied -= 1;

        let failures = report.failures().join("; ");
        for needle in [
            "ledger",
            "1 events applied more than once",
            "1 events never applied",
            "1 of 3 forgeries not refused",
            "1 forged bodies stored",
            "1 accounts not on their latest plan",
            "1 events never acknowledged",
            "the sink applied 199 Idempotency-Keys for 200 receipts sent",
        ] {
            assert!(
                failures.contains(needle),
                "`{needle}` missing from: {failures}"
            );
        }
        assert!(report.to_string().contains("\nFAILED: "));
    }
}
