//! [`AmqpSink`]: persistent, mandatory publishes to RabbitMQ (AMQP 0.9.1), marked
//! sent on the broker's publisher confirm.

use std::time::Duration;

use hookbox_core::{BoxFuture, OutboxMessage};
use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties};
use tokio::sync::Mutex;

use crate::{Sink, SinkError};

/// AMQP's delivery mode for a message the broker writes to disk.
const PERSISTENT: u8 = 2;

/// Where an [`AmqpSink`] publishes: an exchange and a routing key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmqpOptions {
    exchange: String,
    routing_key: String,
    routing_key_per_ordering_key: bool,
    connect_timeout: Duration,
}

impl AmqpOptions {
    /// Publishes to `queue` through the default exchange (the routing key is the
    /// queue's name); the queue must exist.
    pub fn queue(queue: impl Into<String>) -> Self {
        Self {
            exchange: String::new(),
            routing_key: queue.into(),
            routing_key_per_ordering_key: false,
            connect_timeout: Duration::from_secs(5),
        }
    }

    /// Publishes to `exchange` with `routing_key`; the exchange must exist, and
    /// every message must reach a queue bound to it (publishes are mandatory).
    pub fn exchange(exchange: impl Into<String>, routing_key: impl Into<String>) -> Self {
        Self {
            exchange: exchange.into(),
            ..Self::queue(routing_key)
        }
    }

    /// Uses a message's ordering key as its routing key (messages without one keep
    /// the configured routing key), for an exchange that routes by key.
    pub fn routing_key_per_ordering_key(mut self, yes: bool) -> Self {
        self.routing_key_per_ordering_key = yes;
        self
    }

    /// How long to wait for the broker when connecting (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Returns the exchange (empty: the default exchange).
    pub fn exchange_name(&self) -> &str {
        &self.exchange
    }

    /// Returns the configured routing key.
    pub fn routing_key(&self) -> &str {
        &self.routing_key
    }
}

/// Publishes each message to RabbitMQ: persistent (delivery mode 2), `mandatory`,
/// `message_id` = the message id, the message's headers as AMQP headers (with
/// `hookbox-attempt: <n>`), and `content-type` from its headers.
///
/// The channel is in confirm mode: a message is sent when the broker confirms it
/// (for a persistent message on a durable queue, once it is written). A nack, a
/// return (no queue bound for the routing key) or a lost connection is retried by
/// the relay's policy, and a closed channel or connection is opened again on the
/// next send. Many sends share the channel, so their confirms are in flight
/// together.
///
/// RabbitMQ has no broker-side dedupe: a resend after a crash between the confirm
/// and the relay's record is delivered twice, with the same `message_id`, and the
/// consumer drops the second (docs/outbox.md has the recipe).
pub struct AmqpSink {
    uri: String,
    options: AmqpOptions,
    link: Mutex<Option<Link>>,
}

struct Link {
    // kept so the connection lives as long as its channel
    _connection: Connection,
    channel: Channel,
}

impl std::fmt::Debug for AmqpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmqpSink")
            .field("uri", &crate::connect::redact(&self.uri))
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl AmqpSink {
    /// Connects to the broker at `uri` (`amqp://user:pass@host:5672/%2f`) and
    /// checks that the exchange (or, on the default exchange, the queue) exists.
    ///
    /// # Errors
    /// [`SinkError::Setup`] when the broker cannot be reached or refuses the
    /// credentials, or the exchange or queue does not exist.
    pub async fn connect(uri: &str, options: AmqpOptions) -> Result<Self, SinkError> {
        let sink = Self {
            uri: uri.to_string(),
            options,
            link: Mutex::new(None),
        };
        let link = sink.open().await.map_err(|err| {
            SinkError::Setup(format!(
                "connecting to AMQP at `{}`: {err}",
                crate::connect::redact(uri)
            ))
        })?;
        sink.check_route(&link._connection).await?;
        *sink.link.lock().await = Some(link);
        Ok(sink)
    }

    /// Returns where it publishes.
    pub fn options(&self) -> &AmqpOptions {
        &self.options
    }

    /// Opens a connection and a channel in confirm mode.
    async fn open(&self) -> Result<Link, String> {
        let connect = Connection::connect(&self.uri, ConnectionProperties::default());
        let connection = tokio::time::timeout(self.options.connect_timeout, connect)
            .await
            .map_err(|_| {
                format!(
                    "no answer within {} ms",
                    self.options.connect_timeout.as_millis()
                )
            })?
            .map_err(|err| hookbox_core::error_chain(&err))?;
        let channel = connection
            .create_channel()
            .await
            .map_err(|err| hookbox_core::error_chain(&err))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|err| hookbox_core::error_chain(&err))?;
        Ok(Link {
            _connection: connection,
            channel,
        })
    }

    /// Declares the exchange or queue passively on a channel of its own (a failed
    /// passive declare closes its channel).
    async fn check_route(&self, connection: &Connection) -> Result<(), SinkError> {
        let setup = |err: lapin::Error| SinkError::Setup(hookbox_core::error_chain(&err));
        let channel = connection.create_channel().await.map_err(setup)?;
        let checked = if self.options.exchange.is_empty() {
            channel
                .queue_declare(
                    self.options.routing_key.as_str().into(),
                    QueueDeclareOptions {
                        passive: true,
                        ..QueueDeclareOptions::default()
                    },
                    FieldTable::default(),
                )
                .await
                .map(|_| ())
                .map_err(|err| {
                    SinkError::Setup(format!(
                        "the queue `{}` does not exist or cannot be used: {}",
                        self.options.routing_key,
                        hookbox_core::error_chain(&err)
                    ))
                })
        } else {
            channel
                .exchange_declare(
                    self.options.exchange.as_str().into(),
                    lapin::ExchangeKind::Direct,
                    ExchangeDeclareOptions {
                        passive: true,
                        ..ExchangeDeclareOptions::default()
                    },
                    FieldTable::default(),
                )
                .await
                .map_err(|err| {
                    SinkError::Setup(format!(
                        "the exchange `{}` does not exist or cannot be used: {}",
                        self.options.exchange,
                        hookbox_core::error_chain(&err)
                    ))
                })
        };
        if channel.status().connected() {
            let _ = channel.close(200, "checked".into()).await;
        }
        checked
    }

    /// Returns the open channel, opening a new connection when the last one closed.
    async fn channel(&self) -> Result<Channel, SinkError> {
        let mut link = self.link.lock().await;
        if let Some(open) = link.as_ref()
            && open.channel.status().connected()
        {
            return Ok(open.channel.clone());
        }
        *link = None;
        let opened = self.open().await.map_err(|err| {
            SinkError::Temporary(format!(
                "reconnecting to AMQP at `{}`: {err}",
                crate::connect::redact(&self.uri)
            ))
        })?;
        tracing::info!(uri = %crate::connect::redact(&self.uri), "outbox AMQP sink: connected");
        let channel = opened.channel.clone();
        *link = Some(opened);
        Ok(channel)
    }

    /// Returns the routing key for `message`.
    pub fn routing_key_for<'m>(&'m self, message: &'m OutboxMessage) -> &'m str {
        match (
            &message.ordering_key,
            self.options.routing_key_per_ordering_key,
        ) {
            (Some(key), true) => key,
            _ => &self.options.routing_key,
        }
    }

    async fn publish(&self, message: &OutboxMessage) -> Result<(), SinkError> {
        let channel = self.channel().await?;
        let mut headers = FieldTable::default();
        let mut content_type = None;
        for (name, value) in message.headers.iter() {
            if name == http_content_type() {
                content_type = value.to_str().ok().map(ShortString::from);
            }
            headers.insert(
                name.as_str().into(),
                AMQPValue::LongString(value.as_bytes().to_vec().into()),
            );
        }
        headers.insert(
            "hookbox-attempt".into(),
            AMQPValue::LongUInt(message.attempts),
        );
        let mut properties = BasicProperties::default()
            .with_message_id(message.id.as_str().into())
            .with_delivery_mode(PERSISTENT)
            .with_headers(headers);
        if let Some(content_type) = content_type {
            properties = properties.with_content_type(content_type);
        }
        let routing_key = self.routing_key_for(message);
        let lost = |err: lapin::Error| {
            SinkError::Temporary(format!(
                "publishing to `{}`/`{routing_key}`: {}",
                self.options.exchange,
                hookbox_core::error_chain(&err)
            ))
        };
        let confirm = channel
            .basic_publish(
                self.options.exchange.as_str().into(),
                routing_key.into(),
                BasicPublishOptions {
                    mandatory: true,
                    ..BasicPublishOptions::default()
                },
                &message.payload,
                properties,
            )
            .await
            .map_err(lost)?
            .await
            .map_err(lost)?;
        match confirm {
            Confirmation::Ack(None) => Ok(()),
            Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)) => {
                Err(SinkError::Temporary(format!(
                    "the broker returned the message: {} {} (no queue bound to exchange `{}` \
                     for routing key `{routing_key}`)",
                    returned.reply_code, returned.reply_text, self.options.exchange
                )))
            }
            Confirmation::Nack(None) => Err(SinkError::Temporary(
                "the broker did not take the message (nack)".into(),
            )),
            Confirmation::NotRequested => Err(SinkError::Temporary(
                "the channel is not in confirm mode".into(),
            )),
        }
    }
}

fn http_content_type() -> &'static str {
    "content-type"
}

impl Sink for AmqpSink {
    fn send<'a>(&'a self, message: &'a OutboxMessage) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(self.publish(message))
    }

    fn kind(&self) -> &'static str {
        "amqp"
    }
}
