//! What an acknowledged delivery answers.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// What the edge did with an acknowledged delivery. Every outcome answers 200.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Inbox mode: stored now; a worker applies it later.
    Stored,
    /// Stored or applied before (a retry or a concurrent copy); nothing changed.
    Duplicate,
    /// Inline mode: the side effect ran and committed with the claim.
    Applied,
}

impl Outcome {
    /// Returns the stable name: the `"outcome"` field of the JSON answer
    /// (`"stored"`, `"duplicate"`, `"applied"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stored => "stored",
            Self::Duplicate => "duplicate",
            Self::Applied => "applied",
        }
    }

    /// Returns the HTTP status to answer with: always 200, for a duplicate too (the
    /// sender must stop retrying what is already stored).
    pub fn status(self) -> StatusCode {
        StatusCode::OK
    }

    /// Returns the JSON answer: `{"ok":true,"outcome":"<outcome>"}`.
    pub fn to_json(self) -> String {
        serde_json::json!({ "ok": true, "outcome": self.as_str() }).to_string()
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl IntoResponse for Outcome {
    fn into_response(self) -> Response {
        json_response(self.status(), self.to_json())
    }
}

/// A response with a JSON body.
pub(crate) fn json_response(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
