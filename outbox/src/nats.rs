//! [`NatsSink`]: publish to a JetStream subject with the message id as
//! `Nats-Msg-Id`, marked sent on the stream's publish ack.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, context::PublishErrorKind, message::PublishMessage};
use bytes::Bytes;
use hookbox_core::{BoxFuture, OutboxMessage};

use crate::{RelayPolicy, Sink, SinkError};

/// How often a running sink reads its stream's configuration again, to notice a
/// duplicate window an operator shortened.
const RECHECK_EVERY: Duration = Duration::from_secs(60);

/// JetStream's error code for a message larger than the stream's `max_msg_size`.
const MESSAGE_EXCEEDS_MAXIMUM: u64 = 10054;

/// How a [`NatsSink`] connects and what it does when the stream's duplicate window
/// is shorter than the relay's longest resend gap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsOptions {
    subject_per_ordering_key: bool,
    refuse_short_window: bool,
    connect_timeout: Duration,
}

impl Default for NatsOptions {
    fn default() -> Self {
        Self {
            subject_per_ordering_key: false,
            refuse_short_window: false,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

impl NatsOptions {
    /// The defaults: one subject for every message, warn (do not refuse) on a short
    /// duplicate window, 5 s to connect.
    pub fn new() -> Self {
        Self::default()
    }

    /// Publishes a message with an ordering key to `<subject>.<key>` (characters
    /// other than ASCII letters, digits, `-` and `_` in the key become `_`), so a
    /// consumer can filter one key's messages; messages without a key go to
    /// `<subject>`.
    pub fn subject_per_ordering_key(mut self, yes: bool) -> Self {
        self.subject_per_ordering_key = yes;
        self
    }

    /// Refuses to publish, instead of warning, while the stream's duplicate window
    /// is shorter than the relay's longest resend gap
    /// ([`RelayPolicy::longest_resend_gap`]): [`NatsSink::connect`] fails, and a
    /// running sink that notices a shortened window leaves its messages pending.
    pub fn refuse_short_window(mut self, yes: bool) -> Self {
        self.refuse_short_window = yes;
        self
    }

    /// How long to wait for the server when connecting (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Returns whether keyed messages get a subject per key.
    pub fn is_subject_per_ordering_key(&self) -> bool {
        self.subject_per_ordering_key
    }

    /// Returns whether a short duplicate window is refused.
    pub fn is_refusing_short_window(&self) -> bool {
        self.refuse_short_window
    }
}

/// Publishes each message to a JetStream subject: the payload as it is, the
/// message's headers, `Nats-Msg-Id: <message id>` and `Hookbox-Attempt: <n>`.
///
/// The message is sent when the stream's publish ack arrives; an ack that says
/// *duplicate* (the stream stored this id before, within its duplicate window) is
/// sent too, so a resend after a crash between the ack and the relay's record is
/// stored once. Past the window the stream stores a resend again: the sink reads
/// the stream's `duplicate_window` when it connects and every minute after, and
/// warns (or, with [`NatsOptions::refuse_short_window`], refuses) when it is
/// shorter than the relay's longest resend gap.
///
/// Outcomes: an ack is sent; a timeout, a lost connection or no stream answering
/// for the subject is retried; a message over the server's `max_payload` or the
/// stream's `max_msg_size` is a dead letter with the broker's reason. The client
/// reconnects by itself; sends during an outage time out and are retried with the
/// same id.
#[derive(Debug)]
pub struct NatsSink {
    context: jetstream::Context,
    subject: String,
    stream: String,
    options: NatsOptions,
    resend_gap: Duration,
    window: Mutex<Window>,
    refusing: AtomicBool,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    duplicate_window: Duration,
    checked_at: Instant,
}

impl NatsSink {
    /// Connects to the NATS server at `server` (`nats://host:4222`, credentials in
    /// the URL if any) and checks that a stream covers `subject`; `policy` is the
    /// relay's, whose longest resend gap the stream's duplicate window must cover.
    ///
    /// # Errors
    /// [`SinkError::Setup`] when the server cannot be reached, JetStream is not
    /// enabled, no stream covers the subject, or the duplicate window is too short
    /// and [`NatsOptions::refuse_short_window`] is set.
    pub async fn connect(
        server: &str,
        subject: &str,
        policy: &RelayPolicy,
        options: NatsOptions,
    ) -> Result<Self, SinkError> {
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(options.connect_timeout)
            .connect(server)
            .await
            .map_err(|err| {
                SinkError::Setup(format!(
                    "connecting to NATS at `{}`: {}",
                    crate::connect::redact(server),
                    hookbox_core::error_chain(&err)
                ))
            })?;
        Self::with_client(client, subject, policy, options).await
    }

    /// As [`NatsSink::connect`], on a client you connected (your TLS, credentials,
    /// reconnect policy).
    ///
    /// # Errors
    /// As [`NatsSink::connect`], but for the connection.
    pub async fn with_client(
        client: async_nats::Client,
        subject: &str,
        policy: &RelayPolicy,
        options: NatsOptions,
    ) -> Result<Self, SinkError> {
        if subject.is_empty() || subject.contains([' ', '*', '>']) {
            return Err(SinkError::Setup(format!(
                "`{subject}` is not a subject to publish to (empty, or a wildcard)"
            )));
        }
        let mut context = jetstream::new(client);
        // a publish ack later than the relay's send timeout is retried anyway
        context.set_timeout(policy.effective_send_timeout());
        let probe = if options.subject_per_ordering_key {
            format!("{subject}.*")
        } else {
            subject.to_string()
        };
        let stream = context
            .stream_by_subject(probe.clone())
            .await
            .map_err(|err| {
                SinkError::Setup(format!(
                    "no JetStream stream covers the subject `{probe}`: {}",
                    hookbox_core::error_chain(&err)
                ))
            })?;
        let sink = Self {
            context,
            subject: subject.to_string(),
            stream,
            options,
            resend_gap: policy.longest_resend_gap(),
            window: Mutex::new(Window {
                duplicate_window: Duration::ZERO,
                checked_at: Instant::now(),
            }),
            refusing: AtomicBool::new(false),
        };
        let window = sink.check_window().await?;
        if sink.refusing.load(Ordering::SeqCst) {
            return Err(SinkError::Setup(sink.short_window_text(window)));
        }
        Ok(sink)
    }

    /// Returns the stream that stores this sink's subject.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// Returns the stream's duplicate window as last read.
    pub fn duplicate_window(&self) -> Duration {
        self.window
            .lock()
            .map(|window| window.duplicate_window)
            .unwrap_or_default()
    }

    /// Returns the longest gap between two sends of one message that this sink was
    /// set up for ([`RelayPolicy::longest_resend_gap`]).
    pub fn resend_gap(&self) -> Duration {
        self.resend_gap
    }

    /// Returns the subject `message` is published to.
    pub fn subject_for(&self, message: &OutboxMessage) -> String {
        match (&message.ordering_key, self.options.subject_per_ordering_key) {
            (Some(key), true) => format!("{}.{}", self.subject, subject_token(key)),
            _ => self.subject.clone(),
        }
    }

    /// Reads the stream's duplicate window, warns when it is shorter than the
    /// resend gap, and sets the refusal flag when refusing is on.
    async fn check_window(&self) -> Result<Duration, SinkError> {
        let info = self
            .context
            .get_stream_no_info(&self.stream)
            .await
            .map_err(|err| {
                SinkError::Setup(format!(
                    "reading the stream `{}`: {}",
                    self.stream,
                    hookbox_core::error_chain(&err)
                ))
            })?
            .get_info()
            .await
            .map_err(|err| {
                SinkError::Setup(format!(
                    "reading the stream `{}`: {}",
                    self.stream,
                    hookbox_core::error_chain(&err)
                ))
            })?;
        let window = info.config.duplicate_window;
        if let Ok(mut last) = self.window.lock() {
            *last = Window {
                duplicate_window: window,
                checked_at: Instant::now(),
            };
        }
        let short = window < self.resend_gap;
        if short {
            tracing::warn!(
                stream = %self.stream,
                subject = %self.subject,
                duplicate_window_s = window.as_secs_f64(),
                resend_gap_s = self.resend_gap.as_secs_f64(),
                refusing = self.options.refuse_short_window,
                "{}",
                self.short_window_text(window)
            );
        }
        self.refusing
            .store(short && self.options.refuse_short_window, Ordering::SeqCst);
        Ok(window)
    }

    fn short_window_text(&self, window: Duration) -> String {
        format!(
            "the stream `{}` drops a resent message id only within its duplicate window of \
             {} s, shorter than the relay's longest resend gap of {} s (retry cap + lease): a \
             resend after that is stored twice; raise the stream's duplicate_window or lower \
             the relay's retry cap and lease",
            self.stream,
            window.as_secs(),
            self.resend_gap.as_secs()
        )
    }

    /// Reads the window again when the last read is older than [`RECHECK_EVERY`];
    /// one send does it, the others go on.
    async fn recheck_window(&self) {
        let due = match self.window.lock() {
            Ok(mut last) if last.checked_at.elapsed() >= RECHECK_EVERY => {
                last.checked_at = Instant::now();
                true
            }
            _ => false,
        };
        if due && let Err(err) = self.check_window().await {
            tracing::warn!(stream = %self.stream, error = %err, "outbox NATS sink: could not read the stream");
        }
    }

    async fn publish(&self, message: &OutboxMessage) -> Result<(), SinkError> {
        self.recheck_window().await;
        if self.refusing.load(Ordering::SeqCst) {
            return Err(SinkError::Temporary(
                self.short_window_text(self.duplicate_window()),
            ));
        }
        let mut headers = async_nats::HeaderMap::new();
        for (name, value) in message.headers.iter() {
            headers.append(
                name.as_str(),
                String::from_utf8_lossy(value.as_bytes()).as_ref(),
            );
        }
        headers.append("Hookbox-Attempt", message.attempts.to_string().as_str());
        let publish = PublishMessage::build()
            .payload(Bytes::clone(&message.payload))
            .headers(headers)
            .message_id(message.id.as_str());
        let subject = self.subject_for(message);
        let ack = self
            .context
            .send_publish(subject.clone(), publish)
            .await
            .map_err(|err| publish_error(&subject, &err))?
            .await
            .map_err(|err| publish_error(&subject, &err))?;
        if ack.duplicate {
            tracing::debug!(message_id = %message.id, stream = %ack.stream, "outbox NATS sink: the stream had this id already");
        }
        Ok(())
    }
}

impl Sink for NatsSink {
    fn send<'a>(&'a self, message: &'a OutboxMessage) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(self.publish(message))
    }

    fn kind(&self) -> &'static str {
        "nats"
    }
}

/// Maps a publish failure to the relay's outcome, keeping the broker's reason.
fn publish_error(subject: &str, err: &jetstream::context::PublishError) -> SinkError {
    let text = format!(
        "publishing to `{subject}`: {}",
        hookbox_core::error_chain(err)
    );
    let too_large = matches!(err.kind(), PublishErrorKind::MaxPayloadExceeded)
        || std::error::Error::source(err)
            .and_then(|source| source.downcast_ref::<jetstream::Error>())
            .is_some_and(|api| api.error_code().0 == MESSAGE_EXCEEDS_MAXIMUM);
    if too_large {
        SinkError::Permanent(text)
    } else {
        SinkError::Temporary(text)
    }
}

/// The ordering key as one subject token.
fn subject_token(key: &str) -> String {
    let token: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if token.is_empty() { "_".into() } else { token }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordering_keys_become_one_subject_token() {
        assert_eq!(subject_token("cus_1"), "cus_1");
        assert_eq!(subject_token("shop.example.com/1"), "shop_example_com_1");
        assert_eq!(subject_token("a b*>"), "a_b__");
        assert_eq!(subject_token(""), "_");
    }
}
