//! The one error type of the edge, and how it answers over HTTP.

use std::error::Error as StdError;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hookbox_core::{StoreError, VerifyError};

use crate::response::json_response;

/// Why a delivery was not acknowledged.
///
/// [`EdgeError::status`] is the answer the status policy gives: 4xx for what the
/// sender got wrong (nothing was stored, a retry of the same bytes fails the same
/// way), 5xx only when the delivery could not be stored or applied (the sender
/// retries, and the retry can succeed).
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
    /// | [`EdgeError::Store`] | 503 when transient, else 500 |
    /// | [`EdgeError::SideEffect`] | 500 |
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Verify(err) => err.http_status(),
            Self::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnreadableBody(_) => StatusCode::BAD_REQUEST,
            Self::Store {
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
    /// `store_unavailable` (transient), `store_failed` and `side_effect_failed`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Verify(err) => err.kind(),
            Self::TooLarge { .. } => "body_too_large",
            Self::UnreadableBody(_) => "unreadable_body",
            Self::Store {
                transient: true, ..
            } => "store_unavailable",
            Self::Store { .. } => "store_failed",
            Self::SideEffect(_) => "side_effect_failed",
        }
    }

    /// Returns `true` when the delivery was refused for a reason that may pass (the
    /// store was unavailable), so the sender's retry can succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Store {
                transient: true,
                ..
            }
        )
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
            Self::Verify(_) | Self::TooLarge { .. } | Self::UnreadableBody(_) => self.to_string(),
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
        json_response(self.status(), self.to_json())
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
