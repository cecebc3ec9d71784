//! How a send fails.

/// Why a [`Sink`](crate::Sink) did not take a message, or why one could not be
/// built. The relay retries [`SinkError::Temporary`] and
/// [`SinkError::UnknownSink`] with backoff and dead-letters
/// [`SinkError::Permanent`] at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    /// A failure that may pass: a timeout, a refused connection, a 5xx, 408, 409
    /// or 429.
    #[error("temporary failure: {0}")]
    Temporary(String),
    /// A failure the downstream will repeat (a 4xx other than 408, 409, 429): the
    /// message becomes a dead letter.
    #[error("permanent failure: {0}")]
    Permanent(String),
    /// The relay has no sink of the message's name.
    #[error("no sink named `{0}` is configured on this relay")]
    UnknownSink(String),
    /// A sink could not be built (an invalid URL, a TLS setup failure).
    #[error("the sink could not be set up: {0}")]
    Setup(String),
}

impl SinkError {
    /// Returns `true` when the message should become a dead letter now.
    pub fn is_permanent(&self) -> bool {
        matches!(self, Self::Permanent(_))
    }
}
