//! `TwilioSigner`: signs as Twilio does, for tests and `hookbox sign`.

use std::fmt;

use hookbox_core::{Secrets, SignedHeaders, Signer, VerifyError};

use crate::consts::{CONTENT_TYPE, FORM, IDEMPOTENCY_TOKEN, JSON, SIGNATURE, SIGNATURE_SETTINGS};
use crate::mac::{Algorithm, Content, Kind, Prepared};
use crate::url::PublicUrl;
#[cfg(doc)]
use crate::url::body_sha256_query;
use crate::verify::check_secrets;

/// What [`TwilioSigner::with_sha256`] names in its `key=`: verification never reads it.
const SIGNER_SHARED_KEY: &str = "hookbox-test-shared-key";

/// Signs webhooks exactly as Twilio does, for tests and `hookbox send`.
///
/// A body that starts with `{` or `[` (after whitespace) is sent as `application/json`
/// and signed through `bodySHA256` (the sender must append [`body_sha256_query`] to the
/// URL it requests, as Twilio does); any other body is sent as a form and its
/// parameters are signed.
#[derive(Clone)]
pub struct TwilioSigner {
    prepared: Prepared,
    algorithm: Algorithm,
}

impl TwilioSigner {
    /// Signs with `auth_token` (HMAC-SHA1, as Twilio signs with an account's Auth
    /// Token) for the public URL `url`.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when the token is blank;
    /// [`VerifyError::InvalidConfig`] when `url` is not an absolute `http(s)://` URL.
    pub fn new(auth_token: &str, url: impl AsRef<str>) -> Result<Self, VerifyError> {
        check_secrets(&Secrets::from(auth_token))?;
        let url = PublicUrl::parse(url.as_ref())?;
        Ok(Self {
            prepared: Prepared::new(auth_token.as_bytes(), &url.url),
            algorithm: Algorithm::HmacSha1,
        })
    }

    /// Signs with HMAC-SHA256 and sends `X-Twilio-Webhooks-Signature-Settings`, as
    /// Twilio does for a Webhook Setting with a SharedKey (whose secret is then the
    /// token given to [`TwilioSigner::new`]).
    pub fn with_sha256(mut self) -> Self {
        self.algorithm = Algorithm::HmacSha256;
        self
    }
}

impl fmt::Debug for TwilioSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TwilioSigner")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl Signer for TwilioSigner {
    /// Signs `body` as request `id` (the `I-Twilio-Idempotency-Token`); `timestamp` is
    /// unused because Twilio signs none.
    fn sign(&self, id: &str, _timestamp: i64, body: &[u8]) -> SignedHeaders {
        let kind = Kind::of_body(body);
        let signature = self
            .prepared
            .sign(self.algorithm, &Content::read(kind, body));
        let mut headers = SignedHeaders::default();
        headers.push(
            CONTENT_TYPE.label(),
            match kind {
                Kind::Form => FORM,
                Kind::Json => JSON,
            },
        );
        headers.push(IDEMPOTENCY_TOKEN.label(), id);
        headers.push(SIGNATURE.label(), signature.as_str());
        if self.algorithm == Algorithm::HmacSha256 {
            headers.push(
                SIGNATURE_SETTINGS.label(),
                format!("key={SIGNER_SHARED_KEY},algorithm=HMAC_SHA256"),
            );
        }
        headers
    }
}
