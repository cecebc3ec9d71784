//! [`connect_sink`]: a sink from a URL, as the CLI and the examples configure them.

use std::sync::Arc;

use crate::{LogSink, RelayPolicy, Sink, SinkError};

/// Builds the sink a URL names, connected and checked:
///
/// | URL | sink |
/// |---|---|
/// | `log` | [`LogSink`], only when asked for by name |
/// | `http://…`, `https://…` | `HttpSink` (feature `http`) |
/// | `nats://[user:pass@]host:4222/<subject>[?subject_per_key=true][&refuse_short_window=true]` | `NatsSink` (feature `nats`) |
/// | `amqp[s]://user:pass@host:5672/<vhost>?queue=<queue>` | `AmqpSink` to a queue (feature `amqp`) |
/// | `amqp[s]://…/<vhost>?exchange=<x>&routing_key=<k>[&routing_key_per_key=true]` | `AmqpSink` to an exchange |
///
/// `policy` is the relay's: the NATS sink checks its stream's duplicate window
/// against it.
///
/// # Errors
/// [`SinkError::Setup`] for a URL that does not parse, a scheme this build has no
/// sink for, or a sink that cannot connect or check its destination.
pub async fn connect_sink(url: &str, policy: &RelayPolicy) -> Result<Arc<dyn Sink>, SinkError> {
    let _ = policy;
    let url = url.trim();
    if url == "log" {
        return Ok(Arc::new(LogSink));
    }
    let Some((scheme, _)) = url.split_once("://") else {
        return Err(SinkError::Setup(format!(
            "`{}` is not a sink URL (log, http(s)://, nats://, amqp(s)://)",
            redact(url)
        )));
    };
    match scheme {
        #[cfg(feature = "http")]
        "http" | "https" => Ok(Arc::new(crate::HttpSink::new(url)?)),
        #[cfg(feature = "nats")]
        "nats" | "tls" => {
            let (address, query) = split_query(url);
            let (server, subject) = split_path(address);
            let mut options = crate::NatsOptions::new();
            for (name, value) in query {
                match name {
                    "subject_per_key" => options = options.subject_per_ordering_key(flag(value)?),
                    "refuse_short_window" => options = options.refuse_short_window(flag(value)?),
                    other => return Err(unknown_parameter(other, url)),
                }
            }
            if subject.is_empty() {
                return Err(SinkError::Setup(format!(
                    "`{}` names no subject: nats://host:4222/<subject>",
                    redact(url)
                )));
            }
            Ok(Arc::new(
                crate::NatsSink::connect(server, subject, policy, options).await?,
            ))
        }
        #[cfg(feature = "amqp")]
        "amqp" | "amqps" => {
            let (address, query) = split_query(url);
            let (mut queue, mut exchange, mut routing_key, mut per_key) = (None, None, None, false);
            for (name, value) in query {
                match name {
                    "queue" => queue = Some(value),
                    "exchange" => exchange = Some(value),
                    "routing_key" => routing_key = Some(value),
                    "routing_key_per_key" => per_key = flag(value)?,
                    other => return Err(unknown_parameter(other, url)),
                }
            }
            let options = match (queue, exchange) {
                (Some(queue), None) => crate::AmqpOptions::queue(queue),
                (None, Some(exchange)) => {
                    crate::AmqpOptions::exchange(exchange, routing_key.unwrap_or_default())
                }
                _ => {
                    return Err(SinkError::Setup(format!(
                        "`{}` needs either ?queue=<name> or ?exchange=<name>&routing_key=<key>",
                        redact(url)
                    )));
                }
            };
            let options = options.routing_key_per_ordering_key(per_key);
            Ok(Arc::new(crate::AmqpSink::connect(address, options).await?))
        }
        other => Err(SinkError::Setup(format!(
            "no sink for `{other}://` in this build (log, {})",
            [
                cfg!(feature = "http").then_some("http(s)://"),
                cfg!(feature = "nats").then_some("nats://"),
                cfg!(feature = "amqp").then_some("amqp(s)://"),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", ")
        ))),
    }
}

/// Returns the kind of sink a URL names (`log`, `http`, `nats`, `amqp`), or
/// `None` for anything else.
pub fn sink_kind(url: &str) -> Option<&'static str> {
    let url = url.trim();
    if url == "log" {
        return Some("log");
    }
    match url.split_once("://")?.0 {
        "http" | "https" => Some("http"),
        "nats" | "tls" => Some("nats"),
        "amqp" | "amqps" => Some("amqp"),
        _ => None,
    }
}

/// `url` without its credentials, for logs and error messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://…@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

/// The URL before `?`, and its `name=value` pairs.
#[cfg(any(feature = "nats", feature = "amqp"))]
fn split_query(url: &str) -> (&str, Vec<(&str, &str)>) {
    match url.split_once('?') {
        None => (url, Vec::new()),
        Some((address, query)) => (
            address,
            query
                .split('&')
                .filter(|pair| !pair.is_empty())
                .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
                .collect(),
        ),
    }
}

/// `scheme://authority` and the path after it, without its leading `/`.
#[cfg(feature = "nats")]
fn split_path(address: &str) -> (&str, &str) {
    let after_scheme = address.find("://").map_or(0, |i| i + 3);
    match address[after_scheme..].find('/') {
        Some(slash) => (
            &address[..after_scheme + slash],
            &address[after_scheme + slash + 1..],
        ),
        None => (address, ""),
    }
}

#[cfg(any(feature = "nats", feature = "amqp"))]
fn flag(value: &str) -> Result<bool, SinkError> {
    match value {
        "true" | "1" | "yes" | "" => Ok(true),
        "false" | "0" | "no" => Ok(false),
        other => Err(SinkError::Setup(format!("`{other}` is not true or false"))),
    }
}

#[cfg(any(feature = "nats", feature = "amqp"))]
fn unknown_parameter(name: &str, url: &str) -> SinkError {
    SinkError::Setup(format!(
        "`{name}` is not a parameter of the sink URL `{}`",
        redact(url)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_stay_out_of_messages() {
        assert_eq!(redact("nats://u:secret@h:4222"), "nats://…@h:4222");
        assert_eq!(
            redact("amqp://guest:guest@h:5672/%2f"),
            "amqp://…@h:5672/%2f"
        );
        assert_eq!(redact("nats://h:4222"), "nats://h:4222");
    }

    #[test]
    fn kinds_follow_the_scheme() {
        assert_eq!(sink_kind("log"), Some("log"));
        assert_eq!(sink_kind("https://x"), Some("http"));
        assert_eq!(sink_kind("nats://h/s"), Some("nats"));
        assert_eq!(sink_kind("amqp://h/%2f?queue=q"), Some("amqp"));
        assert_eq!(sink_kind("kafka://h"), None);
        assert_eq!(sink_kind(""), None);
    }

    #[tokio::test]
    async fn a_url_that_names_no_sink_is_refused_at_start() {
        let policy = RelayPolicy::default();
        for url in ["", "receipts", "kafka://broker:9092/topic"] {
            let refused = connect_sink(url, &policy).await.err();
            assert!(matches!(refused, Some(SinkError::Setup(_))), "{url}");
        }
        assert!(connect_sink("log", &policy).await.is_ok());
    }

    #[cfg(feature = "nats")]
    #[test]
    fn nats_urls_split_into_server_and_subject() {
        assert_eq!(
            split_path("nats://u:p@h:4222/orders.created"),
            ("nats://u:p@h:4222", "orders.created")
        );
        assert_eq!(split_path("nats://h:4222"), ("nats://h:4222", ""));
    }
}
