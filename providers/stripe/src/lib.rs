//! Stripe webhooks for hookbox.
//!
//! | fact | value | source |
//! |---|---|---|
//! | signature | `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]`; only `v1` is accepted ("ignore all schemes that aren't `v1`"; `v0` is sent in test mode only) | [Verify webhook signatures manually](https://docs.stripe.com/webhooks#verify-manually) |
//! | signed content | `"{t}.{raw body}"`, HMAC-SHA256 keyed with the whole endpoint secret `whsec_…` as text, hex | same section |
//! | rotation | while an old secret is still valid, one header carries one `v1` per secret | [Roll endpoint secrets](https://docs.stripe.com/webhooks#roll-endpoint-secrets) |
//! | timestamp | signed; Stripe's libraries allow 5 minutes either way (the default here) | [Prevent replay attacks](https://docs.stripe.com/webhooks#replay-attacks) |
//! | dedupe key | the event `id` in the JSON body ("track event IDs to identify duplicate deliveries"); a retry gets a new signature and timestamp, never a new id | [Handle duplicate events](https://docs.stripe.com/webhooks#handle-duplicate-events) |
//! | correlation | `data.object.id` + `type`: "in some cases, two separate Event objects are generated and sent" for one change | same section |
//! | retention minimum | 30 days: the Stripe CLI resends "events that have been created within the last 30 days" (the Dashboard allows 15) | [`stripe events resend`](https://docs.stripe.com/cli/events/resend), [Process undelivered events](https://docs.stripe.com/webhooks/process-undelivered-events) |
//!
//! Verification checks, in order: the body size, the header's shape, the signature
//! over the raw bytes, the timestamp window, then the body: an empty body, one that is
//! not a JSON object, or one that stops being JSON before the fields below are read,
//! is [`VerifyError::MalformedBody`], a body without a string `id` is
//! [`VerifyError::MissingDedupeKey`].
//!
//! Only `id`, `type` and `data.object.id` are read, by hookbox-core's body-key reader
//! ([`BodyKeys`]), which builds no JSON tree and runs
//! only once the signature matched, so a new event type or API version verifies.
//! The scan **stops as soon as those three are settled** (read, or known to be absent):
//! the rest of the body is authenticated by the signature, and checked when a handler
//! parses it ([`Delivery::parse`](hookbox_core::Delivery::parse)). On the way, values
//! that are not read are followed only to their end (brackets, quotes, escapes), and
//! a key repeated on the path counts once, **the first copy** (Stripe never repeats a
//! key; `serde_json::Value` would keep the last copy, a derived struct refuses the
//! body). Stripe sends `type` as the event's last member, so on real events the scan
//! still reaches the last member; a body without one of the three is read to its end.
//!
//! Signatures are compared as lower-case hex text, as Stripe's libraries compare them:
//! a `v1` in upper- or mixed-case hex is a [`VerifyError::SignatureMismatch`] (the
//! hint says so), one that is not 64 hex digits is skipped, and a header whose `v1`
//! values are all not hex is [`VerifyError::MalformedHeader`].
//!
//! # Examples
//! A delivery signed at `t=1614265330` (the hex computed once with Python's `hmac`)
//! verifies at that time:
//! ```
//! use hookbox_core::{Provider, http::HeaderMap, time::OffsetDateTime};
//! use hookbox_stripe::Stripe;
//!
//! let stripe = Stripe::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
//! let body = r#"{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3NG8Du2eZvKYlo2C1","object":"payment_intent"}}}"#;
//! let mut headers = HeaderMap::new();
//! headers.insert(
//!     "Stripe-Signature",
//!     "t=1614265330,v1=529b1e193450b767746621c2d9203444b7a013e87d5e726a524e7007d7a69b52".parse()?,
//! );
//!
//! let now = OffsetDateTime::from_unix_timestamp(1_614_265_330)?;
//! let delivery = stripe.verify(&headers, body.into(), now)?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "evt_1NG8Du2eZvKYlo2CUI79vXWy");
//! assert_eq!(delivery.event_type(), Some("payment_intent.succeeded"));
//! assert_eq!(delivery.correlation_id(), Some("pi_3NG8Du2eZvKYlo2C1:payment_intent.succeeded"));
//!
//! // five minutes and one second later the same delivery is a replay
//! let later = OffsetDateTime::from_unix_timestamp(1_614_265_631)?;
//! let err = stripe.verify(&headers, body.into(), later).unwrap_err();
//! assert_eq!(err.kind(), "timestamp_too_old");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Sign your own test deliveries with [`StripeSigner`]; with two secrets it signs as
//! Stripe does during a rotation, and a receiver holding either secret accepts:
//! ```
//! use hookbox_core::{Provider, Signer, time::OffsetDateTime};
//! use hookbox_stripe::{Stripe, StripeSigner};
//!
//! let signer = StripeSigner::new(["whsec_old", "whsec_new"])?;
//! let body = br#"{"id":"evt_test","type":"invoice.paid"}"#;
//! let now = OffsetDateTime::now_utc();
//! let headers = signer.sign("", now.unix_timestamp(), body).to_header_map();
//! let delivery = Stripe::new("whsec_new")?.verify(&headers, body.as_slice().into(), now)?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "evt_test");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::support::{
    BodyKeys, HeaderSpec, HmacKey, MacEncoding, MacFormat, TextKeys, is_json, parse_unix_seconds,
    text_hmac_keys,
};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    DedupeKey, DeliveryParts, DeliveryText, KeptHeaders, Provider, Retention, Secrets,
    SignedHeaders, Signer, VerifiedDelivery, VerifyError, VerifyOptions,
};

/// The provider's name in dedupe keys and `hookbox verify --provider`.
pub const NAME: &str = "stripe";

/// Keys must outlive the 30 days in which the Stripe CLI can resend an event.
pub const MIN_RETENTION: Retention = Retention::from_days(30);

/// `Stripe-Signature`: `t=<unix seconds>` and one `v1=<hex>` per signing secret.
pub const SIGNATURE: HeaderSpec = HeaderSpec::new("Stripe-Signature", "stripe-signature");

/// A `v1` value: lower-case hex, compared as text as Stripe's libraries compare it.
const MAC: MacFormat = MacFormat {
    provider: "Stripe",
    encoding: MacEncoding::LowerHex,
    not_a_mac: "no `v1=` value is 64 hex digits",
};

/// Where the dedupe key lives: the event's top-level `id`.
const ID_FIELD: &str = "id";

/// The fields read from the event: `id`, `type` and `data.object.id`, in that order.
const EVENT: BodyKeys = BodyKeys::new(&[&[ID_FIELD], &["type"], &["data", "object", "id"]]);

/// Verifies Stripe deliveries.
#[derive(Debug, Clone)]
pub struct Stripe {
    keys: TextKeys,
    options: VerifyOptions,
}

impl Stripe {
    /// Accepts deliveries signed with any of `secrets`, each the whole `whsec_…` value
    /// the Dashboard shows (several during a rotation).
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given or one is blank.
    pub fn new(secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        Ok(Self {
            keys: TextKeys::new(MAC, secrets)?,
            options: VerifyOptions::default(),
        })
    }

    /// Replaces the default options (tolerance, body limit, source name).
    pub fn with_options(mut self, options: VerifyOptions) -> Self {
        self.options = options;
        self
    }
}

impl Provider for Stripe {
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
        let mut kept = KeptHeaders::with_capacity(1);
        let header = SignatureHeader::parse(SIGNATURE.take_required(headers, &mut kept)?)?;

        // compared as text; only a failed comparison asks whether it was hex at all
        let prefix = signed_prefix(header.timestamp_text);
        self.keys
            .verify(SIGNATURE.label(), &prefix, &body, || header.v1())?;
        let signed_at = self.options.check_timestamp(header.timestamp, now)?;

        if body.is_empty() {
            return Err(VerifyError::MalformedBody {
                reason: "the body is empty; Stripe always sends a JSON event object".to_string(),
            });
        }
        // only authenticated bytes are scanned
        let event = EVENT.read(&body).map_err(|err| {
            // JSON that is not an object has no `id`: the command-line contract calls
            // that a missing dedupe key (checked on the failure path only)
            if err.is_not_an_object() && is_json(&body) {
                VerifyError::MissingDedupeKey {
                    field: ID_FIELD.to_string(),
                }
            } else {
                VerifyError::MalformedBody {
                    reason: format!("the body is not a JSON event object ({err})"),
                }
            }
        })?;
        // an empty id would make every such event a duplicate of the first
        let Some(id) = event.text(0).filter(|id| !id.is_empty()) else {
            return Err(VerifyError::MissingDedupeKey {
                field: ID_FIELD.to_string(),
            });
        };
        let key = DedupeKey::new(self.options.source_or(NAME), NAME, id);
        let kind = event.text(1);
        let correlation_id = event
            .text(2)
            .zip(kind)
            .map(|(object, kind)| DeliveryText::concat(&[object, ":", kind]));
        let event_type = kind.map(DeliveryText::from);

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

/// Returns what Stripe signs before the body, `"{t}."`: `t` is the timestamp as sent,
/// never a re-formatted number.
fn signed_prefix(t: &str) -> [&[u8]; 2] {
    [t.as_bytes(), b"."]
}

/// Returns the signed content `"{t}.{body}"` as parts, so the body is never copied.
fn signed_parts<'a>(t: &'a str, body: &'a [u8]) -> [&'a [u8]; 3] {
    let [t, dot] = signed_prefix(t);
    [t, dot, body]
}

/// The parts of a `Stripe-Signature` header that verification uses.
struct SignatureHeader<'h> {
    value: &'h str,
    timestamp_text: &'h str,
    timestamp: i64,
}

/// Returns the `(scheme, value)` items of a header: split at `,`, trimmed, and split
/// at their first `=`; items without `=` are skipped.
fn items(value: &str) -> impl Iterator<Item = (&str, &str)> {
    value
        .split(',')
        .filter_map(|item| item.trim().split_once('='))
}

impl<'h> SignatureHeader<'h> {
    /// Parses `t=…,v1=…[,v1=…][,v0=…]`; schemes other than `t` and `v1` are ignored.
    fn parse(value: &'h str) -> Result<Self, VerifyError> {
        let malformed = |reason: &str| VerifyError::malformed(SIGNATURE.label(), reason);
        let mut timestamp = None;
        let mut v1_entries = 0_usize;
        for (scheme, value) in items(value) {
            match scheme {
                "t" if timestamp.is_some() => {
                    return Err(malformed(
                        "more than one `t=` timestamp; Stripe sends exactly one",
                    ));
                }
                "t" => timestamp = Some((value, parse_unix_seconds(SIGNATURE.label(), value)?)),
                "v1" => v1_entries += 1,
                // `v0` is test-mode only, and accepting any other scheme would let a
                // forger downgrade to it
                _ => {}
            }
        }
        let Some((timestamp_text, timestamp)) = timestamp else {
            return Err(malformed(
                "no `t=` timestamp; expected `t=<unix seconds>,v1=<hex>`",
            ));
        };
        if v1_entries == 0 {
            return Err(malformed(
                "no `v1=` signature; `v0` (test mode only) and other schemes are not accepted",
            ));
        }
        Ok(Self {
            value,
            timestamp_text,
            timestamp,
        })
    }

    /// Returns the text of every `v1` signature: they are compared as lower-case hex
    /// text, as Stripe's libraries do, so nothing is decoded or collected, and one
    /// entry that is not hex cannot hide a valid one beside it.
    fn v1(&self) -> impl Iterator<Item = &'h str> + use<'h> {
        items(self.value)
            .filter(|(scheme, _)| *scheme == "v1")
            .map(|(_, value)| value)
    }
}

/// Signs deliveries exactly as Stripe does, for tests.
#[derive(Debug, Clone)]
pub struct StripeSigner {
    keys: Vec<HmacKey>,
}

impl StripeSigner {
    /// Signs with every one of `secrets`: one `v1=` per secret, as Stripe does while an
    /// old secret is still valid after a rotation.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given or one is blank.
    pub fn new(secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        Ok(Self {
            keys: text_hmac_keys(&secrets.into())?,
        })
    }
}

impl Signer for StripeSigner {
    /// Signs `body` at `timestamp`; `id` is unused because Stripe's event id is in the
    /// body.
    fn sign(&self, _id: &str, timestamp: i64, body: &[u8]) -> SignedHeaders {
        let t = timestamp.to_string();
        let mut value = format!("t={t}");
        for key in &self.keys {
            value.push_str(",v1=");
            value.push_str(
                key.sign_text(&signed_parts(&t, body), MAC.encoding)
                    .as_str(),
            );
        }
        let mut headers = SignedHeaders::default();
        headers.push(SIGNATURE.label(), value);
        headers
    }
}
