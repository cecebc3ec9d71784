//! GitLab webhooks for hookbox.
//!
//! | fact | value | source |
//! |---|---|---|
//! | secret token | `X-Gitlab-Token`: the token set on the webhook, sent verbatim (line breaks removed) with every request, and only when one is set | [Webhooks, "Create a webhook"](https://docs.gitlab.com/user/project/integrations/webhooks/#create-a-webhook); `WebHookService#build_headers` in `app/services/web_hook_service.rb` |
//! | what a secret token proves | that the sender knows the token, nothing about the body: it is no signature | same; [issue #19367](https://gitlab.com/gitlab-org/gitlab/-/issues/19367) |
//! | signing token | Standard Webhooks `v1`: `webhook-signature: v1,<base64 HMAC-SHA256>` over `"{webhook-id}.{webhook-timestamp}.{raw body}"`, keyed with the base64 after `whsec_` (a 32-byte key); `webhook-id` is the `Idempotency-Key` value | [merge request !230944](https://gitlab.com/gitlab-org/gitlab/-/merge_requests/230944), [!231325](https://gitlab.com/gitlab-org/gitlab/-/merge_requests/231325) |
//! | signing token availability | new in 2026 (not in the GitLab 18.10 documentation), behind the feature flag `webhook_signing_token` during its rollout; a secret token, when one is set, is still sent beside the signature | [rollout issue #596374](https://gitlab.com/gitlab-org/gitlab/-/issues/596374), !230944; `build_headers` |
//! | dedupe key | `Idempotency-Key` (GitLab 17.4 and later): "Unique ID consistent across webhook retries"; **Resend Request** sends "the same data and the same `Idempotency-Key` header", as does the API's resend | [Webhooks, "Delivery headers"](https://docs.gitlab.com/user/project/integrations/webhooks/#delivery-headers), ["Inspect request and response details"](https://docs.gitlab.com/user/project/integrations/webhooks/#inspect-request-and-response-details); `WebHooks::Events::ResendService` |
//! | dedupe key before 17.4 | `X-Gitlab-Event-UUID`: "Unique ID for non-recursive webhooks. Recursive webhooks (triggered by earlier webhooks) share the same value". Not documented as kept on a resend, and it is not: it is made per request (or taken from the request that triggered the webhook) | "Delivery headers"; `Gitlab::WebHooks::RecursionDetection::UUID` |
//! | never a dedupe key | `X-Gitlab-Webhook-UUID`: "Unique ID for each webhook", a fresh `SecureRandom.uuid` for every request, so two attempts of one event never share it | "Delivery headers"; `build_headers` |
//! | event type | `X-Gitlab-Event`: `"<EVENT> Hook"`, such as `Push Hook` | "Delivery headers" |
//! | timestamp | none with a secret token alone: there is no replay window to check. With a signing token, `webhook-timestamp` (Unix seconds), checked within 300 s both ways by default | !230944 |
//! | retention minimum | 7 days: the events API lists a webhook's events of "the past 7 days", each of which can be resent with its `Idempotency-Key` (**Recent events** in the UI: two days). GitLab does not retry on its own: a failed request is logged and counted, and 4 consecutive failures disable the webhook for a while (1 minute, growing to 24 hours), 40 for good | [Project webhooks API](https://docs.gitlab.com/api/project_webhooks/#get-a-list-of-project-webhook-events), ["Auto-disabled webhooks"](https://docs.gitlab.com/user/project/integrations/webhooks/#auto-disabled-webhooks); `WebHookService#execute` logs HTTP errors and returns |
//!
//! # Secret tokens sign nothing
//! A secret token is a password that GitLab sends in clear text with every request. It
//! tells a receiver that the sender knew the token; it does not cover the body, the
//! event type or the delivery id. Whoever learns the token (from a log line, a proxy,
//! a leaked configuration, a receiver that echoes headers) can send any body as
//! GitLab, for as long as the token stays the same, and can replay a captured
//! request at any time. Serve the endpoint over TLS only, keep the token out of logs,
//! and, where your GitLab has them, prefer signing tokens: their signature covers the
//! id, the time and the raw body, so a captured request is useless after the
//! tolerance and a changed one fails. The token is compared in constant time with
//! every configured token (several during a rotation); only its length is public,
//! as in every constant-time comparison of this kind.
//!
//! # Signing tokens
//! [`GitLab::signed`] verifies signing tokens only; [`GitLab::with_signing_secrets`]
//! adds them to secret tokens, and then both must pass. The signature is checked by
//! [`hookbox_standard`] exactly as for any Standard Webhooks sender (`v1` only:
//! GitLab signs with HMAC), then the timestamp window ([`VerifyOptions::tolerance`],
//! 300 s by default).
//!
//! - **Configured for signatures, request unsigned**: refused with
//!   [`VerifyError::SignatureMismatch`], even when its `X-Gitlab-Token` is right. A
//!   request that carries none of `webhook-id`, `webhook-timestamp` and
//!   `webhook-signature` is what a forger holding only the secret token would send;
//!   letting it fall back to the token would undo what the signature adds. A request
//!   that carries some of the three but not all is a
//!   [`VerifyError::MissingHeader`] naming the one missing.
//! - **Configured for tokens only, request signed**: the token is checked and the
//!   signing headers are ignored (neither verified nor kept): without the signing
//!   token there is nothing to verify them with. Configure it to have them checked.
//!
//! To move a webhook to signing tokens: add the signing token in GitLab first (GitLab
//! then sends both), then configure the receiver with
//! [`with_signing_secrets`](GitLab::with_signing_secrets); once the secret token is
//! removed in GitLab, switch to [`GitLab::signed`].
//!
//! # The dedupe key
//! With a signature, the key is `webhook-id`, which is signed (a replay inside the
//! window cannot change it) and which GitLab sets to the `Idempotency-Key`, so keys
//! stay the same when a receiver moves between the two configurations. With a
//! secret token, the key is `Idempotency-Key`, else `X-Gitlab-Event-UUID` (GitLab
//! before 17.4, which sends no `Idempotency-Key`); with neither, the delivery is a
//! [`VerifyError::MissingDedupeKey`]. The fallback is weaker, and the receiver of an
//! older GitLab should know how: a resend gets a new `X-Gitlab-Event-UUID` (it is made
//! per request), so the fallback catches a request delivered twice (by a proxy, a load
//! balancer) but not a resend; and every webhook of a recursive chain (a receiver that
//! calls GitLab's API with the header, triggering the next webhook) carries the same
//! value, so such deliveries to one receiver dedupe as one. `X-Gitlab-Webhook-UUID`
//! changes on every request and is never used.
//!
//! # Order of the checks, and what is kept
//! Verification checks, in order: the body size; the shapes of GitLab's own headers
//! (the dedupe key's, `X-Gitlab-Event`, `X-Gitlab-Token`); the secret token; with
//! signing tokens, the signing headers' shapes, the signature and the timestamp
//! window; without them, last, that a dedupe key came. The body is never parsed:
//! GitLab's event type and ids are all headers.
//!
//! The headers kept for a later verification (an inbox stores them beside the body)
//! are the three signing headers, as `hookbox-standard` keeps them, or else the dedupe
//! key's header; the event type is kept on its own ([`VerifiedDelivery::event_type`]).
//! `X-Gitlab-Token` is never kept: it is the secret itself. So a stored delivery
//! verifies again only with [`GitLab::signed`]; a token-only delivery carries nothing
//! that could be verified later.
//!
//! # Examples
//! The headers of GitLab's documented push delivery, with a secret token:
//! ```
//! use hookbox_core::{Provider, http::HeaderMap, time::OffsetDateTime};
//! use hookbox_gitlab::GitLab;
//!
//! let gitlab = GitLab::new("my-secret-token")?;
//! let mut headers = HeaderMap::new();
//! headers.insert("X-Gitlab-Token", "my-secret-token".parse()?);
//! headers.insert("X-Gitlab-Event", "Push Hook".parse()?);
//! headers.insert("X-Gitlab-Webhook-UUID", "02affd2d-2cba-4033-917d-ec22d5dc4b38".parse()?);
//! headers.insert("X-Gitlab-Event-UUID", "13792a34-cac6-4fda-95a8-c58e00a3954e".parse()?);
//! headers.insert("Idempotency-Key", "f5e5f430-f57b-4e6e-9fac-d9128cd7232f".parse()?);
//!
//! let body = r#"{"object_kind":"push","ref":"refs/heads/main"}"#;
//! let delivery = gitlab.verify(&headers, body.into(), OffsetDateTime::now_utc())?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "f5e5f430-f57b-4e6e-9fac-d9128cd7232f");
//! assert_eq!(delivery.event_type(), Some("Push Hook"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! With a signing token as well, an unsigned request is refused even with the right
//! secret token; sign test deliveries with [`GitLabSigner`]:
//! ```
//! use hookbox_core::{Provider, Signer, time::OffsetDateTime};
//! use hookbox_gitlab::{GitLab, GitLabSigner};
//!
//! let signing_token = "whsec_dGVzdHRlc3R0ZXN0dGVzdHRlc3R0ZXN0dGVzdHRlc3Q=";
//! let gitlab = GitLab::new("my-secret-token")?.with_signing_secrets(signing_token)?;
//! let now = OffsetDateTime::now_utc();
//! let body = br#"{"object_kind":"push"}"#;
//!
//! let signer = GitLabSigner::new("my-secret-token")?.with_signing_secrets(signing_token)?;
//! let headers = signer.sign("f5e5f430-f57b-4e6e-9fac-d9128cd7232f", now.unix_timestamp(), body);
//! let delivery = gitlab.verify(&headers.to_header_map(), body.as_slice().into(), now)?;
//! assert_eq!(delivery.signed_at().map(|t| t.unix_timestamp()), Some(now.unix_timestamp()));
//!
//! let unsigned = GitLabSigner::new("my-secret-token")?.sign("f5e5f430", 0, body);
//! let err = gitlab.verify(&unsigned.to_header_map(), body.as_slice().into(), now).unwrap_err();
//! assert_eq!(err.kind(), "signature_mismatch");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

use std::fmt;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::support::{HeaderSpec, first_found, macs_equal, scan};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    DedupeKey, DeliveryParts, DeliveryText, KeptHeaders, Provider, Retention, Secrets,
    SignedHeaders, Signer, VerifiedDelivery, VerifyError, VerifyOptions,
};
use hookbox_standard::{Scheme, Standard, StandardSigner};

/// The provider's name in dedupe keys and `hookbox verify --provider`.
pub const NAME: &str = "gitlab";

/// Keys must outlive the 7 days in which GitLab's events API lists a delivery that
/// can be resent with its `Idempotency-Key`.
pub const MIN_RETENTION: Retention = Retention::from_days(7);

/// `X-Gitlab-Token`: the webhook's secret token, verbatim.
pub const TOKEN: HeaderSpec = HeaderSpec::new("X-Gitlab-Token", "x-gitlab-token");
/// `X-Gitlab-Event`: the event type (`Push Hook`, `Merge Request Hook`, …).
pub const EVENT: HeaderSpec = HeaderSpec::new("X-Gitlab-Event", "x-gitlab-event");
/// `Idempotency-Key`: kept on every retry and resend (GitLab 17.4 and later); the
/// dedupe key of deliveries verified by their secret token.
pub const IDEMPOTENCY_KEY: HeaderSpec = HeaderSpec::new("Idempotency-Key", "idempotency-key");
/// `X-Gitlab-Event-UUID`: the dedupe key when GitLab sends no `Idempotency-Key`
/// (before 17.4); shared by the webhooks of one recursive chain.
pub const EVENT_UUID: HeaderSpec = HeaderSpec::new("X-Gitlab-Event-UUID", "x-gitlab-event-uuid");
/// `X-Gitlab-Webhook-UUID`: new on every request, so never read: two attempts of one
/// event carry different values.
pub const WEBHOOK_UUID: HeaderSpec =
    HeaderSpec::new("X-Gitlab-Webhook-UUID", "x-gitlab-webhook-uuid");

// a `HeaderSpec` holds a `Bytes` (interior mutability), so a const is not promoted to
// a `'static` borrow: scans and the scheme borrow these statics instead
static TOKEN_HEADER: HeaderSpec = TOKEN;
static EVENT_HEADER: HeaderSpec = EVENT;
static IDEMPOTENCY_KEY_HEADER: HeaderSpec = IDEMPOTENCY_KEY;
static EVENT_UUID_HEADER: HeaderSpec = EVENT_UUID;
static SIGNED_ID_HEADER: HeaderSpec = hookbox_standard::ID;
static SIGNED_TIMESTAMP_HEADER: HeaderSpec = hookbox_standard::TIMESTAMP;
static SIGNATURE_HEADER: HeaderSpec = hookbox_standard::SIGNATURE;

/// GitLab's signing tokens: Standard Webhooks under its own header names
/// (`webhook-id`, `webhook-timestamp`, `webhook-signature`), `v1` HMAC only, keys
/// named `gitlab`.
pub const SIGNING_SCHEME: Scheme = Scheme {
    name: NAME,
    id: &[&SIGNED_ID_HEADER],
    timestamp: &[&SIGNED_TIMESTAMP_HEADER],
    signature: &[&SIGNATURE_HEADER],
    min_retention: MIN_RETENTION,
    ed25519: false,
};

/// What a receiver configured for signatures says of a request without them.
const UNSIGNED: &str = "the request carries none of `webhook-signature`, `webhook-id` and `webhook-timestamp`, and this receiver verifies GitLab signing tokens: GitLab sends all three from a webhook that has a signing token. A request without them is refused even when its `X-Gitlab-Token` is right, so that a leaked secret token cannot forge deliveries: add the signing token to the webhook in GitLab, or configure this receiver without signing tokens";

/// Where the dedupe key of a token-verified delivery lives, as
/// [`VerifyError::MissingDedupeKey`] names it.
const KEY_HEADERS: &str =
    "header `Idempotency-Key` (GitLab 17.4 and later), or else `X-Gitlab-Event-UUID`,";

/// Verifies GitLab webhooks: their secret token, their signing-token signature, or
/// both.
#[derive(Debug, Clone)]
pub struct GitLab {
    /// The secret tokens `X-Gitlab-Token` may hold; empty when only signatures count.
    tokens: Secrets,
    /// The signature verifier, when signing tokens are configured.
    signing: Option<Standard>,
    options: VerifyOptions,
}

impl GitLab {
    /// Accepts requests whose `X-Gitlab-Token` is any of `tokens`: the webhook's
    /// secret token (several during a rotation).
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no token is given, or one is blank, holds a
    /// line break, starts or ends with whitespace, or has a character that is not
    /// printable ASCII (such a token could never arrive as sent).
    pub fn new(tokens: impl Into<Secrets>) -> Result<Self, VerifyError> {
        let tokens = tokens.into();
        check_tokens(&tokens)?;
        Ok(Self {
            tokens,
            signing: None,
            options: VerifyOptions::default(),
        })
    }

    /// Accepts requests signed with any of `signing_tokens` (`whsec_…`, several during a
    /// rotation), whatever their `X-Gitlab-Token`.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no signing token is given, or one is blank,
    /// holds whitespace, does not decode from base64, or is an ed25519 key (GitLab signs
    /// with HMAC only).
    pub fn signed(signing_tokens: impl Into<Secrets>) -> Result<Self, VerifyError> {
        Self {
            tokens: Secrets::default(),
            signing: None,
            options: VerifyOptions::default(),
        }
        .with_signing_secrets(signing_tokens)
    }

    /// Requires a signature by any of `signing_tokens` (`whsec_…`), besides the secret
    /// token where one is configured, replacing any signing tokens configured before.
    /// A request without a signature is then refused, whatever its `X-Gitlab-Token`.
    ///
    /// # Errors
    /// As [`GitLab::signed`].
    pub fn with_signing_secrets(
        mut self,
        signing_tokens: impl Into<Secrets>,
    ) -> Result<Self, VerifyError> {
        let signing_tokens = signing_tokens.into();
        if signing_tokens.is_empty() {
            return Err(VerifyError::invalid_secret(
                "no signing token configured; give the webhook's signing token (`whsec_…`), as GitLab shows it when it is generated",
            ));
        }
        self.signing = Some(
            Standard::with_scheme(SIGNING_SCHEME, signing_tokens)?
                .with_options(self.options.clone()),
        );
        Ok(self)
    }

    /// Replaces the default options (tolerance of signed timestamps, body limit,
    /// source name).
    pub fn with_options(mut self, options: VerifyOptions) -> Self {
        self.signing = self
            .signing
            .map(|standard| standard.with_options(options.clone()));
        self.options = options;
        self
    }

    /// Returns `true` when requests must carry a valid signing-token signature.
    pub fn requires_signature(&self) -> bool {
        self.signing.is_some()
    }

    /// Compares the received token with every configured one, in constant time.
    fn check_token(&self, received: &str) -> Result<(), VerifyError> {
        // every token is compared: which one matched is not leaked
        let matched = self.tokens.iter().fold(false, |matched, token| {
            matched | macs_equal(token.expose().as_bytes(), received.as_bytes())
        });
        if matched {
            return Ok(());
        }
        Err(VerifyError::SignatureMismatch {
            hint: self.token_hint(),
        })
    }

    /// Explains a token that matched none: never the token, nor a configured one.
    fn token_hint(&self) -> String {
        let tried = self.tokens.len();
        if self
            .tokens
            .iter()
            .any(|token| token.expose().starts_with("whsec_"))
        {
            return format!(
                "`X-Gitlab-Token` matches none of the {tried} configured secret token(s), and one of them starts with `whsec_`, as a signing token does: GitLab never sends a signing token in `X-Gitlab-Token`. Configure it with `GitLab::signed` or `with_signing_secrets`, and `GitLab::new` with the webhook's secret token"
            );
        }
        format!(
            "`X-Gitlab-Token` matches none of the {tried} configured secret token(s); GitLab sends the webhook's secret token verbatim, so the token belongs to another webhook or was changed in GitLab (changing a webhook's URL resets its secret token)"
        )
    }
}

/// Refuses a set of secret tokens that could never match.
fn check_tokens(tokens: &Secrets) -> Result<(), VerifyError> {
    if tokens.is_empty() {
        return Err(VerifyError::invalid_secret(
            "no secret token configured; give the secret token set on the GitLab webhook (sent in `X-Gitlab-Token`), or build the receiver with `GitLab::signed` for signing tokens",
        ));
    }
    for (i, token) in tokens.iter().enumerate() {
        if let Some(reason) = token_problem(token.expose()) {
            return Err(VerifyError::invalid_secret(if tokens.len() > 1 {
                format!("secret token #{} {reason}", i + 1)
            } else {
                format!("the secret token {reason}")
            }));
        }
    }
    Ok(())
}

/// Returns why `token` could never arrive in `X-Gitlab-Token` as written.
fn token_problem(token: &str) -> Option<&'static str> {
    if token.trim().is_empty() {
        return Some("is blank; copy the webhook's secret token from GitLab (Settings > Webhooks)");
    }
    if token.contains(['\r', '\n']) {
        return Some(
            "contains a line break (from a file or an environment variable?); GitLab removes line breaks before it sends the token, so it could never match: remove it",
        );
    }
    if token.trim() != token {
        return Some(
            "starts or ends with whitespace, which HTTP drops from a header value, so it could never match: remove it",
        );
    }
    if !token
        .bytes()
        .all(|b| b == b' ' || b == b'\t' || b.is_ascii_graphic())
    {
        return Some(
            "has characters that are not printable ASCII; GitLab sends the token as a header value, which arrives as printable ASCII only: use a token of printable ASCII characters",
        );
    }
    None
}

impl Provider for GitLab {
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
        now: OffsetDateTime,
    ) -> Result<VerifiedDelivery, VerifyError> {
        self.options.check_body(&body)?;
        match &self.signing {
            None => self.verify_token(headers, body),
            Some(standard) => self.verify_signed(standard, headers, body, now),
        }
    }
}

impl GitLab {
    /// Verifies a request by its secret token alone; the key is `Idempotency-Key`,
    /// else `X-Gitlab-Event-UUID`.
    fn verify_token(
        &self,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<VerifiedDelivery, VerifyError> {
        let [token, event, idempotency_key, event_uuid] = scan(
            headers,
            [
                &TOKEN_HEADER,
                &EVENT_HEADER,
                &IDEMPOTENCY_KEY_HEADER,
                &EVENT_UUID_HEADER,
            ],
        );
        // header shapes: the key's (the one header kept), the event type's, the token's
        let mut kept = KeptHeaders::with_capacity(1);
        let key = first_found(&[idempotency_key, event_uuid], &mut kept)?;
        let event_type = event.get()?.map(DeliveryText::from);
        self.check_token(token.require()?)?;
        // GitLab signs no time with a secret token: there is no window to check
        let Some((_, id)) = key else {
            return Err(VerifyError::MissingDedupeKey {
                field: KEY_HEADERS.to_string(),
            });
        };
        Ok(VerifiedDelivery::from_parts(DeliveryParts {
            key: DedupeKey::new(self.options.source_or(NAME), NAME, id),
            body,
            headers: kept,
            event_type,
            correlation_id: None,
            signed_at: None,
        }))
    }

    /// Verifies a request by its signature (and its secret token, where tokens are
    /// configured too); the key is the signed `webhook-id`.
    fn verify_signed(
        &self,
        standard: &Standard,
        headers: &HeaderMap,
        body: Bytes,
        now: OffsetDateTime,
    ) -> Result<VerifiedDelivery, VerifyError> {
        // header shapes: the event type's, the token's; then the token
        let event_type = EVENT_HEADER.get(headers)?;
        if !self.tokens.is_empty() {
            self.check_token(TOKEN_HEADER.require(headers)?)?;
        }
        // the signing headers' shapes, the signature, then the window; the kept headers
        // are the three signed ones, as hookbox-standard keeps them
        match standard.verify(headers, body, now) {
            Ok(signed) => Ok(signed.with_event_type(event_type)),
            Err(err) => Err(unsigned(err, headers)),
        }
    }
}

/// Turns the signature verifier's complaint that `webhook-id` is missing into the
/// refusal of an unsigned request, when none of the three signing headers came: never
/// a token-only delivery on a receiver configured for signatures.
fn unsigned(err: VerifyError, headers: &HeaderMap) -> VerifyError {
    let absent = |spec: &HeaderSpec| matches!(spec.get(headers), Ok(None));
    match &err {
        VerifyError::MissingHeader { header }
            if header == SIGNED_ID_HEADER.label()
                && absent(&SIGNED_TIMESTAMP_HEADER)
                && absent(&SIGNATURE_HEADER) =>
        {
            VerifyError::SignatureMismatch {
                hint: UNSIGNED.to_string(),
            }
        }
        _ => err,
    }
}

/// Sends webhooks exactly as GitLab does, for tests: `Idempotency-Key` and
/// `X-Gitlab-Event-UUID` set to the delivery id, `X-Gitlab-Event`, the secret token
/// and, with signing tokens, the Standard Webhooks headers (`webhook-id` is the id).
///
/// The per-request `X-Gitlab-Webhook-UUID` is not sent: it is random, and a receiver
/// never reads it.
#[derive(Clone)]
pub struct GitLabSigner {
    token: Option<String>,
    signing: Option<StandardSigner>,
    event: String,
}

impl GitLabSigner {
    /// Sends `token` in `X-Gitlab-Token`; the event defaults to `Push Hook`.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] for a token [`GitLab::new`] refuses.
    pub fn new(token: &str) -> Result<Self, VerifyError> {
        check_tokens(&Secrets::from(token))?;
        Ok(Self {
            token: Some(token.to_string()),
            signing: None,
            event: "Push Hook".to_string(),
        })
    }

    /// Signs with every one of `signing_tokens` and sends no secret token, as a
    /// webhook with only a signing token does.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] for a signing token [`GitLab::signed`] refuses.
    pub fn signed(signing_tokens: impl Into<Secrets>) -> Result<Self, VerifyError> {
        Self {
            token: None,
            signing: None,
            event: "Push Hook".to_string(),
        }
        .with_signing_secrets(signing_tokens)
    }

    /// Also signs with every one of `signing_tokens`, one `v1,` entry each.
    ///
    /// # Errors
    /// As [`GitLabSigner::signed`].
    pub fn with_signing_secrets(
        mut self,
        signing_tokens: impl Into<Secrets>,
    ) -> Result<Self, VerifyError> {
        self.signing = Some(StandardSigner::with_scheme(SIGNING_SCHEME, signing_tokens)?);
        Ok(self)
    }

    /// Sets the `X-Gitlab-Event` value.
    pub fn event(mut self, event: impl Into<String>) -> Self {
        self.event = event.into();
        self
    }
}

impl Signer for GitLabSigner {
    /// Sends `body` as delivery `id`; `timestamp` is signed only with signing tokens.
    fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> SignedHeaders {
        let mut headers = SignedHeaders::default();
        headers.push(IDEMPOTENCY_KEY.label(), id);
        headers.push(EVENT.label(), self.event.clone());
        if let Some(token) = &self.token {
            headers.push(TOKEN.label(), token.clone());
        }
        headers.push(EVENT_UUID.label(), id);
        if let Some(signing) = &self.signing {
            for (name, value) in signing.sign(id, timestamp, body).iter() {
                headers.push(name, value);
            }
        }
        headers
    }
}

impl fmt::Debug for GitLabSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitLabSigner")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("signing", &self.signing)
            .field("event", &self.event)
            .finish()
    }
}
