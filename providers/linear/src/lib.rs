//! Linear webhooks for hookbox.
//!
//! | fact | value | source |
//! |---|---|---|
//! | signature | `Linear-Signature: <hex>`, no prefix: the HMAC-SHA256 of the raw body keyed with the webhook's signing secret as text, lower-case hex | [Securing webhooks](https://linear.app/developers/webhooks#securing-webhooks); `@linear/sdk` `LinearWebhookClient.verify` (`packages/sdk/src/webhooks/client.ts` in [linear/linear](https://github.com/linear/linear)) compares `digest("hex")` with the header's text |
//! | timestamp | the body's `webhookTimestamp`, Unix **milliseconds** "when the webhook was sent", signed with the body; "verify it's within a minute": 60 s, the default here, in both directions (the SDK refuses `Math.abs(Date.now() - timestamp) > 1000 * 60`) | same section; same SDK file |
//! | dedupe key | `Linear-Delivery`, "an UUID (v4) uniquely identifying this payload" | [Webhook payload](https://linear.app/developers/webhooks#webhook-payload) |
//! | event type | the body's `type` (the entity: `Issue`, `Comment`, …) and `action` (`create`, `update`, `remove`; other streams have their own, e.g. Issue SLA's `breached`); `Linear-Event` repeats the entity type | same section |
//! | retention minimum | 8 hours: a failed delivery (no `200` within 5 seconds) is retried at most 3 times, "after 1 minute, 1 hour, and finally after 6 hours" (7 h 1 min in all if the delays add up) | [How does a webhook work?](https://linear.app/developers/webhooks#how-does-a-webhook-work) |
//!
//! Verification checks, in order: the body size, the headers' shapes
//! (`Linear-Signature` and `Linear-Delivery` are required), the signature over the raw
//! bytes (every secret, in constant time), then the body, which must be a JSON object
//! ([`VerifyError::MalformedBody`] otherwise) with a numeric `webhookTimestamp`
//! ([`VerifyError::MalformedBody`] when it is absent, a string, or not a whole number
//! of milliseconds), and that timestamp's window. The timestamp lives in the body, so
//! the body is read before the window is checked, but only once the signature passed.
//!
//! - **The event type is `{type}.{action}`** (`Issue.create`, `Comment.update`,
//!   `IssueSLA.breached`), both signed; `type` alone when the body has no `action`, and
//!   the `Linear-Event` header when it has no `type`. The correlation id is
//!   `{data.id}:{event type}` (the entity and what happened to it), when the body has a
//!   `data.id`.
//! - **The window is exact to the millisecond** and inclusive, as the SDK's: with the
//!   default 60 s, a `webhookTimestamp` 60 000 ms from `now` passes and 60 001 ms
//!   fails, in both directions. [`VerifyError`] reports whole seconds: the age, the
//!   skew and the distance ahead are rounded **up** (1 ms outside the window is "1 s"
//!   of skew), the tolerance ([`VerifyOptions::tolerance`]) **down**.
//! - **The `Linear-Timestamp` header is ignored.** It is not signed; the SDK
//!   (`LINEAR_WEBHOOK_TS_HEADER`) reads it only when the body has no
//!   `webhookTimestamp` since "fix(sdk): prefer signed webhook timestamp"
//!   (linear/linear#1140), which closed a replay of a stale body under a fresh header,
//!   and skips the window when there is neither. Here a body without one is refused.
//! - **Hex is lower-case only**, as the SDK compares text: the same MAC in upper-case
//!   hex is a [`VerifyError::SignatureMismatch`] whose hint says so; a value that is
//!   not 64 hex digits (`sha256=…`) is a [`VerifyError::MalformedHeader`]. The Express
//!   example in Linear's page decodes the hex instead; Linear itself sends lower case
//!   (the page's example header).
//! - **`Linear-Delivery` is not signed.** Deduplicating on it holds against Linear's own
//!   copies; a captured body replayed under a made-up id is bounded by the 60 s
//!   window, not by the key. Linear's page calls the id unique to the payload but does
//!   not say whether a retry keeps it. A retry must carry a fresh `webhookTimestamp`
//!   to pass the one-minute window Linear recommends, so its body and signature are
//!   not the first attempt's; the header is the only per-payload id Linear sends (the
//!   body's `webhookId` names the webhook, the same on every delivery). Should a retry
//!   ever come with a new id, it would be stored as a second delivery: the correlation
//!   id (`{data.id}:{event type}`) lets a handler recognise a second `create` or
//!   `remove` of one entity.
//! - **Retention: 8 hours**, the retry schedule above with room; Linear documents no
//!   manual redelivery.
//!
//! # Examples
//! ```
//! use hookbox_core::{Provider, Signer, time::OffsetDateTime};
//! use hookbox_linear::{Linear, LinearSigner, with_webhook_timestamp};
//!
//! let secret = "lin_wh_hookbox_example_secret";
//! let now = OffsetDateTime::now_utc();
//! let unix_millis = i64::try_from(now.unix_timestamp_nanos() / 1_000_000)?;
//! // a Linear body carries the time it was sent: put a fresh one in
//! let body = with_webhook_timestamp(
//!     br#"{"action":"create","type":"Issue","data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9","title":"Fix the login page"},"createdAt":"2020-01-23T12:53:18.084Z"}"#,
//!     unix_millis,
//! )?;
//! let headers = LinearSigner::new(secret)?
//!     .sign("234d1a4e-b617-4388-90fe-adc3633d6b72", 0, &body)
//!     .to_header_map();
//! assert_eq!(headers["linear-event"], "Issue");
//!
//! let delivery = Linear::new(secret)?.verify(&headers, body.into(), now)?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "234d1a4e-b617-4388-90fe-adc3633d6b72");
//! assert_eq!(delivery.event_type(), Some("Issue.create"));
//! assert_eq!(
//!     delivery.correlation_id(),
//!     Some("2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9:Issue.create")
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

use std::time::Duration;

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::support::{
    BodyKeys, BodyValue, HeaderSpec, HmacKey, MacEncoding, MacFormat, TextKeys, scan,
    text_hmac_keys,
};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    DedupeKey, DeliveryParts, DeliveryText, KeptHeaders, Provider, Retention, Secrets,
    SignedHeaders, Signer, VerifiedDelivery, VerifyError, VerifyOptions,
};

/// The provider's name in dedupe keys and `hookbox verify --provider`.
pub const NAME: &str = "linear";

/// Keys must outlive Linear's three retries (1 minute, 1 hour and 6 hours); eight
/// hours, with room.
pub const MIN_RETENTION: Retention = Retention::from_hours(8);

/// The window Linear recommends and its SDK checks: 60 seconds.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(60);

/// `Linear-Signature`: the lower-case hex HMAC-SHA256 of the body.
pub const SIGNATURE: HeaderSpec = HeaderSpec::new("Linear-Signature", "linear-signature");
/// `Linear-Delivery`: a UUID per payload; the dedupe key.
pub const DELIVERY: HeaderSpec = HeaderSpec::new("Linear-Delivery", "linear-delivery");
/// `Linear-Event`: the entity type (`Issue`, `Comment`, …).
pub const EVENT: HeaderSpec = HeaderSpec::new("Linear-Event", "linear-event");

/// The body's field with the Unix time in milliseconds at which Linear sent it.
pub const TIMESTAMP_FIELD: &str = "webhookTimestamp";

const MAC: MacFormat = MacFormat {
    provider: "Linear",
    encoding: MacEncoding::LowerHex,
    not_a_mac: "the value is not 64 hex digits; Linear sends the lower-case hex HMAC-SHA256 of the body, without a prefix",
};

/// The fields read from the body: `webhookTimestamp`, `type`, `action`, `data.id`.
const BODY: BodyKeys =
    BodyKeys::new(&[&[TIMESTAMP_FIELD], &["type"], &["action"], &["data", "id"]]);
const TIMESTAMP: usize = 0;
const TYPE: usize = 1;
const ACTION: usize = 2;
const DATA_ID: usize = 3;

/// The signer's reads: `type` (for `Linear-Event`) and `webhookTimestamp` (to stamp).
const ENTITY: BodyKeys = BodyKeys::new(&[&["type"]]);
const STAMP: BodyKeys = BodyKeys::new(&[&[TIMESTAMP_FIELD]]);

const NANOS_PER_MILLI: i128 = 1_000_000;

// a `HeaderSpec` holds a `Bytes` (interior mutability), so a const is not promoted to
// a `'static` borrow: scans borrow these statics instead
static SIGNATURE_HEADER: HeaderSpec = SIGNATURE;
static DELIVERY_HEADER: HeaderSpec = DELIVERY;
static EVENT_HEADER: HeaderSpec = EVENT;

/// Verifies Linear webhooks.
#[derive(Debug, Clone)]
pub struct Linear {
    keys: TextKeys,
    options: VerifyOptions,
}

impl Linear {
    /// Accepts webhooks signed with any of `secrets`, each a webhook's signing secret
    /// (several while one is being replaced). The tolerance is [`DEFAULT_TOLERANCE`]
    /// (60 s).
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given or one is blank.
    pub fn new(secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        Ok(Self {
            keys: TextKeys::new(MAC, secrets)?,
            options: VerifyOptions::default().tolerance(DEFAULT_TOLERANCE),
        })
    }

    /// Replaces the default options (tolerance, body limit, source name); start from
    /// `VerifyOptions::default().tolerance(DEFAULT_TOLERANCE)` to keep Linear's window.
    pub fn with_options(mut self, options: VerifyOptions) -> Self {
        self.options = options;
        self
    }

    /// Checks that `sent_ms` is within the tolerance of `now`, to the millisecond and
    /// inclusive, and returns it as a time.
    fn check_window(
        &self,
        sent_ms: i64,
        now: OffsetDateTime,
    ) -> Result<OffsetDateTime, VerifyError> {
        let tolerance = self.options.tolerance_duration();
        let tolerance_ms = i128::try_from(tolerance.as_millis()).unwrap_or(i128::MAX);
        let tolerance_secs = tolerance.as_secs();
        // i128: neither a hostile timestamp nor a far-off `now` can overflow
        let age_ms = now.unix_timestamp_nanos().div_euclid(NANOS_PER_MILLI) - i128::from(sent_ms);
        if age_ms > tolerance_ms {
            return Err(VerifyError::TimestampTooOld {
                age_secs: whole_secs(age_ms),
                tolerance_secs,
                skew_secs: whole_secs(age_ms - tolerance_ms),
            });
        }
        if -age_ms > tolerance_ms {
            return Err(VerifyError::TimestampInFuture {
                ahead_secs: whole_secs(-age_ms),
                tolerance_secs,
                skew_secs: whole_secs(-age_ms - tolerance_ms),
            });
        }
        // inside the window means near a valid `now`; a tolerance of centuries could
        // still leave the range, so keep the error typed
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(sent_ms) * NANOS_PER_MILLI).map_err(
            |_| VerifyError::MalformedBody {
                reason: format!("`{TIMESTAMP_FIELD}` is out of the range of dates"),
            },
        )
    }
}

/// Rounds a positive number of milliseconds up to whole seconds.
fn whole_secs(ms: i128) -> u64 {
    u64::try_from((ms + 999).div_euclid(1000)).unwrap_or(u64::MAX)
}

/// Reads `webhookTimestamp`: a JSON number of ASCII digits only (no sign, fraction or
/// exponent) that fits an `i64`.
fn sent_millis(value: Option<&BodyValue<'_>>) -> Result<i64, VerifyError> {
    let malformed = |what: &str| VerifyError::MalformedBody {
        reason: format!(
            "{what}; Linear sends `{TIMESTAMP_FIELD}`, the Unix time in milliseconds at which it sent the webhook, as a JSON number (`1676056940508`)"
        ),
    };
    match value {
        None => Err(malformed(&format!(
            "the body has no numeric `{TIMESTAMP_FIELD}` at its top level"
        ))),
        Some(BodyValue::Text(_)) => Err(malformed(&format!("`{TIMESTAMP_FIELD}` is a string"))),
        Some(BodyValue::Number(number)) => {
            if !number.bytes().all(|b| b.is_ascii_digit()) {
                return Err(malformed(&format!(
                    "`{TIMESTAMP_FIELD}` is not a whole, non-negative number (it has a sign, a fraction or an exponent)"
                )));
            }
            number.parse().map_err(|_| {
                malformed(&format!(
                    "`{TIMESTAMP_FIELD}` has {} digits, too many for a Unix time in milliseconds",
                    number.len()
                ))
            })
        }
    }
}

impl Provider for Linear {
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
        let [signature, delivery, event] = scan(
            headers,
            [&SIGNATURE_HEADER, &DELIVERY_HEADER, &EVENT_HEADER],
        );
        let mut kept = KeptHeaders::with_capacity(3);
        let signature = signature.take_required(&mut kept)?;
        let delivery_id = delivery.take_required(&mut kept)?;
        let event = event.take(&mut kept)?;
        // compared as text; only a failed comparison asks whether it was hex at all
        self.keys
            .verify(SIGNATURE.label(), &[], &body, || std::iter::once(signature))?;

        let fields = BODY.read(&body).map_err(|err| VerifyError::MalformedBody {
            reason: format!(
                "the body is not a JSON object ({err}); Linear sends a JSON object with a `{TIMESTAMP_FIELD}`"
            ),
        })?;
        let signed_at = self.check_window(sent_millis(fields.get(TIMESTAMP))?, now)?;

        let non_empty = |index| fields.text(index).filter(|text: &&str| !text.is_empty());
        let event_type = match (non_empty(TYPE), non_empty(ACTION)) {
            (Some(entity), Some(action)) => Some(DeliveryText::concat(&[entity, ".", action])),
            (Some(entity), None) => Some(DeliveryText::from(entity)),
            (None, _) => event.map(DeliveryText::from),
        };
        let correlation_id = non_empty(DATA_ID)
            .zip(event_type.as_deref())
            .map(|(id, kind)| DeliveryText::concat(&[id, ":", kind]));
        let key = DedupeKey::new(self.options.source_or(NAME), NAME, delivery_id);
        Ok(VerifiedDelivery::from_parts(DeliveryParts {
            key,
            body,
            headers: kept,
            event_type,
            correlation_id,
            signed_at: Some(signed_at),
        }))
    }
}

/// Signs webhooks exactly as Linear does, for tests.
///
/// Linear signs the body alone, and its timestamp is inside the body: the signer
/// signs `body` as given and ignores [`Signer::sign`]'s `timestamp`. Put a fresh
/// `webhookTimestamp` in the body first with [`with_webhook_timestamp`].
#[derive(Debug, Clone)]
pub struct LinearSigner {
    key: HmacKey,
    event: Option<String>,
}

impl LinearSigner {
    /// Signs with `secret`, a webhook's signing secret. `Linear-Event` is the body's
    /// `type` unless [`LinearSigner::event`] sets it.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when the secret is blank, or when more than one
    /// is given: `Linear-Signature` holds one signature.
    pub fn new(secret: impl Into<Secrets>) -> Result<Self, VerifyError> {
        let secrets = secret.into();
        if secrets.len() > 1 {
            return Err(VerifyError::invalid_secret(format!(
                "{} secrets given, but Linear signs with one: `Linear-Signature` holds a single signature; sign with the webhook's current secret",
                secrets.len()
            )));
        }
        let key = text_hmac_keys(&secrets)?
            .pop()
            .ok_or_else(|| VerifyError::invalid_secret("no secret given"))?;
        Ok(Self { key, event: None })
    }

    /// Sets the `Linear-Event` value instead of the body's `type`.
    pub fn event(mut self, event: impl Into<String>) -> Self {
        self.event = Some(event.into());
        self
    }
}

impl Signer for LinearSigner {
    /// Signs `body` as delivery `id` (`Linear-Delivery`); `timestamp` is unused, as
    /// Linear's is the body's `webhookTimestamp`.
    fn sign(&self, id: &str, _timestamp: i64, body: &[u8]) -> SignedHeaders {
        let event = self.event.clone().or_else(|| {
            let fields = ENTITY.read(body).ok()?;
            fields.text(0).map(str::to_owned)
        });
        let mut headers = SignedHeaders::default();
        headers.push(DELIVERY.label(), id);
        if let Some(event) = event.filter(|event| !event.is_empty()) {
            headers.push(EVENT.label(), event);
        }
        headers.push(
            SIGNATURE.label(),
            self.key.sign_text(&[body], MAC.encoding).as_str(),
        );
        headers
    }
}

/// Returns `body` with its top-level `webhookTimestamp` set to `unix_millis`: the number
/// there is replaced in place (every other byte is kept), or, when there is none, the
/// member is added last. For tests and `hookbox send`, which must send a fresh
/// timestamp for a receiver's window to pass.
///
/// # Examples
/// ```
/// use hookbox_linear::with_webhook_timestamp;
/// let stale = br#"{"type":"Issue","webhookTimestamp":1676056940508}"#;
/// assert_eq!(
///     with_webhook_timestamp(stale, 1767225600000)?,
///     br#"{"type":"Issue","webhookTimestamp":1767225600000}"#
/// );
/// assert_eq!(
///     with_webhook_timestamp(br#"{"type":"Issue"}"#, 1767225600000)?,
///     br#"{"type":"Issue","webhookTimestamp":1767225600000}"#
/// );
/// # Ok::<(), hookbox_core::VerifyError>(())
/// ```
///
/// # Errors
/// [`VerifyError::MalformedBody`] when `body` is not a JSON object, or its
/// `webhookTimestamp` is something other than a number (a string, `null`, …).
pub fn with_webhook_timestamp(body: &[u8], unix_millis: i64) -> Result<Vec<u8>, VerifyError> {
    use serde_json::Value;
    let malformed = |reason: String| VerifyError::MalformedBody { reason };
    let object: serde_json::Map<String, Value> = serde_json::from_slice(body).map_err(|err| {
        malformed(format!(
            "the body is not a JSON object ({err}); a Linear webhook's body is one"
        ))
    })?;
    let stamp = unix_millis.to_string();
    let kind = match object.get(TIMESTAMP_FIELD) {
        None => {
            // the body is an object, so its last `}` closes it
            let close = body.iter().rposition(|&b| b == b'}').unwrap_or(body.len());
            let separator = if object.is_empty() { "" } else { "," };
            let member = format!("{separator}\"{TIMESTAMP_FIELD}\":{stamp}");
            return Ok([&body[..close], member.as_bytes(), &body[close..]].concat());
        }
        Some(Value::Number(_)) => None,
        Some(Value::Null) => Some("null"),
        Some(Value::Bool(_)) => Some("a boolean"),
        Some(Value::String(_)) => Some("a string"),
        Some(Value::Array(_)) => Some("an array"),
        Some(Value::Object(_)) => Some("an object"),
    };
    if let Some(kind) = kind {
        return Err(malformed(format!(
            "`{TIMESTAMP_FIELD}` is {kind}; Linear sends a number of milliseconds"
        )));
    }
    // the number's place: the reader borrows its text from the body (a repeated key
    // is read at its first copy, `serde_json` keeps the last)
    let fields = STAMP.read(body).ok();
    if let Some(BodyValue::Number(old)) = fields.as_ref().and_then(|fields| fields.get(0)) {
        let start = old.as_ptr().addr().wrapping_sub(body.as_ptr().addr());
        let end = start.saturating_add(old.len());
        if end <= body.len() {
            return Ok([&body[..start], stamp.as_bytes(), &body[end..]].concat());
        }
    }
    Err(malformed(format!(
        "`{TIMESTAMP_FIELD}` is repeated with values of different kinds"
    )))
}
