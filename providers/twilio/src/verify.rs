//! `Twilio` and its `Provider` implementation: the headers, the signature, then the dedupe key.

use std::fmt;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::support::{HeaderSpec, Spelling, base64_spelling, scan};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    DedupeKey, DeliveryParts, KeptHeaders, Provider, Retention, Secrets, VerifiedDelivery,
    VerifyError, VerifyOptions,
};

use crate::consts::{
    BODY_SHA256, CONTENT_TYPE, FORM, IDEMPOTENCY_TOKEN, MIN_RETENTION, NAME, SIGNATURE,
    SIGNATURE_SETTINGS,
};
use crate::form::Params;
use crate::mac::{Algorithm, Content, Kind, Prepared, signature_shape};
use crate::url::{PublicUrl, body_hash_hex, url_variants};

// a `HeaderSpec` holds a `Bytes` (interior mutability), so a const is not promoted to
// a `'static` borrow: scans borrow these statics instead
static SIGNATURE_HEADER: HeaderSpec = SIGNATURE;
static SETTINGS_HEADER: HeaderSpec = SIGNATURE_SETTINGS;
static TOKEN_HEADER: HeaderSpec = IDEMPOTENCY_TOKEN;
static CONTENT_TYPE_HEADER: HeaderSpec = CONTENT_TYPE;

/// Checks that secrets are configured and none is blank.
pub(crate) fn check_secrets(secrets: &Secrets) -> Result<(), VerifyError> {
    if secrets.is_empty() {
        return Err(VerifyError::invalid_secret(
            "no Twilio auth token configured",
        ));
    }
    if secrets
        .iter()
        .any(|secret| secret.expose().trim().is_empty())
    {
        return Err(VerifyError::invalid_secret(
            "a Twilio auth token is blank; copy the Auth Token from the Twilio console (or the SharedKey's secret)",
        ));
    }
    Ok(())
}

/// Verifies Twilio webhooks.
#[derive(Clone)]
pub struct Twilio {
    url: PublicUrl,
    secrets: Secrets,
    /// For each spelling of the URL (as configured first), one entry per secret.
    prepared: Vec<Prepared>,
    options: VerifyOptions,
}

impl Twilio {
    /// Accepts webhooks Twilio signed for `url` with any of `auth_tokens`: the
    /// account's Auth Token (the primary and, while rotating, the secondary one) and
    /// the secret of any SharedKey a Webhook Setting signs with.
    ///
    /// `url` is the full URL Twilio calls, as entered in the Twilio console, query
    /// string included: what Twilio signed, whatever address the request reached.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no token is given or one is blank;
    /// [`VerifyError::InvalidConfig`] when `url` is not an absolute `http(s)://` URL
    /// or already carries `bodySHA256`.
    pub fn new(auth_tokens: impl Into<Secrets>, url: impl AsRef<str>) -> Result<Self, VerifyError> {
        let secrets = auth_tokens.into();
        check_secrets(&secrets)?;
        let url = PublicUrl::parse(url.as_ref())?;
        let prepared = url
            .spellings()
            .flat_map(|spelling| {
                secrets
                    .iter()
                    .map(move |secret| Prepared::new(secret.expose().as_bytes(), spelling))
            })
            .collect();
        Ok(Self {
            url,
            secrets,
            prepared,
            options: VerifyOptions::default(),
        })
    }

    /// Replaces the default options (body limit, source name); Twilio signs no
    /// timestamp, so the tolerance is not used.
    pub fn with_options(mut self, options: VerifyOptions) -> Self {
        self.options = options;
        self
    }

    /// Returns the public URL signatures are checked against, without its fragment.
    pub fn public_url(&self) -> &str {
        &self.url.url
    }

    /// Explains why no secret's MAC over any spelling of the URL matched; runs only on
    /// the failure path, so its extra MACs cost nothing on valid deliveries.
    fn mismatch(
        &self,
        algorithm: Algorithm,
        content: &Content<'_>,
        body: &[u8],
        signature: &str,
    ) -> String {
        let matches = |secret: &str, url: &str, content: &Content<'_>| {
            Prepared::new(secret.as_bytes(), url)
                .sign(algorithm, content)
                .matches(signature)
        };
        let several = self.secrets.len() > 1;
        for (i, secret) in self.secrets.iter().enumerate() {
            let secret = secret.expose();
            if secret.trim() != secret && matches(secret.trim(), &self.url.url, content) {
                let nth = if several {
                    format!("auth token #{}", i + 1)
                } else {
                    "the auth token".to_string()
                };
                return format!(
                    "{nth} has leading or trailing whitespace (a newline from a file or an environment variable?); remove it"
                );
            }
        }
        let any_secret = |url: &str, content: &Content<'_>| {
            self.secrets
                .iter()
                .any(|secret| matches(secret.expose(), url, content))
        };
        for (url, change) in url_variants(&self.url.url) {
            if any_secret(&url, content) {
                return format!(
                    "the signature matches the public URL {change}: Twilio called another URL than the one configured; set the public URL to exactly the URL in the Twilio console (scheme, host, port, path and query)"
                );
            }
        }
        match content {
            Content::Form(_) => {
                if any_secret(&self.url.url, &Content::Json(body_hash_hex(body))) {
                    return format!(
                        "the signature covers `{BODY_SHA256}=` as for a JSON body, but the request says `Content-Type: {FORM}`; pass the request's own Content-Type through unchanged"
                    );
                }
            }
            Content::Json(_) => {
                if any_secret(&self.url.url, &Content::Form(Params::default())) {
                    return format!(
                        "the signature covers the public URL without `{BODY_SHA256}=`: for a JSON body Twilio signs the URL with `{BODY_SHA256}=<SHA-256 of the body>` appended; was the body signed as a form?"
                    );
                }
            }
        }
        let tried = self.secrets.len();
        let what = if algorithm == Algorithm::HmacSha256 {
            "SharedKey secret or auth token"
        } else {
            "auth token"
        };
        let body_hint = match content {
            Content::Form(_) => {
                "or the form parameters changed before verification (re-encoded, trimmed)"
            }
            Content::Json(_) => {
                "or the body changed since Twilio hashed it into `bodySHA256` (verify the raw bytes exactly as received)"
            }
        };
        format!(
            "no configured {what} ({tried} tried) matches: the token belongs to another account or subaccount (or is a secondary token, or the SharedKey is not configured), or the public URL is not exactly the URL Twilio called, {body_hint}"
        )
    }
}

impl fmt::Debug for Twilio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Twilio")
            .field("url", &self.url.redacted())
            .field("secrets", &self.secrets)
            .field("options", &self.options)
            .finish()
    }
}

impl Provider for Twilio {
    fn name(&self) -> &'static str {
        NAME
    }

    fn min_retention(&self) -> Retention {
        MIN_RETENTION
    }

    fn options(&self) -> &VerifyOptions {
        &self.options
    }

    fn verify(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        _now: OffsetDateTime,
    ) -> Result<VerifiedDelivery, VerifyError> {
        self.options.check_body(&body)?;
        let [signature, settings, content_type, token] = scan(
            headers,
            [
                &SIGNATURE_HEADER,
                &SETTINGS_HEADER,
                &CONTENT_TYPE_HEADER,
                &TOKEN_HEADER,
            ],
        );
        let mut kept = KeptHeaders::with_capacity(4);
        let signature = signature.take_required(&mut kept)?;
        let algorithm = Algorithm::from_settings(settings.take(&mut kept)?)?;
        let kind = Kind::from_content_type(content_type.take_required(&mut kept)?)?;
        let token = token.take(&mut kept)?;
        // a value of the wrong length is explained before any MAC; one of the right
        // length is compared first and explained only when it does not match
        let text_len = 4 * algorithm.len().div_ceil(3);
        if signature.len() != text_len {
            return Err(signature_shape(algorithm, signature));
        }

        let content = Content::read(kind, &body);
        let matched = self
            .prepared
            .iter()
            .any(|prepared| prepared.sign(algorithm, &content).matches(signature));
        if !matched {
            return Err(match base64_spelling(signature, algorithm.len()) {
                Spelling::Canonical => VerifyError::SignatureMismatch {
                    hint: self.mismatch(algorithm, &content, &body, signature),
                },
                _ => signature_shape(algorithm, signature),
            });
        }

        let Some(token) = token else {
            return Err(VerifyError::MissingDedupeKey {
                field: format!(
                    "the `{}` header (Twilio sends it with every request)",
                    IDEMPOTENCY_TOKEN.label()
                ),
            });
        };
        let key = DedupeKey::new(self.options.source_or(NAME), NAME, token);
        Ok(VerifiedDelivery::from_parts(DeliveryParts {
            key,
            body,
            headers: kept,
            event_type: None,
            correlation_id: None,
            signed_at: None,
        }))
    }
}
