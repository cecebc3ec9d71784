//! Handshakes: requests a provider sends to check an endpoint, which the endpoint
//! answers itself and never stores.

use std::fmt;

use bytes::Bytes;
use http::StatusCode;

use crate::VerifiedDelivery;

/// What a verified request turned out to be: an event to store, or a handshake to
/// answer at once.
///
/// Slack's `url_verification`, Twitch's `webhook_callback_verification`, Zoom's
/// `endpoint.url_validation` and Discord's `PING` are handshakes: the provider checks
/// that the endpoint is its own before (or while) it sends events, and expects a
/// particular answer. They are verified like events where the provider signs them,
/// but carry no event: an edge answers with [`HandshakeReply`], stores nothing and
/// runs no handler.
#[derive(Debug, Clone)]
// the event is the hot path and moves inline: boxing it would allocate on every
// delivery to spare the rare handshake a few hundred bytes
#[allow(clippy::large_enum_variant)]
pub enum Verified {
    /// An event, to store or apply exactly once.
    Event(VerifiedDelivery),
    /// A handshake, to answer with this reply; never stored.
    Handshake(HandshakeReply),
}

impl Verified {
    /// Returns the event, or `None` for a handshake.
    pub fn event(self) -> Option<VerifiedDelivery> {
        match self {
            Self::Event(delivery) => Some(delivery),
            Self::Handshake(_) => None,
        }
    }

    /// Returns the reply, or `None` for an event.
    pub fn handshake(&self) -> Option<&HandshakeReply> {
        match self {
            Self::Event(_) => None,
            Self::Handshake(reply) => Some(reply),
        }
    }
}

/// The answer a provider expects to a handshake: a status, a content type and a body.
///
/// # Examples
/// ```
/// use hookbox_core::HandshakeReply;
/// let reply = HandshakeReply::text("webhook_callback_verification", "pogchamp-kappa-360noscope-vohiyo");
/// assert_eq!(reply.status(), 200);
/// assert_eq!(reply.content_type(), Some("text/plain"));
/// assert_eq!(&reply.body()[..], b"pogchamp-kappa-360noscope-vohiyo");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct HandshakeReply {
    kind: &'static str,
    status: StatusCode,
    content_type: Option<&'static str>,
    body: Bytes,
}

impl HandshakeReply {
    /// A reply of `status` with `body` of `content_type` (`None`: no body and no
    /// content type, as for a 204) to the handshake named `kind` (the provider's own
    /// name for it, `url_verification`, `PING`, …).
    pub fn new(
        kind: &'static str,
        status: StatusCode,
        content_type: Option<&'static str>,
        body: impl Into<Bytes>,
    ) -> Self {
        Self {
            kind,
            status,
            content_type,
            body: body.into(),
        }
    }

    /// A 200 reply with a JSON body.
    pub fn json(kind: &'static str, body: impl Into<Bytes>) -> Self {
        Self::new(kind, StatusCode::OK, Some("application/json"), body)
    }

    /// A 200 reply with a `text/plain` body.
    pub fn text(kind: &'static str, body: impl Into<Bytes>) -> Self {
        Self::new(kind, StatusCode::OK, Some("text/plain"), body)
    }

    /// A 204 reply without a body.
    pub fn no_content(kind: &'static str) -> Self {
        Self::new(kind, StatusCode::NO_CONTENT, None, Bytes::new())
    }

    /// Returns the provider's name for the handshake (`url_verification`, …).
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Returns the status to answer with.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// Returns the content type of the body, `None` when there is no body.
    pub fn content_type(&self) -> Option<&'static str> {
        self.content_type
    }

    /// Returns the body to answer with.
    pub fn body(&self) -> &Bytes {
        &self.body
    }
}

impl fmt::Debug for HandshakeReply {
    // a challenge is not a secret, but an encrypted token is derived from one: print
    // the length only
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandshakeReply")
            .field("kind", &self.kind)
            .field("status", &self.status)
            .field("content_type", &self.content_type)
            .field("body_len", &self.body.len())
            .finish()
    }
}
