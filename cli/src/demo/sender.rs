//! The sender side: several concurrent senders POST the planned deliveries over real
//! HTTP, signing each attempt afresh as a provider does, and behave like one when
//! the answer is not a 2xx.
//!
//! - a 2xx acknowledges the event, unless the fault draw says the answer was lost:
//!   then the sender never saw it and sends the event again later, with a fresh
//!   timestamp and signature;
//! - a 5xx or no answer is retried after a short backoff;
//! - a 4xx is final (the status policy: a retry of the same bytes fails the same way);
//! - a forged copy is sent once and never retried.
//!
//! Every count in [`Tally`] is an answer that came back, never an intention.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;

use hookbox_core::Signer;
use hookbox_core::bytes::Bytes;
use hookbox_core::http::{Request, Uri};
use hookbox_core::time::OffsetDateTime;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use indicatif::ProgressBar;
use tokio::task::JoinSet;

use super::traffic::{Draw, Event, Kind, P_ACK_LOST, Planned, Traffic, retry_position};

/// How many requests are in flight at once.
const SENDERS: usize = 8;
/// How long a sender waits for an answer.
const TIMEOUT: Duration = Duration::from_secs(10);
/// After this many 5xx or unanswered attempts in a row, the sender gives up on an event.
const MAX_FAILURES: u32 = 8;

/// What the senders counted, from the answers they got.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// HTTP requests sent.
    pub(crate) requests: u64,
    /// Answers by class.
    pub(crate) ok: u64,
    pub(crate) client_errors: u64,
    pub(crate) server_errors: u64,
    pub(crate) unanswered: u64,
    /// 2xx answers saying `stored` and `duplicate`.
    pub(crate) stored: u64,
    pub(crate) duplicates: u64,
    /// Forged copies sent, and those answered 401.
    pub(crate) forged_sent: u64,
    pub(crate) forged_refused: u64,
    /// Genuine deliveries answered 4xx: never expected.
    pub(crate) genuine_refused: u64,
    /// 2xx answers the sender ignored (a lost ack), each followed by a resend.
    pub(crate) lost_acks: u64,
    /// Resends after a 5xx or no answer.
    pub(crate) retries: u64,
    /// Events the sender gave up on after [`MAX_FAILURES`].
    pub(crate) gave_up: u64,
    /// Per event: a 2xx reached the sender.
    pub(crate) acknowledged: Vec<bool>,
}

/// What came back for one request.
#[derive(Debug)]
enum Answer {
    Status {
        status: u16,
        outcome: Option<String>,
    },
    Unanswered,
}

impl Tally {
    fn count(&mut self, answer: &Answer) {
        self.requests += 1;
        match answer {
            Answer::Status { status, outcome } => match status {
                200..=299 => {
                    self.ok += 1;
                    match outcome.as_deref() {
                        Some("stored") => self.stored += 1,
                        Some("duplicate") => self.duplicates += 1,
                        _ => {}
                    }
                }
                400..=499 => self.client_errors += 1,
                _ => self.server_errors += 1,
            },
            Answer::Unanswered => self.unanswered += 1,
        }
    }
}

/// A planned delivery waiting to be sent; the heap yields the lowest position first.
#[derive(Debug)]
struct Queued {
    planned: Planned,
    /// Ties at one position go in the order they were queued.
    seq: u64,
    /// 5xx or unanswered attempts so far.
    failures: u32,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Queued {}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Queued {
    fn cmp(&self, other: &Self) -> Ordering {
        // reversed: `BinaryHeap` is a max-heap, the stream goes lowest position first
        other
            .planned
            .at
            .total_cmp(&self.planned.at)
            .then(other.seq.cmp(&self.seq))
    }
}

/// The stream still to send.
struct Queue {
    heap: BinaryHeap<Queued>,
    seq: u64,
    /// Per event, the attempt number its next resend gets.
    next_attempt: Vec<u32>,
}

impl Queue {
    fn new(traffic: &Traffic) -> Self {
        let mut queue = Self {
            heap: BinaryHeap::with_capacity(traffic.planned.len()),
            seq: 0,
            next_attempt: vec![1; traffic.events.len()],
        };
        for planned in &traffic.planned {
            if planned.kind != Kind::Forged {
                let next = &mut queue.next_attempt[planned.event];
                *next = (*next).max(planned.attempt + u32::from(planned.copies));
            }
            queue.push(planned.clone(), 0);
        }
        queue
    }

    fn push(&mut self, planned: Planned, failures: u32) {
        self.seq += 1;
        self.heap.push(Queued {
            planned,
            seq: self.seq,
            failures,
        });
    }

    /// Queues `event` again, later in the stream, as its next attempt.
    fn resend(&mut self, from: &Planned, kind: Kind, position: f64, failures: u32) {
        let attempt = self.next_attempt[from.event];
        self.next_attempt[from.event] += 1;
        let planned = Planned {
            at: position,
            event: from.event,
            kind,
            copies: 1,
            attempt,
        };
        self.push(planned, failures);
    }
}

/// Sends the stream to one URL.
pub(crate) struct Sender {
    client: Client<HttpConnector, Full<Bytes>>,
    uri: Uri,
    signer: Arc<dyn Signer>,
    forger: Arc<dyn Signer>,
    traffic: Arc<Traffic>,
    progress: ProgressBar,
}

impl Sender {
    /// Builds a sender that signs genuine deliveries with `signer`, forged copies
    /// with `forger`, and advances `progress` once per answer.
    pub(crate) fn new(
        uri: Uri,
        signer: Arc<dyn Signer>,
        forger: Arc<dyn Signer>,
        traffic: Arc<Traffic>,
        progress: ProgressBar,
    ) -> Self {
        Self {
            client: Client::builder(TokioExecutor::new()).build_http(),
            uri,
            signer,
            forger,
            traffic,
            progress,
        }
    }

    /// Sends every planned delivery and every resend they lead to, [`SENDERS`] at a
    /// time, in stream order; returns once no delivery is left or in flight.
    pub(crate) async fn send_all(self: Arc<Self>) -> Tally {
        let mut queue = Queue::new(&self.traffic);
        let mut tally = Tally {
            acknowledged: vec![false; self.traffic.events.len()],
            ..Tally::default()
        };
        let mut in_flight = JoinSet::new();
        loop {
            while in_flight.len() < SENDERS {
                let Some(queued) = queue.heap.pop() else {
                    break;
                };
                in_flight.spawn(Arc::clone(&self).deliver(queued));
            }
            let Some(joined) = in_flight.join_next().await else {
                return tally;
            };
            match joined {
                Ok((queued, answers)) => self.record(&queued, &answers, &mut tally, &mut queue),
                // a sender task panicked: a bug, not a delivery outcome
                Err(err) => std::panic::resume_unwind(err.into_panic()),
            }
        }
    }

    /// Sends one planned delivery: one request, or two at the same moment.
    async fn deliver(self: Arc<Self>, queued: Queued) -> (Queued, Vec<Answer>) {
        if queued.failures > 0 {
            tokio::time::sleep(backoff(queued.failures)).await;
        }
        let event = &self.traffic.events[queued.planned.event];
        let forged = queued.planned.kind == Kind::Forged;
        let answers = if queued.planned.copies == 2 {
            let (a, b) = tokio::join!(self.post(event, forged), self.post(event, forged));
            vec![a, b]
        } else {
            vec![self.post(event, forged).await]
        };
        (queued, answers)
    }

    /// Acts on the answers to one delivery as a provider would.
    fn record(&self, queued: &Queued, answers: &[Answer], tally: &mut Tally, queue: &mut Queue) {
        let planned = &queued.planned;
        for (copy, answer) in (0u32..).zip(answers) {
            tally.count(answer);
            if planned.kind == Kind::Forged {
                tally.forged_sent += 1;
                if matches!(answer, Answer::Status { status: 401, .. }) {
                    tally.forged_refused += 1;
                }
                continue;
            }
            let attempt = planned.attempt + copy;
            let retry_at = retry_position(
                planned.at,
                self.traffic.draw(planned.event, attempt, Draw::RetryAt),
            );
            match answer {
                Answer::Status { status, .. } if (200..300).contains(status) => {
                    if self.traffic.draw(planned.event, attempt, Draw::AckLost) < P_ACK_LOST {
                        tally.lost_acks += 1;
                        queue.resend(planned, Kind::AfterLostAck, retry_at, 0);
                        self.progress.inc_length(1);
                    } else {
                        tally.acknowledged[planned.event] = true;
                    }
                }
                Answer::Status { status, .. } if (400..500).contains(status) => {
                    tally.genuine_refused += 1;
                }
                _ if queued.failures + 1 >= MAX_FAILURES => tally.gave_up += 1,
                _ => {
                    tally.retries += 1;
                    queue.resend(planned, Kind::AfterFailure, retry_at, queued.failures + 1);
                    self.progress.inc_length(1);
                }
            }
        }
    }

    /// Signs `event` now (a fresh timestamp and signature on every attempt, as
    /// providers retry) and POSTs it.
    async fn post(&self, event: &Event, forged: bool) -> Answer {
        let (signer, body) = if forged {
            (&self.forger, event.forged_body())
        } else {
            (&self.signer, event.body.clone())
        };
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let headers = signer.sign(event.id(), now, &body);
        let mut request =
            Request::post(self.uri.clone()).header("content-type", "application/json");
        for (name, value) in headers.iter() {
            request = request.header(name, value);
        }
        let answer = match request.body(Full::new(body)) {
            Ok(request) => self.exchange(request).await,
            Err(_) => Answer::Unanswered,
        };
        self.progress.inc(1);
        answer
    }

    async fn exchange(&self, request: Request<Full<Bytes>>) -> Answer {
        let answered = tokio::time::timeout(TIMEOUT, async {
            let response = self.client.request(request).await.ok()?;
            let status = response.status().as_u16();
            let body = response.into_body().collect().await.ok()?.to_bytes();
            Some((status, body))
        })
        .await;
        match answered {
            Ok(Some((status, body))) => Answer::Status {
                status,
                outcome: outcome(&body),
            },
            _ => Answer::Unanswered,
        }
    }
}

/// Reads `outcome` from the receiver's JSON answer (`stored`, `duplicate`).
fn outcome(body: &[u8]) -> Option<String> {
    let answer: serde_json::Value = serde_json::from_slice(body).ok()?;
    answer.get("outcome")?.as_str().map(str::to_owned)
}

/// The wait before a resend after `failures` 5xx or unanswered attempts: 50 ms,
/// doubling, at most 2 s.
fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(6);
    Duration::from_millis(50 << doublings).min(Duration::from_secs(2))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_yields_the_stream_in_position_order_and_numbers_resends() {
        let traffic = Traffic::generate(300, 3);
        let mut queue = Queue::new(&traffic);
        let mut last = f64::MIN;
        let mut resent = None;
        while let Some(queued) = queue.heap.pop() {
            assert!(queued.planned.at >= last);
            last = queued.planned.at;
            if resent.is_none() && queued.planned.kind == Kind::First {
                let before = queue.next_attempt[queued.planned.event];
                queue.resend(&queued.planned, Kind::AfterLostAck, last + 5.0, 0);
                resent = Some((queued.planned.event, before));
            }
        }
        let (event, attempt) = resent.unwrap();
        assert_eq!(queue.next_attempt[event], attempt + 1);
        assert!(attempt >= 2, "the first delivery used attempt 1");
    }

    #[test]
    fn backoff_doubles_to_a_cap() {
        assert_eq!(backoff(1), Duration::from_millis(50));
        assert_eq!(backoff(2), Duration::from_millis(100));
        assert_eq!(backoff(30), Duration::from_secs(2));
    }
}
