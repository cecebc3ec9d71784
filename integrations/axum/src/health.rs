//! Liveness and readiness for a load balancer or an orchestrator.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use hookbox_core::{Store, error_chain};

use crate::EdgeError;
use crate::response::json_response;

/// How long a readiness check waits for the store before answering 503.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// Returns a router with `GET /livez` and `GET /readyz` for `store`.
///
/// - `/livez` answers 200 while the process serves requests: restart on failure.
/// - `/readyz` answers 200 `{"ready":true}` when the store takes a delivery now
///   ([`Store::ping`]: a trivial read on a pooled connection), else 503 with the
///   edge's JSON error (`store_unavailable`): take the instance out of rotation,
///   since a delivery sent to it now would be answered 503 too. A Redis cache in
///   front of the store never makes it unready; the cache is optional.
///
/// Merge it beside the webhook's router:
/// ```
/// # fn app(store: hookbox_sqlite::SqliteStore) -> Result<axum::Router, Box<dyn std::error::Error>> {
/// use hookbox_axum::{Webhook, health_router};
/// use hookbox_github::GitHub;
///
/// let app = Webhook::inbox(GitHub::new("test-secret")?, store.clone())
///     .into_router("/webhooks/github")
///     .merge(health_router(store));
/// # Ok(app)
/// # }
/// ```
pub fn health_router<S: Store + 'static>(store: S) -> Router {
    let store = Arc::new(store);
    Router::new()
        .route(
            "/livez",
            get(|| async { json_response(StatusCode::OK, r#"{"ok":true}"#.to_string()) }),
        )
        .route(
            "/readyz",
            get(move || {
                let store = Arc::clone(&store);
                async move { readiness(&*store).await }
            }),
        )
}

/// Checks that `store` takes a delivery now, within [`READY_TIMEOUT`]: the check
/// behind `/readyz`, for other frameworks.
///
/// # Errors
/// [`EdgeError::Store`] (transient: answer 503) when the store failed or did not
/// answer in time.
pub async fn ready<S: Store>(store: &S) -> Result<(), EdgeError> {
    match tokio::time::timeout(READY_TIMEOUT, store.ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(err)) => Err(EdgeError::store(err)),
        Err(_) => Err(EdgeError::Store {
            transient: true,
            source: format!("no answer within {} ms", READY_TIMEOUT.as_millis()).into(),
        }),
    }
}

async fn readiness<S: Store>(store: &S) -> Response {
    match ready(store).await {
        Ok(()) => json_response(StatusCode::OK, r#"{"ready":true}"#.to_string()),
        Err(err) => {
            tracing::warn!(cause = %error_chain(&err), "not ready: the store is unavailable");
            // always 503 here: not ready is not a server fault to retry
            json_response(StatusCode::SERVICE_UNAVAILABLE, err.to_json())
        }
    }
}
