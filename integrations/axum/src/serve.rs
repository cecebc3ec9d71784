//! Serving the router under load: bounded header and body reads, a cap on the
//! requests in flight, and graceful shutdown.
//!
//! `axum::serve` waits for a request's headers and body as long as the sender likes,
//! and takes every request it is given: a client that sends one byte every few
//! seconds holds a connection (a file descriptor, a task, a buffer) forever, and a
//! few hundred of them hold them all. [`serve`] is the same accept loop with three
//! bounds, each configured on [`EdgeLimits`].

use std::convert::Infallible;
use std::error::Error as StdError;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::response::{IntoResponse as _, Response};
use hookbox_core::bytes::Bytes;
use hookbox_core::http::Request;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Sleep;
use tower::ServiceExt as _;

use crate::EdgeError;

/// The bounds [`serve`] holds every connection and request to.
///
/// Each bound turns a sender that is slow or too many into a prompt answer or a
/// closed connection, instead of a connection, a task and a buffer held for as long
/// as the sender likes. The defaults suit a webhook receiver that providers reach
/// directly: every provider sends its headers and a body of a few kilobytes at once,
/// and gives up on an answer after 5 to 30 s (Shopify 5 s, GitHub 10 s), so a request
/// slower than the defaults is one its sender has abandoned or never meant to finish.
///
/// | bound | default | past it |
/// |---|---|---|
/// | [`header_read_timeout`](EdgeLimits::header_read_timeout) | 10 s | the connection is closed, no answer |
/// | [`body_read_timeout`](EdgeLimits::body_read_timeout) | 10 s | 408 `body_timeout`, nothing stored, the connection closed |
/// | [`max_in_flight`](EdgeLimits::max_in_flight) | 256 | 503 `overloaded` with `Retry-After: 1`, at once |
///
/// # Examples
/// ```
/// use std::time::Duration;
///
/// use hookbox_axum::EdgeLimits;
///
/// // a receiver behind a proxy that keeps idle connections to it for 60 s
/// let limits = EdgeLimits::default()
///     .header_read_timeout(Duration::from_secs(65))
///     .max_in_flight(512);
/// # let _ = limits;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeLimits {
    header_read_timeout: Duration,
    body_read_timeout: Duration,
    max_in_flight: usize,
}

impl Default for EdgeLimits {
    /// 10 s to read a request's headers, 10 s to read its body, 256 requests in
    /// flight.
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            max_in_flight: 256,
        }
    }
}

impl EdgeLimits {
    /// Sets how long a connection may take to send a request's headers (default
    /// 10 s); past it the connection is closed without an answer.
    ///
    /// The clock starts when the edge waits for a request: on a new connection, and
    /// again after each answer on a kept-alive one. So this is also how long an idle
    /// keep-alive connection stays open, and a connection that never sends anything
    /// is closed after it too. A provider sends its headers in the first packet; 10 s
    /// is as long as the most patient provider waits for the whole answer, so a
    /// sender still sending headers then has given up.
    ///
    /// Behind a reverse proxy that pools connections to the receiver (an AWS ALB keeps
    /// them 60 s, nginx `keepalive_timeout` 60 s), set this above the proxy's idle
    /// timeout: otherwise the receiver closes a pooled connection as the proxy sends
    /// on it, and the proxy answers 502. The proxy then bounds slow senders itself.
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// Sets how long a request's body may take to arrive once the route starts to
    /// read it (default 10 s). Past it the body is cut where it stands: the webhook
    /// route answers 408 [`EdgeError::BodyTimeout`] without storing anything, and
    /// the connection is closed after the answer (another route sees its body end
    /// in an error).
    ///
    /// This bounds the whole body, not the wait for each chunk, so a sender that
    /// trickles a byte at a time is cut too. At the 1 MiB body limit, 10 s asks for
    /// 100 KiB/s; the bodies providers send are a few kilobytes and arrive with the
    /// headers.
    pub fn body_read_timeout(mut self, timeout: Duration) -> Self {
        self.body_read_timeout = timeout;
        self
    }

    /// Sets how many requests the edge works on at once (default 256, at least 1).
    /// A request past the cap is answered at once with 503
    /// [`EdgeError::Overloaded`] and `Retry-After: 1`, before its body is read:
    /// providers retry a 503, while a queue without bound would hold a body, a task
    /// and a connection for each waiting request and answer after the sender gave up.
    ///
    /// A request counts from the moment its headers are read until its answer is
    /// ready, whatever the route (`/readyz` and `/livez` too, so under overload a
    /// probe can see 503). The default bounds the bodies held in memory to 256 MiB
    /// at the 1 MiB body limit and stays well under the usual limit of 1024 open
    /// files, with room for idle connections and the store's pool; it is four times
    /// the concurrency the edge is benchmarked at, and requests past the store's own
    /// pool (4 SQLite connections, 8 Postgres by default) only wait for it.
    pub fn max_in_flight(mut self, max: usize) -> Self {
        self.max_in_flight = max.clamp(1, Semaphore::MAX_PERMITS);
        self
    }
}

/// Serves `router` on `listener` until `shutdown` completes, within `limits`: the
/// same job as `axum::serve(listener, router).with_graceful_shutdown(shutdown)`, with
/// the bounds a receiver reachable from the internet needs.
///
/// - **Headers** must arrive within [`EdgeLimits::header_read_timeout`], or the
///   connection is closed; an idle keep-alive connection is closed after it too.
/// - **Bodies** must arrive within [`EdgeLimits::body_read_timeout`] once read, or
///   the webhook route answers 408 and stores nothing.
/// - **In flight**: past [`EdgeLimits::max_in_flight`] requests, a request is
///   answered 503 `overloaded` with `Retry-After: 1` at once, never queued.
/// - **Shutdown**: when `shutdown` completes the listener is closed (new
///   connections are refused), idle connections are closed, and the requests in
///   flight finish and are answered before `serve` returns. Each is bounded by the
///   timeouts above and by its route's own work.
///
/// It speaks HTTP/1.1 (what every provider sends) and never fails: a failed
/// `accept` (out of file descriptors, say) is logged and retried after a second,
/// since the descriptors come back as the timeouts close connections.
///
/// # Examples
/// ```no_run
/// use hookbox_axum::{EdgeLimits, Webhook, serve};
/// use hookbox_github::GitHub;
/// use hookbox_sqlite::{SqliteOptions, SqliteStore};
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = SqliteStore::open("hookbox.db", SqliteOptions::default()).await?;
/// store.migrate().await?;
/// let app = Webhook::inbox(GitHub::new("test-secret")?, store).into_router("/webhooks/github");
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// // `stop.send(true)` from the SIGTERM handler; the requests in flight then finish
/// let (stop, mut stopped) = tokio::sync::watch::channel(false);
/// let shutdown = async move {
///     stopped.wait_for(|&stop| stop).await.ok();
/// };
/// serve(listener, app, EdgeLimits::default(), shutdown).await;
/// # drop(stop);
/// # Ok(())
/// # }
/// ```
pub async fn serve<F>(listener: TcpListener, router: Router, limits: EdgeLimits, shutdown: F)
where
    F: Future<Output = ()> + Send,
{
    let edge = Arc::new(Edge {
        router,
        limits,
        permits: Semaphore::new(limits.max_in_flight),
        overloaded: Throttle::new(),
    });
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let connections = GracefulShutdown::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            // the peer gave up before we took the connection: nothing to do
            Err(err) if is_connection_error(&err) => continue,
            Err(err) => {
                tracing::error!(error = %err, "accepting a connection failed; retrying in 1 s");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    () = &mut shutdown => break,
                }
            }
        };
        // answers are small: send them without waiting for the peer's ACK
        stream.set_nodelay(true).ok();
        let service = {
            let edge = Arc::clone(&edge);
            service_fn(move |request| {
                let edge = Arc::clone(&edge);
                async move { Ok::<_, Infallible>(edge.answer(request).await) }
            })
        };
        let connection = connections.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                // a header timeout, a reset, a malformed request: the peer's doing,
                // and under attack there are many, so not above debug
                tracing::debug!(error = %err, timeout = err.is_timeout(), "connection closed");
            }
        });
    }
    // stop taking connections, then let the ones open finish what they started
    drop(listener);
    connections.shutdown().await;
}

/// The errors of `accept` that concern one connection (the peer reset it before it
/// was taken), not the listener.
fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// What every connection of one [`serve`] shares.
struct Edge {
    router: Router,
    limits: EdgeLimits,
    /// One permit per request in flight.
    permits: Semaphore,
    overloaded: Throttle,
}

impl Edge {
    /// Answers one request: 503 at once past the cap, else the router's answer, with
    /// the body under its deadline.
    async fn answer(&self, request: Request<Incoming>) -> Response {
        let Ok(permit) = self.permits.try_acquire() else {
            return self.refuse();
        };
        let _in_flight = InFlight::start(permit);
        let timeout = self.limits.body_read_timeout;
        let request = request.map(|body| DeadlineBody::new(body, timeout));
        match self.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    /// The answer past the cap; logs at most once a second, with the count.
    fn refuse(&self) -> Response {
        let limit = self.limits.max_in_flight;
        #[cfg(feature = "metrics")]
        metrics::counter!("hookbox_edge_overloaded_total").increment(1);
        self.overloaded.note(|refused| {
            tracing::warn!(
                refused,
                limit,
                "requests in flight at the cap; answering 503 with Retry-After"
            );
        });
        EdgeError::Overloaded { limit }.into_response()
    }
}

/// A request's permit, and with the `metrics` feature the in-flight gauge.
struct InFlight<'a> {
    _permit: SemaphorePermit<'a>,
}

impl<'a> InFlight<'a> {
    fn start(permit: SemaphorePermit<'a>) -> Self {
        #[cfg(feature = "metrics")]
        metrics::gauge!("hookbox_edge_in_flight").increment(1.0);
        Self { _permit: permit }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        metrics::gauge!("hookbox_edge_in_flight").decrement(1.0);
    }
}

/// Counts events and reports them at most once a second: under a flood of refused
/// requests, a log line for each would be one more load.
struct Throttle {
    started: Instant,
    /// Milliseconds since `started` before which nothing is reported.
    next_report: AtomicU64,
    /// Events since the last report.
    unreported: AtomicU64,
}

impl Throttle {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            next_report: AtomicU64::new(0),
            unreported: AtomicU64::new(0),
        }
    }

    /// Counts one event; calls `report` with the count since the last report when a
    /// second has passed since then.
    fn note(&self, report: impl FnOnce(u64)) {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.note_at(now, report);
    }

    /// [`Throttle::note`] at `now` milliseconds since the throttle was made.
    fn note_at(&self, now: u64, report: impl FnOnce(u64)) {
        self.unreported.fetch_add(1, Ordering::Relaxed);
        let next = self.next_report.load(Ordering::Relaxed);
        if now >= next
            && self
                .next_report
                .compare_exchange(
                    next,
                    now.saturating_add(1000),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            report(self.unreported.swap(0, Ordering::Relaxed));
        }
    }
}

/// The error a body under [`DeadlineBody`] ends with when its deadline passes; the
/// webhook route finds it in the extractor's rejection and answers 408.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub(crate) struct BodyTimedOut(pub(crate) Duration);

/// A request body that fails with [`BodyTimedOut`] once `timeout` has passed since
/// it was first read and it has not ended.
struct DeadlineBody {
    inner: Incoming,
    timeout: Duration,
    /// Set on the first read: the wait for the route (a middleware, the in-flight
    /// permit) is not the sender's.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl DeadlineBody {
    fn new(inner: Incoming, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            deadline: None,
        }
    }
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = Box<dyn StdError + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let timeout = this.timeout;
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut(timeout))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_in_flight_cap_is_at_least_one() {
        assert_eq!(EdgeLimits::default().max_in_flight(0).max_in_flight, 1);
        assert_eq!(EdgeLimits::default().max_in_flight, 256);
    }

    #[test]
    fn the_throttle_reports_the_first_event_then_at_most_once_a_second() {
        let throttle = Throttle::new();
        let mut reports = Vec::new();
        for now in [0, 10, 20, 999, 1000, 1500, 2100] {
            throttle.note_at(now, |n| reports.push((now, n)));
        }
        // the first at once; then one a second, with what was held back
        assert_eq!(reports, [(0, 1), (1000, 4), (2100, 2)]);
    }
}
