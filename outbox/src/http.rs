//! [`HttpSink`]: POST each message, with its id as the `Idempotency-Key` header.

use std::time::Duration;

use hookbox_core::{BoxFuture, OutboxMessage};
use reqwest::StatusCode;
use reqwest::header::{HeaderName, HeaderValue};

use crate::{Sink, SinkError};

/// The header that carries [`OutboxMessage::id`], the name Stripe, Adyen and the
/// IETF draft use for a request's idempotency key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The header that carries [`OutboxMessage::attempts`] (1 on the first send), so a
/// downstream can tell a resend in its logs.
pub const ATTEMPT: &str = "hookbox-attempt";

/// Sends each message as an HTTP POST: the payload as the body, the message's
/// headers, `Idempotency-Key: <message id>` and `Hookbox-Attempt: <n>`.
///
/// The answer decides the outcome: 2xx is sent; 408, 409 and 429 and every 5xx are
/// retried (409 is what an idempotent API answers while the same key is still in
/// flight); any other 4xx is permanent and the message becomes a dead letter; a
/// connection failure or a timeout is retried.
#[derive(Debug, Clone)]
pub struct HttpSink {
    client: reqwest::Client,
    url: reqwest::Url,
}

impl HttpSink {
    /// The longest one request may take by default; the relay's lease outlasts it.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

    /// A sink that POSTs to `url` with a client of its own (rustls with the webpki
    /// roots, [`HttpSink::DEFAULT_TIMEOUT`] per request).
    ///
    /// # Errors
    /// [`SinkError::Setup`] when `url` is not an `http` or `https` URL or the TLS
    /// client cannot be built.
    pub fn new(url: &str) -> Result<Self, SinkError> {
        let client = reqwest::Client::builder()
            .timeout(Self::DEFAULT_TIMEOUT)
            .build()
            .map_err(|err| SinkError::Setup(format!("the HTTP client: {err}")))?;
        Self::with_client(client, url)
    }

    /// A sink that POSTs to `url` with `client` (your timeouts, proxy, root
    /// certificates).
    ///
    /// # Errors
    /// [`SinkError::Setup`] when `url` is not an `http` or `https` URL.
    pub fn with_client(client: reqwest::Client, url: &str) -> Result<Self, SinkError> {
        let url = reqwest::Url::parse(url)
            .map_err(|err| SinkError::Setup(format!("the sink URL `{url}`: {err}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(SinkError::Setup(format!(
                "the sink URL `{url}` is not http or https"
            )));
        }
        Ok(Self { client, url })
    }

    /// Returns the URL it posts to.
    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }
}

impl Sink for HttpSink {
    fn send<'a>(&'a self, message: &'a OutboxMessage) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            let mut request = self.client.post(self.url.clone());
            for (name, value) in message.headers.iter() {
                request = request.header(name, value);
            }
            let key = HeaderValue::from_str(message.id.as_str())
                .map_err(|err| SinkError::Permanent(format!("message id as a header: {err}")))?;
            let response = request
                .header(HeaderName::from_static(IDEMPOTENCY_KEY), key)
                .header(HeaderName::from_static(ATTEMPT), message.attempts)
                .body(message.payload.clone())
                .send()
                .await
                .map_err(|err| SinkError::Temporary(transport_error(&err)))?;
            outcome(response.status())
        })
    }

    fn kind(&self) -> &'static str {
        "http"
    }
}

/// Maps an answer's status to the relay's outcome.
fn outcome(status: StatusCode) -> Result<(), SinkError> {
    if status.is_success() {
        return Ok(());
    }
    let text = format!("the sink answered {status}");
    let retryable = matches!(
        status,
        StatusCode::REQUEST_TIMEOUT | StatusCode::CONFLICT | StatusCode::TOO_MANY_REQUESTS
    );
    if status.is_client_error() && !retryable {
        Err(SinkError::Permanent(text))
    } else {
        Err(SinkError::Temporary(text))
    }
}

/// The error and its causes: reqwest's own text is often just "error sending
/// request".
fn transport_error(err: &reqwest::Error) -> String {
    hookbox_core::error_chain(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_sent_retry_or_dead() {
        assert_eq!(outcome(StatusCode::OK), Ok(()));
        assert_eq!(outcome(StatusCode::ACCEPTED), Ok(()));
        for retry in [408, 409, 429, 500, 502, 503] {
            let status = StatusCode::from_u16(retry).unwrap();
            assert!(
                matches!(outcome(status), Err(SinkError::Temporary(_))),
                "{retry} is retried"
            );
        }
        for dead in [400, 401, 403, 404, 410, 422] {
            let status = StatusCode::from_u16(dead).unwrap();
            assert!(
                matches!(outcome(status), Err(SinkError::Permanent(_))),
                "{dead} is permanent"
            );
        }
        // a redirect is not followed into a success: retry, an operator will look
        assert!(matches!(
            outcome(StatusCode::MOVED_PERMANENTLY),
            Err(SinkError::Temporary(_))
        ));
    }

    #[test]
    fn only_http_urls_are_sinks() {
        assert!(HttpSink::new("https://receipts.example.com/send").is_ok());
        assert!(matches!(
            HttpSink::new("ftp://example.com"),
            Err(SinkError::Setup(_))
        ));
        assert!(matches!(
            HttpSink::new("not a url"),
            Err(SinkError::Setup(_))
        ));
    }
}
