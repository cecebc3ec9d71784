//! The one error type of the edge, and how it answers over HTTP.

use std::error::Error as StdError;
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hookbox_core::{StoreError, VerifyError};

use crate::response::json_response;

/// Why a delivery (or, past the in-flight cap of [`serve`](crate::serve), any request)
/// was not acknowledged.
///
/// [`EdgeError::status`] is the answer the status policy gives: 4xx for what the
/// sender got wrong (nothing was stored, a retry of the same bytes fails the same
/// way; the one exception is a body that arrived too slowly, 408), 5xx only when the
/// delivery could not be stored or applied (the sender retries, and the retry can
/// succeed).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EdgeError {
    /// The delivery failed verification: a bad signature, a missing or malformed
    /// header, a stale timestamp, a malformed body. Nothing was stored.
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// The body is larger than the provider's limit
    /// ([`VerifyOptions::body_limit`](hookbox_core::VerifyOptions::body_limit)); it
    /// was not read to the end and nothing was stored.
    #[error("body too large: the limit is {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The request body could not be read (the sender hung up mid-body, or sent a
    /// malformed chunked encoding). Nothing was stored.
    #[error("the request body could not be read")]
    UnreadableBody(#[source] Box<dyn StdError + Send + Sync>),
    /// The body did not arrive within the body-read timeout of [`serve`](crate::serve)
    /// ([`EdgeLimits::body_read_timeout`](crate::EdgeLimits::body_read_timeout)): the
    /// sender trickled it, or its connection stalled. The body was cut where it stood and
    /// nothing was stored; the connection is closed after the answer. A retry over a
    /// healthy connection can succeed, unlike the other 4xx.
    #[error("the request body did not arrive within {timeout:?}; nothing was stored")]
    BodyTimeout {
        /// The deadline that passed.
        timeout: Duration,
    },
    /// [`EdgeLimits::max_in_flight`](crate::EdgeLimits::max_in_flight) requests were
    /// already in flight, so [`serve`](crate::serve) answered this one at once
    /// instead of queueing it: a queue without bound under a burst (or an attack)
    /// turns into memory, file descriptors and answers that come after the sender
    /// gave up. Nothing was read or stored; the answer carries `Retry-After`
    /// ([`EdgeError::retry_after`]) and the sender retries.
    #[error("too many requests in flight (the limit is {limit}); answered 503 at once")]
    Overloaded {
        /// The in-flight cap that was reached.
        limit: usize,
    },
    /// The store failed: the delivery was not stored (inbox mode) or nothing was
    /// committed (inline mode).
    #[error("the store failed; the delivery was not stored")]
    Store {
        /// The store's own classification ([`StoreError::is_transient`]): `true`
        /// answers 503, `false` answers 500; both let the sender retry.
        transient: bool,
        /// The store's error.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The inline side effect failed; its writes and the claim rolled back, so the
    /// sender's retry runs it again.
    #[error("the side effect failed; nothing was committed")]
    SideEffect(#[source] Box<dyn StdError + Send + Sync>),
}

impl EdgeError {
    /// Wraps a store error, keeping its transient classification.
    pub(crate) fn store<E: StoreError>(err: E) -> Self {
        Self::Store {
            transient: err.is_transient(),
            source: Box::new(err),
        }
    }

    /// Returns the HTTP status to answer with.
    ///
    /// | error | status |
    /// |---|---|
    /// | [`EdgeError::Verify`] | [`VerifyError::http_status`]: 400 for a missing or malformed header, a malformed body or a missing dedupe key; 401 for a signature mismatch or a timestamp outside the window; 500 for the receiver's own unusable secret |
    /// | [`EdgeError::TooLarge`] | 413 |
    /// | [`EdgeError::UnreadableBody`] | 400 |
    /// | [`EdgeError::BodyTimeout`] | 408 |
    /// | [`EdgeError::Overloaded`] | 503 |
    /// | [`EdgeError::Store`] | 503 when transient, else 500 |
    /// | [`EdgeError::SideEffect`] | 500 |
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Verify(err) => err.http_status(),
            Self::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnreadableBody(_) => StatusCode::BAD_REQUEST,
            Self::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            Self::Overloaded { .. }
            | Self::Store {
                transient: true, ..
            } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Store { .. } | Self::SideEffect(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Returns the stable, machine-readable kind: the `"error"` field of the JSON
    /// answer.
    ///
    /// [`VerifyError::kind`] for a verification failure (`missing_header`,
    /// `signature_mismatch`, …), then `body_too_large`, `unreadable_body`,
    /// `body_timeout`, `overloaded`, `store_unavailable` (transient), `store_failed`
    /// and `side_effect_failed`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Verify(err) => err.kind(),
            Self::TooLarge { .. } => "body_too_large",
            Self::UnreadableBody(_) => "unreadable_body",
            Self::BodyTimeout { .. } => "body_timeout",
            Self::Overloaded { .. } => "overloaded",
            Self::Store {
                transient: true, ..
            } => "store_unavailable",
            Self::Store { .. } => "store_failed",
            Self::SideEffect(_) => "side_effect_failed",
        }
    }

    /// Returns `true` when the delivery was refused for a reason on the receiver's
    /// side that may pass (the store was unavailable, the edge was at its in-flight
    /// cap), so the sender's retry can succeed: every 503.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Overloaded { .. }
                | Self::Store {
                    transient: true,
                    ..
                }
        )
    }

    /// Returns how long the sender should wait before it retries, for the
    /// `Retry-After` header: 1 s for [`EdgeError::Overloaded`] and a transient
    /// [`EdgeError::Store`] (a cap or a full group-commit queue is reached in bursts
    /// that pass within a second or two, and a sender that honours the header
    /// spreads its retries instead of hammering at once), `None` otherwise.
    /// [`IntoResponse`] sets the header; other frameworks should set it from this.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            // past the in-flight cap, or a store that is down or whose writer queue is
            // full: a second is enough for a queue to drain or a connection to return
            Self::Overloaded { .. }
            | Self::Store {
                transient: true, ..
            } => Some(Duration::from_secs(1)),
            _ => None,
        }
    }

    /// Returns the text for the sender: the `"message"` field of the JSON answer.
    ///
    /// For the sender's own mistakes (4xx) it is the full explanation of what to fix
    /// (a verification message never holds the secret or the body). For the
    /// receiver's failures (5xx) it says only that the delivery was not stored and
    /// to retry: the store's and the side effect's errors are logged, never sent.
    pub fn message(&self) -> String {
        match self {
            // the receiver's own unusable secret: the operator reads the log
            Self::Verify(err) if err.http_status().is_server_error() => {
                "the receiver cannot verify deliveries right now; retry later".to_string()
            }
            Self::Verify(_)
            | Self::TooLarge { .. }
            | Self::UnreadableBody(_)
            | Self::BodyTimeout { .. } => self.to_string(),
            Self::Overloaded { .. } => {
                "the receiver is at capacity; nothing was stored, retry later".to_string()
            }
            Self::Store {
                transient: true, ..
            } => "the delivery could not be stored right now; retry later".to_string(),
            Self::Store { .. } => "the delivery could not be stored; retry later".to_string(),
            Self::SideEffect(_) => {
                "the delivery could not be processed; nothing was committed, retry later"
                    .to_string()
            }
        }
    }

    /// Returns the JSON answer: `{"ok":false,"error":"<kind>","message":"…"}`.
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "ok": false,
            "error": self.kind(),
            "message": self.message(),
        })
        .to_string()
    }
}

impl IntoResponse for EdgeError {
    fn into_response(self) -> Response {
        let mut response = json_response(self.status(), self.to_json());
        if let Some(after) = self.retry_after() {
            let seconds = after.as_secs().max(1).to_string();
            if let Ok(value) = HeaderValue::from_str(&seconds) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        if matches!(self, Self::BodyTimeout { .. }) {
            // the rest of the body is still on the wire: the connection cannot carry
            // another request, and the header tells the sender so
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("store error")]
    struct FakeStoreError(bool);

    impl StoreError for FakeStoreError {
        fn is_transient(&self) -> bool {
            self.0
        }
    }

    #[test]
    fn sender_mistakes_are_4xx_and_store_failures_5xx() {
        let cases = [
            (
                EdgeError::from(VerifyError::MissingHeader {
                    header: "X-Hub-Signature-256".into(),
                }),
                400,
                "missing_header",
            ),
            (
                EdgeError::from(VerifyError::SignatureMismatch { hint: "no".into() }),
                401,
                "signature_mismatch",
            ),
            (EdgeError::TooLarge { limit: 10 }, 413, "body_too_large"),
            (
                EdgeError::BodyTimeout {
                    timeout: Duration::from_secs(10),
                },
                408,
                "body_timeout",
            ),
            (EdgeError::Overloaded { limit: 256 }, 503, "overloaded"),
            (
                EdgeError::store(FakeStoreError(true)),
                503,
                "store_unavailable",
            ),
            (EdgeError::store(FakeStoreError(false)), 500, "store_failed"),
            (
                EdgeError::SideEffect("boom".into()),
                500,
                "side_effect_failed",
            ),
        ];
        for (err, status, kind) in cases {
            assert_eq!(err.status().as_u16(), status, "{err:?}");
            assert_eq!(err.kind(), kind);
        }
    }

    #[test]
    fn overloaded_answers_503_with_retry_after_and_the_json_shape() {
        let err = EdgeError::Overloaded { limit: 256 };
        assert!(err.is_transient());
        assert_eq!(err.retry_after(), Some(Duration::from_secs(1)));
        let response = err.into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");

        let err = EdgeError::BodyTimeout {
            timeout: Duration::from_millis(500),
        };
        assert!(!err.is_transient(), "408 is the sender's side");
        assert_eq!(err.retry_after(), None);
        assert!(err.message().contains("500ms"), "{}", err.message());
        let response = err.into_response();
        assert_eq!(response.headers()[header::CONNECTION], "close");
        assert!(!response.headers().contains_key(header::RETRY_AFTER));
    }

    #[test]
    fn the_json_answer_names_the_header_and_hides_internal_errors() {
        let err = EdgeError::from(VerifyError::MissingHeader {
            header: "X-GitHub-Delivery".into(),
        });
        let json: serde_json::Value = serde_json::from_str(&err.to_json()).unwrap_or_default();
        assert_eq!(json["ok"], false);
        assert_eq!(json["error"], "missing_header");
        assert!(
            json["message"]
                .as_str()
                .unwrap_or("")
                .contains("X-GitHub-Delivery")
        );

        let err = EdgeError::from(VerifyError::invalid_secret("secret #2 is not base64"));
        assert_eq!((err.status().as_u16(), err.kind()), (500, "invalid_secret"));
        assert!(!err.to_json().contains("secret #2"));

        let err = EdgeError::SideEffect("password=hunter2".into());
        assert!(!err.to_json().contains("hunter2"));
        assert!(
            StdError::source(&err).is_some(),
            "the cause stays in the chain"
        );
    }
}
