//! The axum router: one POST route per provider.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::{BytesRejection, FailedToBufferBody};
use axum::response::{IntoResponse as _, Response};
use axum::routing::post;
use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::{BoxFuture, Clock, Handler, IdempotencyStore, Inbox, Provider, SystemClock};
use tracing::Instrument as _;

use crate::receive::{delivery_span, report};
use crate::serve::BodyTimedOut;
use crate::{EdgeError, Outcome, process_inline, receive};

/// The receive path, with the store and the mode erased so [`Webhook`] is one type.
type Run = dyn for<'a> Fn(
        &'a dyn Provider,
        &'a dyn Clock,
        &'a HeaderMap,
        Bytes,
    ) -> BoxFuture<'a, Result<Outcome, EdgeError>>
    + Send
    + Sync;

/// Pins a closure to the higher-ranked signature of [`Run`].
fn run<F>(f: F) -> Arc<Run>
where
    F: for<'a> Fn(
            &'a dyn Provider,
            &'a dyn Clock,
            &'a HeaderMap,
            Bytes,
        ) -> BoxFuture<'a, Result<Outcome, EdgeError>>
        + Send
        + Sync
        + 'static,
{
    Arc::new(f)
}

/// A webhook endpoint: a provider, a store, and what to do with a verified delivery.
///
/// Build it with [`Webhook::inbox`] (store now, a worker applies later: the
/// recommended mode) or [`Webhook::inline`] (apply inside the request), then mount it
/// with [`Webhook::into_router`]. Each request:
///
/// 1. reads the raw body with the provider's limit
///    ([`VerifyOptions::body_limit`](hookbox_core::VerifyOptions::body_limit), 1 MiB
///    by default); a larger body answers 413 and nothing is stored; served by
///    [`serve`](crate::serve), a body slower than its deadline answers 408
///    ([`EdgeError::BodyTimeout`]) and nothing is stored;
/// 2. verifies it with the provider at the clock's `now`;
/// 3. stores it in the inbox, or applies the side effect exactly once;
/// 4. answers by the [status policy](crate#status-policy) with a small JSON body.
///
/// # Examples
/// A GitHub endpoint backed by the SQLite inbox, answering a signed delivery:
/// ```
/// use axum::body::Body;
/// use axum::http::Request;
/// use hookbox_axum::Webhook;
/// use hookbox_core::{InboxAdmin as _, Signer};
/// use hookbox_github::{GitHub, GitHubSigner};
/// use hookbox_sqlite::{SqliteOptions, SqliteStore};
/// use tower::ServiceExt as _;
///
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = std::env::temp_dir().join(format!("hookbox-axum-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let path = dir.join("hookbox.db");
/// let store = SqliteStore::open(&path, SqliteOptions::default()).await?;
/// store.migrate().await?;
/// let app = Webhook::inbox(GitHub::new("test-secret")?, store.clone())
///     .into_router("/webhooks/github");
///
/// // what GitHub would send
/// let body = r#"{"zen":"Keep it logically awesome."}"#;
/// let signed = GitHubSigner::new("test-secret")?.sign("delivery-1", 0, body.as_bytes());
/// let mut request = Request::post("/webhooks/github");
/// for (name, value) in signed.iter() {
///     request = request.header(name, value);
/// }
/// let response = app.oneshot(request.body(Body::from(body))?).await?;
///
/// assert_eq!(response.status(), 200);
/// assert_eq!(store.stats().await?.pending, 1);
/// # drop(store);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Webhook {
    provider: Arc<dyn Provider>,
    clock: Arc<dyn Clock>,
    mode: &'static str,
    run: Arc<Run>,
}

impl fmt::Debug for Webhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhook")
            .field("provider", &self.provider.name())
            .field("mode", &self.mode)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl Webhook {
    /// Builds an endpoint that stores each verified delivery in `store`'s inbox and
    /// answers 200 once it is durable ([`Outcome::Stored`], or
    /// [`Outcome::Duplicate`] for a copy already stored).
    ///
    /// Run a worker ([`hookbox_core::run_worker`]) on a clone of the same store to
    /// apply the deliveries, with retries and dead letters. This is the recommended
    /// mode: the sender waits only for one insert. The worker takes the same handler
    /// [`Webhook::inline`] does, so switching modes is one line.
    pub fn inbox<S>(provider: impl Provider + 'static, store: S) -> Self
    where
        S: Inbox + 'static,
    {
        let store = Arc::new(store);
        Self::new(
            provider,
            "inbox",
            run(move |provider, clock, headers, body| {
                let store = Arc::clone(&store);
                Box::pin(async move { receive(provider, &*store, clock, headers, body).await })
            }),
        )
    }

    /// Builds an endpoint that runs `handler` inside the request, exactly once per
    /// dedupe key, and answers 200 when it committed ([`Outcome::Applied`]) or had
    /// committed before ([`Outcome::Duplicate`]).
    ///
    /// `handler` is the same [`Handler`] the inbox worker takes, `async |conn,
    /// delivery| { …; Ok(()) }`: it gets the store's connection, inside the
    /// transaction that claims the key, and the [`Delivery`](hookbox_core::Delivery);
    /// write with that connection so its writes commit with the key. An error rolls
    /// everything back and answers 500 (the sender retries). See [`process_inline`]
    /// for why the inbox is preferred for anything slow.
    ///
    /// # Examples
    /// ```
    /// use diesel::sql_types::Text;
    /// use diesel_async::RunQueryDsl as _;
    /// use hookbox_axum::Webhook;
    /// use hookbox_github::GitHub;
    /// use hookbox_sqlite::{SqliteStore, diesel, diesel_async};
    ///
    /// fn endpoint(store: SqliteStore) -> Result<axum::Router, Box<dyn std::error::Error>> {
    ///     let webhook = Webhook::inline(GitHub::new("test-secret")?, store, async |conn, delivery| {
    ///         diesel::sql_query("INSERT INTO pushes (delivery_id) VALUES (?)")
    ///             .bind::<Text, _>(delivery.delivery_id())
    ///             .execute(conn)
    ///             .await?;
    ///         Ok(())
    ///     });
    ///     Ok(webhook.into_router("/webhooks/github"))
    /// }
    /// ```
    pub fn inline<S, H>(provider: impl Provider + 'static, store: S, handler: H) -> Self
    where
        S: IdempotencyStore + 'static,
        H: Handler<S::Conn> + 'static,
    {
        let store = Arc::new(store);
        let handler = Arc::new(handler);
        Self::new(
            provider,
            "inline",
            run(move |provider, clock, headers, body| {
                let (store, handler) = (Arc::clone(&store), Arc::clone(&handler));
                Box::pin(async move {
                    process_inline(provider, &*store, clock, headers, body, &*handler).await
                })
            }),
        )
    }

    fn new(provider: impl Provider + 'static, mode: &'static str, run: Arc<Run>) -> Self {
        Self {
            provider: Arc::new(provider),
            clock: Arc::new(SystemClock),
            mode,
            run,
        }
    }

    /// Replaces the clock that supplies `now` for the timestamp window (the system
    /// clock by default), for tests.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Returns a router that answers `POST path` (other methods get 405). Merge it
    /// into your application's router with [`Router::merge`].
    ///
    /// # Panics
    /// When `path` is not a valid axum route (it must start with `/`).
    pub fn into_router(self, path: &str) -> Router {
        let limit = self.provider.options().body_limit();
        let webhook = Arc::new(self);
        Router::new()
            .route(
                path,
                post(
                    move |headers: HeaderMap, body: Result<Bytes, BytesRejection>| {
                        let webhook = Arc::clone(&webhook);
                        async move { webhook.answer(headers, body, limit).await }
                    },
                ),
            )
            // the limit the `Bytes` extractor applies: a larger body stops being read
            // at the limit and answers 413
            .layer(DefaultBodyLimit::max(limit))
    }

    /// Answers one request.
    async fn answer(
        &self,
        headers: HeaderMap,
        body: Result<Bytes, BytesRejection>,
        limit: usize,
    ) -> Response {
        let started = std::time::Instant::now();
        let body = match body {
            Ok(body) => body,
            Err(rejection) => {
                let result = Err(body_error(rejection, limit));
                async { report(self.provider.name(), started, &result) }
                    .instrument(delivery_span(self.provider.name()))
                    .await;
                return result.into_response();
            }
        };
        (self.run)(&*self.provider, &*self.clock, &headers, body)
            .await
            .into_response()
    }
}

/// Tells a body over the limit, and one cut at the deadline of
/// [`serve`](crate::serve), from one that could not be read.
fn body_error(rejection: BytesRejection, limit: usize) -> EdgeError {
    if let Some(BodyTimedOut(timeout)) = find_in_chain(&rejection) {
        return EdgeError::BodyTimeout { timeout: *timeout };
    }
    match rejection {
        BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_)) => {
            EdgeError::TooLarge { limit }
        }
        other => EdgeError::UnreadableBody(Box::new(other)),
    }
}

/// The first error of type `E` in `err`'s source chain: axum wraps a body's error in
/// one or two layers of its own.
fn find_in_chain<'a, E: StdError + 'static>(err: &'a (dyn StdError + 'static)) -> Option<&'a E> {
    let mut next = Some(err);
    while let Some(err) = next {
        if let Some(found) = err.downcast_ref::<E>() {
            return Some(found);
        }
        next = err.source();
    }
    None
}
