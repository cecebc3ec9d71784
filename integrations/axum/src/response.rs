//! What an acknowledged delivery answers.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hookbox_core::HandshakeReply;
use hookbox_core::bytes::Bytes;

/// What the edge did with an acknowledged request. Every event outcome answers 200; a
/// handshake answers what its provider expects.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Inbox mode: stored now; a worker applies it later.
    Stored,
    /// Stored or applied before (a retry or a concurrent copy); nothing changed.
    Duplicate,
    /// Inline mode: the side effect ran and committed with the claim.
    Applied,
    /// A handshake (Slack's `url_verification`, Twitch's challenge, Zoom's URL
    /// validation, Discord's `PING`), verified and answered with the provider's
    /// expected reply; nothing was stored and no handler ran.
    Handshake(HandshakeReply),
}

impl Outcome {
    /// Returns the stable name: the `"outcome"` field of the JSON answer
    /// (`"stored"`, `"duplicate"`, `"applied"`), and `"handshake"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Stored => "stored",
            Self::Duplicate => "duplicate",
            Self::Applied => "applied",
            Self::Handshake(_) => "handshake",
        }
    }

    /// Returns the HTTP status to answer with: 200 for every event (for a duplicate
    /// too: the sender must stop retrying what is already stored), the reply's status
    /// for a handshake.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Handshake(reply) => reply.status(),
            _ => StatusCode::OK,
        }
    }

    /// Returns the content type of [`Outcome::body`]: `application/json` for an
    /// event, the reply's (`None` for a reply without a body) for a handshake.
    pub fn content_type(&self) -> Option<&'static str> {
        match self {
            Self::Handshake(reply) => reply.content_type(),
            _ => Some("application/json"),
        }
    }

    /// Returns the body to answer with: [`Outcome::to_json`] for an event, the
    /// reply's body for a handshake. For another framework, answer
    /// [`Outcome::status`], [`Outcome::content_type`] and this.
    pub fn body(&self) -> Bytes {
        match self {
            Self::Handshake(reply) => reply.body().clone(),
            _ => Bytes::from(self.to_json()),
        }
    }

    /// Returns the JSON answer of an event: `{"ok":true,"outcome":"<outcome>"}`. A
    /// handshake is answered with [`Outcome::body`] instead (this returns
    /// `{"ok":true,"outcome":"handshake"}` for it).
    pub fn to_json(&self) -> String {
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
        let Self::Handshake(reply) = self else {
            return json_response(self.status(), self.to_json());
        };
        let mut response = (reply.status(), reply.body().clone()).into_response();
        let headers = response.headers_mut();
        match reply.content_type() {
            Some(content_type) => {
                headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            }
            None => {
                headers.remove(header::CONTENT_TYPE);
            }
        }
        response
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
