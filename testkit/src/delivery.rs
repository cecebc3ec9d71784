//! Sending signed deliveries and reading answers: the request a delivery is, the
//! exchange with a deadline, [`Sender`] and [`Answer`].

use hookbox_core::bytes::Bytes;
use hookbox_core::http::Request;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{SignedHeaders, Signer};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;

use crate::common::DEADLINE;

/// The POST of `body` with `headers` to `path` on `base`.
pub(crate) fn signed_post(
    base: &str,
    path: &str,
    headers: &SignedHeaders,
    body: &[u8],
) -> Request<Full<Bytes>> {
    let mut request = Request::post(format!("{base}{path}"));
    for (name, value) in headers.iter() {
        request = request.header(name, value);
    }
    request
        .body(Full::new(Bytes::copy_from_slice(body)))
        .expect("a valid request")
}

/// Sends `request` and reads the whole answer, within [`DEADLINE`].
pub(crate) async fn exchange(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    request: Request<Full<Bytes>>,
) -> Result<Answer, String> {
    let answer = tokio::time::timeout(DEADLINE, async {
        let response = client.request(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>((status, body))
    })
    .await;
    match answer {
        Ok(Ok((status, body))) => Ok(Answer {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
        }),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err(format!("no answer within {DEADLINE:?}")),
    }
}

/// Sends signed deliveries to a running example from any task
/// ([`Example::sender`](crate::Example::sender)).
#[derive(Debug, Clone)]
pub struct Sender {
    pub(crate) url: String,
    pub(crate) client: Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
}

impl Sender {
    /// [`Example::send`](crate::Example::send) that returns the failure instead of panicking: a request
    /// to a process that is being killed gets no answer.
    ///
    /// # Errors
    /// No answer came (the connection was refused or cut), or none within
    /// [`DEADLINE`].
    pub async fn try_send(
        &self,
        path: &str,
        signer: &dyn Signer,
        id: &str,
        body: &[u8],
    ) -> Result<Answer, String> {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let headers = signer.sign(id, now, body);
        exchange(&self.client, signed_post(&self.url, path, &headers, body)).await
    }
}

/// What an example answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The body, as text.
    pub body: String,
}

impl Answer {
    /// Returns the body's `outcome` (`stored`, `duplicate`) for a 2xx, or its `error`
    /// kind (`signature_mismatch`, …) for a refusal; empty when the body has neither.
    pub fn outcome(&self) -> String {
        let json: serde_json::Value = serde_json::from_str(&self.body).unwrap_or_default();
        json["outcome"]
            .as_str()
            .or_else(|| json["error"].as_str())
            .unwrap_or_default()
            .to_owned()
    }
}
