//! Where messages go: the [`Sink`] trait and the [`Sinks`] a relay routes by name.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use hookbox_core::{BoxFuture, OutboxMessage};

use crate::SinkError;

/// Sends one message somewhere outside the database: an HTTP endpoint, an email
/// API, a queue.
///
/// The relay calls it outside any transaction, at least once per message, never for
/// one message from two relays at once. Pass [`OutboxMessage::id`] to the
/// downstream as its idempotency key (the HTTP sink sends it as `Idempotency-Key`),
/// so that a resend after a crash between the send and its record is applied once.
/// [`OutboxMessage::attempts`] counts this send.
///
/// Return [`SinkError::Temporary`] for what may pass (a timeout, a 5xx, a rate
/// limit): the relay retries with backoff. Return [`SinkError::Permanent`] for what
/// cannot (a 4xx the downstream will repeat): the message becomes a dead letter.
pub trait Sink: Send + Sync {
    /// Sends `message`.
    ///
    /// # Errors
    /// The send failed; the variant says whether a retry may help.
    fn send<'a>(&'a self, message: &'a OutboxMessage) -> BoxFuture<'a, Result<(), SinkError>>;

    /// What kind of downstream this is (`http`, `nats`, `amqp`, `log`; `custom`
    /// unless a sink says otherwise): one lower-case word. The relay records a failed
    /// send's error as `{kind} sink: {error}`, so an operator reading
    /// `hookbox outbox dead` sees which kind of downstream refused the message and
    /// its answer.
    fn kind(&self) -> &'static str {
        "custom"
    }
}

impl<S: Sink + ?Sized> Sink for Arc<S> {
    fn send<'a>(&'a self, message: &'a OutboxMessage) -> BoxFuture<'a, Result<(), SinkError>> {
        (**self).send(message)
    }

    fn kind(&self) -> &'static str {
        (**self).kind()
    }
}

/// The sinks a relay sends to, by the name a handler gives in
/// [`Message::new`](hookbox_core::Message::new).
///
/// A message whose sink is not here is retried with backoff (and dead-letters at the
/// attempt limit) rather than dropped: a relay started without one of the sinks is a
/// deployment mistake an operator can fix, then `hookbox outbox replay --all`.
#[derive(Clone, Default)]
pub struct Sinks {
    by_name: HashMap<String, Arc<dyn Sink>>,
}

impl Sinks {
    /// No sinks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `sink` under `name`, replacing any sink of that name.
    pub fn with(mut self, name: impl Into<String>, sink: impl Sink + 'static) -> Self {
        self.by_name.insert(name.into(), Arc::new(sink));
        self
    }

    /// Returns the sink named `name`.
    pub fn get(&self, name: &str) -> Option<&dyn Sink> {
        self.by_name.get(name).map(|sink| &**sink as &dyn Sink)
    }

    /// Returns the configured names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}

impl fmt::Debug for Sinks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sinks")
            .field("names", &self.names())
            .finish()
    }
}

/// A sink for development: logs each message (id, sink, attempt, size) at INFO and
/// accepts it. The payload is not logged; it may hold personal data.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogSink;

impl Sink for LogSink {
    fn send<'a>(&'a self, message: &'a OutboxMessage) -> BoxFuture<'a, Result<(), SinkError>> {
        tracing::info!(
            message_id = %message.id,
            sink = %message.sink,
            attempt = message.attempts,
            ordering_key = message.ordering_key.as_deref(),
            bytes = message.payload.len(),
            "outbox message (log sink)"
        );
        Box::pin(async { Ok(()) })
    }

    fn kind(&self) -> &'static str {
        "log"
    }
}
