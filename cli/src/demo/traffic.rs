//! The traffic model: a seeded stream of events and the deliveries that carry them,
//! after the seed's simulation (`makeEvents` and `makeGroups` in the write-up's
//! script), with forged copies added.
//!
//! Everything here is what the sender *intends*; the report counts only real
//! answers and real database state, and uses this model for the expected values
//! (the ledger total, each account's latest plan).

use std::collections::BTreeMap;

use hookbox_core::bytes::Bytes;
use serde::{Deserialize, Serialize};

/// The seed's seed: the default traffic is the one the write-up measured with.
pub(crate) const DEFAULT_SEED: u64 = 20_261_023;

// The fault chances are the seed's (chosen, not measured), plus forgeries.
/// Chance an event is "credit 100" (else "set plan vN").
const P_CREDIT: f64 = 0.6;
/// Chance a plan update is followed at once by another for the same account.
const P_SECOND_UPDATE: f64 = 0.05;
/// Chance an event is resent later in the stream (a manual resend, a retry).
const P_DUPLICATE: f64 = 0.03;
/// Chance, per 2xx answer, that the answer is lost and the sender retries later.
pub(crate) const P_ACK_LOST: f64 = 0.02;
/// Chance an event's first delivery arrives as two copies at once.
const P_CONCURRENT: f64 = 0.01;
/// Chance an event's first delivery is moved up to [`SHUFFLE_WINDOW`] positions.
const P_SHUFFLE: f64 = 0.10;
/// How far a shuffled delivery moves, in positions.
const SHUFFLE_WINDOW: f64 = 20.0;
/// Chance a copy of an event is forged: a tampered body signed with the wrong secret.
const P_FORGED: f64 = 0.02;
/// How many positions after an event a resend or a retry lands, at most.
const RESEND_SPREAD: f64 = 200.0;

/// The credit a genuine event grants.
const CREDIT: i64 = 100;
/// The credit a forged copy claims: one that got through would show in the ledger.
const FORGED_CREDIT: i64 = 1_000_000;

/// The body of a delivery, as the sender signs it and the worker's handler parses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Payload {
    /// The event id; also the delivery id the provider's headers carry (Stripe reads
    /// it from this field).
    pub(crate) id: String,
    /// The account the event changes.
    pub(crate) account: String,
    /// What it changes.
    #[serde(flatten)]
    pub(crate) change: Change,
    /// Set on forged copies only, so a forgery that got stored shows in the tables.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) forged: bool,
}

/// What an event changes on its account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Change {
    /// Adds `amount` credits.
    Credit {
        /// The credits added.
        amount: i64,
    },
    /// Sets the plan, if `version` is newer than the account's stored version.
    Plan {
        /// The plan's name.
        plan: String,
        /// The account's version after this update, counted per account from 1.
        version: i64,
    },
}

/// One generated event and its genuine body.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) payload: Payload,
    pub(crate) body: Bytes,
}

impl Event {
    fn new(index: usize, account: usize, change: Change) -> Self {
        let payload = Payload {
            id: format!("evt_{index:06}"),
            account: account_name(account),
            change,
            forged: false,
        };
        // strings and integers only: serializing cannot fail
        let body = Bytes::from(serde_json::to_vec(&payload).unwrap_or_default());
        Self { payload, body }
    }

    /// Returns the event's id.
    pub(crate) fn id(&self) -> &str {
        &self.payload.id
    }

    /// Returns the credits the event grants when applied once (0 for a plan update).
    pub(crate) fn credit(&self) -> i64 {
        match self.payload.change {
            Change::Credit { amount } => amount,
            Change::Plan { .. } => 0,
        }
    }

    /// Returns what a forger sends in this event's name: the same id, a tampered
    /// body.
    pub(crate) fn forged_body(&self) -> Bytes {
        let forged = Payload {
            change: Change::Credit {
                amount: FORGED_CREDIT,
            },
            forged: true,
            ..self.payload.clone()
        };
        Bytes::from(serde_json::to_vec(&forged).unwrap_or_default())
    }
}

fn account_name(account: usize) -> String {
    format!("acct_{account:04}")
}

/// Why a delivery is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// The event's first delivery (possibly shuffled, possibly two copies at once).
    First,
    /// A resend later in the stream.
    Resend,
    /// A copy with a tampered body, signed with the wrong secret.
    Forged,
    /// Sent again because the sender never saw the 2xx (a lost ack).
    AfterLostAck,
    /// Sent again after a 5xx or no answer.
    AfterFailure,
}

/// One planned delivery.
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    /// Where in the stream it goes: deliveries are sent in this order.
    pub(crate) at: f64,
    /// The event it carries (an index into [`Traffic::events`]).
    pub(crate) event: usize,
    pub(crate) kind: Kind,
    /// 1, or 2 for copies sent at the same moment.
    pub(crate) copies: u8,
    /// The event's attempt number of the first copy; fault draws are keyed by it.
    pub(crate) attempt: u32,
}

/// The whole stream: events, where each account must end, the planned deliveries.
#[derive(Debug)]
pub(crate) struct Traffic {
    pub(crate) seed: u64,
    pub(crate) events: Vec<Event>,
    pub(crate) accounts: usize,
    /// The last plan version generated per account (accounts with a plan update only).
    pub(crate) latest_plan: BTreeMap<String, i64>,
    pub(crate) planned: Vec<Planned>,
    pub(crate) faults: Faults,
}

/// How many faults of each kind the plan holds.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Faults {
    pub(crate) shuffled: u64,
    pub(crate) concurrent_pairs: u64,
    pub(crate) resends: u64,
    pub(crate) forged: u64,
}

impl Traffic {
    /// Generates `events` events over a few hundred accounts and plans their
    /// deliveries, all from `seed`.
    pub(crate) fn generate(events: usize, seed: u64) -> Self {
        let accounts = (events / 10).clamp(1, 500);
        let (events, latest_plan) = make_events(events, accounts, seed);
        let (planned, faults) = plan_deliveries(&events, seed);
        Self {
            seed,
            events,
            accounts,
            latest_plan,
            planned,
            faults,
        }
    }

    /// Returns the ledger total if every genuine event is applied exactly once.
    pub(crate) fn expected_ledger(&self) -> i64 {
        self.events.iter().map(Event::credit).sum()
    }

    /// Returns how many HTTP requests the plan holds before any retry.
    pub(crate) fn planned_requests(&self) -> u64 {
        self.planned.iter().map(|p| u64::from(p.copies)).sum()
    }

    /// Returns a fault draw in `[0, 1)` for `event`'s `attempt`, the same whatever
    /// order deliveries are answered in (the seed's `keyed`).
    pub(crate) fn draw(&self, event: usize, attempt: u32, what: Draw) -> f64 {
        draw(self.seed, event, attempt, what)
    }
}

/// What a fault draw decides.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Draw {
    Shuffle = 1,
    Shift,
    Concurrent,
    Resend,
    ResendAt,
    Forged,
    ForgedAt,
    AckLost,
    RetryAt,
}

fn draw(seed: u64, event: usize, attempt: u32, what: Draw) -> f64 {
    // distinct odd multipliers keep (event, attempt, what) from colliding; the
    // generator's own output function mixes the bits
    let key = seed
        ^ (event as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ (u64::from(attempt) + 1).wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
        ^ (what as u64).wrapping_mul(0x1656_67b1_9e37_79f9);
    fastrand::Rng::with_seed(key).f64()
}

/// The seed's `makeEvents`: ~60% credits, ~40% plan updates with per-account
/// versions, some plan updates followed at once by another for the same account.
fn make_events(count: usize, accounts: usize, seed: u64) -> (Vec<Event>, BTreeMap<String, i64>) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut versions = vec![0i64; accounts];
    let mut events = Vec::with_capacity(count);
    while events.len() < count {
        let account = rng.usize(..accounts);
        if rng.f64() < P_CREDIT {
            events.push(Event::new(
                events.len(),
                account,
                Change::Credit { amount: CREDIT },
            ));
            continue;
        }
        let updates = if rng.f64() < P_SECOND_UPDATE { 2 } else { 1 };
        for _ in 0..updates {
            if events.len() == count {
                break;
            }
            versions[account] += 1;
            let version = versions[account];
            let plan = format!("plan_v{version}");
            events.push(Event::new(
                events.len(),
                account,
                Change::Plan { plan, version },
            ));
        }
    }
    let latest = versions
        .iter()
        .enumerate()
        .filter(|(_, version)| **version > 0)
        .map(|(account, version)| (account_name(account), *version))
        .collect();
    (events, latest)
}

/// The seed's `makeGroups`, plus forgeries: each event's first delivery (shuffled
/// sometimes, two copies at once sometimes), a resend later in the stream
/// sometimes, and a forged copy nearby sometimes; sorted by position.
fn plan_deliveries(events: &[Event], seed: u64) -> (Vec<Planned>, Faults) {
    let mut planned = Vec::with_capacity(events.len() * 11 / 10);
    let mut faults = Faults::default();
    for index in 0..events.len() {
        let d = |what| draw(seed, index, 0, what);
        let position = index as f64;
        let mut at = position;
        if d(Draw::Shuffle) < P_SHUFFLE {
            at += (d(Draw::Shift) * 2.0 - 1.0) * SHUFFLE_WINDOW;
            faults.shuffled += 1;
        }
        let copies = if d(Draw::Concurrent) < P_CONCURRENT {
            faults.concurrent_pairs += 1;
            2
        } else {
            1
        };
        let mut attempt = 1;
        planned.push(Planned {
            at,
            event: index,
            kind: Kind::First,
            copies,
            attempt,
        });
        attempt += u32::from(copies);
        if d(Draw::Resend) < P_DUPLICATE {
            faults.resends += 1;
            planned.push(Planned {
                at: position + 1.0 + d(Draw::ResendAt) * RESEND_SPREAD,
                event: index,
                kind: Kind::Resend,
                copies: 1,
                attempt,
            });
        }
        if d(Draw::Forged) < P_FORGED {
            faults.forged += 1;
            planned.push(Planned {
                at: position + d(Draw::ForgedAt) * SHUFFLE_WINDOW,
                event: index,
                kind: Kind::Forged,
                copies: 1,
                // a forgery is not the provider's attempt: no fault is drawn for it
                attempt: 0,
            });
        }
    }
    planned.sort_by(|a, b| {
        a.at.total_cmp(&b.at)
            .then(a.event.cmp(&b.event))
            .then(a.kind.cmp(&b.kind))
    });
    (planned, faults)
}

/// Returns where a retry of a delivery at `at` goes in the stream (the seed's
/// `g.at + 5 + keyed(…) * 200`).
pub(crate) fn retry_position(at: f64, unit: f64) -> f64 {
    at + 5.0 + unit * RESEND_SPREAD
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_plans_the_same_stream() {
        let a = Traffic::generate(500, 7);
        let b = Traffic::generate(500, 7);
        let order = |t: &Traffic| {
            t.planned
                .iter()
                .map(|p| (p.event, p.kind, p.copies))
                .collect::<Vec<_>>()
        };
        assert_eq!(order(&a), order(&b));
        assert_ne!(order(&a), order(&Traffic::generate(500, 8)));
    }

    #[test]
    fn every_event_is_planned_once_as_a_first_delivery_and_versions_count_up() {
        let traffic = Traffic::generate(2000, DEFAULT_SEED);
        assert_eq!(traffic.events.len(), 2000);
        let firsts = traffic
            .planned
            .iter()
            .filter(|p| p.kind == Kind::First)
            .count();
        assert_eq!(firsts, 2000);
        let mut seen = BTreeMap::new();
        for event in &traffic.events {
            if let Change::Plan { version, .. } = event.payload.change {
                let last = seen.insert(event.payload.account.clone(), version);
                assert_eq!(last.unwrap_or(0) + 1, version, "{}", event.id());
            }
        }
        assert_eq!(seen, traffic.latest_plan);
        let faults = traffic.faults;
        assert!(faults.shuffled > 0 && faults.resends > 0 && faults.forged > 0);
        assert!(faults.concurrent_pairs > 0);
    }

    #[test]
    fn a_forged_copy_keeps_the_id_and_changes_the_credit() {
        let traffic = Traffic::generate(10, 1);
        let event = &traffic.events[0];
        let forged: Payload = serde_json::from_slice(&event.forged_body()).unwrap();
        assert_eq!(forged.id, event.payload.id);
        assert!(forged.forged);
        assert_eq!(
            forged.change,
            Change::Credit {
                amount: FORGED_CREDIT
            }
        );
        let genuine: Payload = serde_json::from_slice(&event.body).unwrap();
        assert_eq!(genuine, event.payload);
    }
}
