//! The seed's model, which both modes replay: its constants, its deterministic draws
//! (mulberry32 and the keyed string hash), the logical events and the delivery
//! stream, in the script's order.

use std::collections::VecDeque;
use std::fmt::Display;

pub(crate) const SEED: u32 = 20261023;
pub(crate) const N_EVENTS: usize = 10000;
pub(crate) const N_ACCOUNTS: usize = 500;
const P_CREDIT: f64 = 0.6;
const P_TIE: f64 = 0.05;
pub(crate) const P_DUPLICATE: f64 = 0.03;
pub(crate) const P_ACK_LOST: f64 = 0.02;
pub(crate) const P_CONCURRENT: f64 = 0.01;
pub(crate) const P_SHUFFLE: f64 = 0.10;
pub(crate) const SHUFFLE_WINDOW: f64 = 20.0;

// ---------- deterministic randomness ----------

/// mulberry32, in u32 wrapping arithmetic (`Math.imul` is the low 32 bits of the
/// product; `>>>` is a logical shift).
pub(crate) struct Mulberry32(pub(crate) u32);

impl Mulberry32 {
    pub(crate) fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x6d2b79f5);
        let a = self.0;
        let mut t = (a ^ (a >> 15)).wrapping_mul(1 | a);
        t = t.wrapping_add((t ^ (t >> 7)).wrapping_mul(61 | t)) ^ t;
        f64::from(t ^ (t >> 14)) / 4294967296.0
    }
}

/// `keyed(...parts)`: the string hash over `parts.join("|")`, then one mulberry32
/// draw. Every part is a string or an integer, whose JavaScript number-to-string is
/// its decimal form, which is Rust's `Display` for integers.
pub(crate) fn keyed(parts: &[&dyn Display]) -> f64 {
    let joined = parts
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join("|");
    let mut h = SEED;
    // all parts are ASCII, so chars are UTF-16 code units
    for ch in joined.encode_utf16() {
        h = (h ^ u32::from(ch)).wrapping_mul(2654435761);
    }
    Mulberry32(h).next()
}

// ---------- logical events ----------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Credit,
    Plan,
}

#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) id: String,
    pub(crate) idx: usize,
    pub(crate) kind: Kind,
    pub(crate) acct: i32,
    pub(crate) amount: i64,
    pub(crate) version: i64,
    pub(crate) created: i64,
    pub(crate) tie: bool,
}

pub(crate) fn make_events() -> (Vec<Event>, Vec<i64>) {
    let mut rnd = Mulberry32(SEED);
    let mut events: Vec<Event> = Vec::with_capacity(N_EVENTS);
    let mut plan_version = vec![0i64; N_ACCOUNTS];
    let mut t: i64 = 1790000000;
    let push = |events: &mut Vec<Event>, mut e: Event| {
        e.id = format!("evt_{:06}", events.len());
        e.idx = events.len();
        events.push(e);
    };
    let blank = |kind, acct, version, created, tie| Event {
        id: String::new(),
        idx: 0,
        kind,
        acct,
        amount: if kind == Kind::Credit { 100 } else { 0 },
        version,
        created,
        tie,
    };
    while events.len() < N_EVENTS {
        if rnd.next() < 0.5 {
            t += 1;
        }
        let acct = (rnd.next() * N_ACCOUNTS as f64).floor() as usize;
        if rnd.next() < P_CREDIT {
            push(&mut events, blank(Kind::Credit, acct as i32, 0, t, false));
        } else {
            plan_version[acct] += 1;
            push(
                &mut events,
                blank(Kind::Plan, acct as i32, plan_version[acct], t, false),
            );
            if rnd.next() < P_TIE && events.len() < N_EVENTS {
                plan_version[acct] += 1;
                push(
                    &mut events,
                    blank(Kind::Plan, acct as i32, plan_version[acct], t, true),
                );
            }
        }
    }
    (events, plan_version)
}

// ---------- delivery stream ----------

#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(crate) at: f64,
    pub(crate) event: usize,
    pub(crate) copies: u32,
    pub(crate) kind: &'static str,
}

pub(crate) fn make_groups(events: &[Event]) -> Vec<Group> {
    let mut groups = Vec::new();
    for e in events {
        let mut at = e.idx as f64;
        if keyed(&[&e.id, &"shuffle"]) < P_SHUFFLE {
            at += (keyed(&[&e.id, &"shift"]) * 2.0 - 1.0) * SHUFFLE_WINDOW;
        }
        let copies = if keyed(&[&e.id, &"concurrent"]) < P_CONCURRENT {
            2
        } else {
            1
        };
        groups.push(Group {
            at,
            event: e.idx,
            copies,
            kind: if copies == 2 {
                "first+concurrent"
            } else {
                "first"
            },
        });
        if keyed(&[&e.id, &"dup"]) < P_DUPLICATE {
            groups.push(Group {
                at: e.idx as f64 + 1.0 + keyed(&[&e.id, &"dupAt"]) * 200.0,
                event: e.idx,
                copies: 1,
                kind: "duplicate",
            });
        }
    }
    // `a.at - b.at || a.event.idx - b.event.idx`, and Array.prototype.sort is stable
    groups.sort_by(|a, b| {
        a.at.partial_cmp(&b.at)
            .expect("no NaN")
            .then(a.event.cmp(&b.event))
    });
    groups
}

/// The kind of a retry after a 2xx whose response was lost (the sender timed out).
pub(crate) const RETRY_AFTER_TIMEOUT: &str = "retry-after-timeout";

/// The sender's reaction to attempt `n` of event `e`, delivered in group `g`, that
/// was answered `status`: a 5xx, or a 2xx whose response is lost
/// (`keyed(id, n, "ackLost")`), is retried at `g.at + 5 + keyed(id, n, "retryAt") * 200`.
pub(crate) fn retry(g: &Group, e: &Event, n: u32, status: u16) -> Option<Group> {
    let kind = if status >= 500 {
        "retry-after-500"
    } else if keyed(&[&e.id, &n, &"ackLost"]) < P_ACK_LOST {
        RETRY_AFTER_TIMEOUT
    } else {
        return None;
    };
    Some(Group {
        at: g.at + 5.0 + keyed(&[&e.id, &n, &"retryAt"]) * 200.0,
        event: e.idx,
        copies: 1,
        kind,
    })
}

/// Queues `item` before the first delivery that is due later, as the script's
/// `enqueue` does.
pub(crate) fn enqueue(queue: &mut VecDeque<Group>, item: Group) {
    let i = queue
        .iter()
        .position(|q| q.at > item.at)
        .unwrap_or(queue.len());
    queue.insert(i, item);
}

/// The events and delivery stream one run replays: the seed's, or a prefix of them
/// (the Postgres mode's `--events`).
pub(crate) struct Stream {
    pub(crate) events: Vec<Event>,
    pub(crate) groups: Vec<Group>,
    /// Each account's latest plan version among `events`.
    pub(crate) latest_plan: Vec<i64>,
}

impl Stream {
    /// The first `limit` events and their deliveries (all of them for [`N_EVENTS`]).
    pub(crate) fn new(limit: usize) -> Self {
        let (mut events, _) = make_events();
        events.truncate(limit);
        // each event's groups are drawn from its own keys, so the prefix's stream is
        // the full stream without the later events' groups
        let groups = make_groups(&events);
        let mut latest_plan = vec![0i64; N_ACCOUNTS];
        for e in events.iter().filter(|e| e.kind == Kind::Plan) {
            let latest = &mut latest_plan[e.acct as usize];
            *latest = (*latest).max(e.version);
        }
        Self {
            events,
            groups,
            latest_plan,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_replays_the_full_stream_without_the_later_events() {
        let prefix = Stream::new(300);
        let (events, _) = make_events();
        let full: Vec<_> = make_groups(&events)
            .into_iter()
            .filter(|g| g.event < 300)
            .map(|g| (g.at, g.event, g.copies, g.kind))
            .collect();
        let ours: Vec<_> = prefix
            .groups
            .iter()
            .map(|g| (g.at, g.event, g.copies, g.kind))
            .collect();
        assert_eq!(ours, full);
        assert_eq!(Stream::new(N_EVENTS).latest_plan, make_events().1);
    }
}
