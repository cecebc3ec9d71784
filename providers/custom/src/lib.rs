//! Webhooks of any provider that signs with an HMAC, described as data, for hookbox.
//!
//! Most providers without a hookbox crate sign the same way: an HMAC (SHA-1,
//! SHA-256 or SHA-512) keyed with a shared secret, over a text assembled from the
//! raw body and perhaps a timestamp header, an id header or the webhook's URL, sent
//! in one header as hex or base64, perhaps after a prefix (`sha256=`), perhaps
//! several at once. A [`Scheme`] says which, and where the delivery id (the dedupe
//! key), the event type and the timestamp are; [`Custom`] verifies deliveries with
//! it and [`CustomSigner`] signs test deliveries with it.
//!
//! A scheme is checked when it is built ([`Scheme::builder`], or
//! `Scheme::from_toml` with the `toml` feature): a template that does not sign the
//! body, a `{timestamp}` with no timestamp, a timestamp without a tolerance, an
//! unknown algorithm, an invalid header name, … are [`SchemeError`]s, before any
//! delivery arrives.
//!
//! # Names and dedupe keys
//! [`Provider::name`](hookbox_core::Provider::name) returns the scheme's name
//! (`razorpay`), and the dedupe keys are scoped by it: it is each key's provider, and
//! its source unless [`VerifyOptions::source`](hookbox_core::VerifyOptions::source)
//! names another. Retention rules (`RetentionPolicy::keep`) take that name too. The
//! names of hookbox's provider crates are refused ([`SchemeError::ReservedName`]):
//! use the crate.
//!
//! hookbox-core's building blocks take `&'static str` names, so each distinct name
//! of a scheme (its own, its headers', its fields') is allocated once per process and
//! kept: a few bytes, however many times a scheme is built.
//!
//! # Verification
//! In order: the body size; the headers (the signature, and the id and timestamp
//! headers the scheme reads, each sent once); the signature over the raw bytes,
//! every secret against every signature, compared as text in constant time; the
//! timestamp window, in both directions; then the body, when a value lives in it:
//! it must be a JSON object ([`VerifyError::MalformedBody`](hookbox_core::VerifyError::MalformedBody)
//! otherwise), whose top-level field holds the id (a string, or a number as written;
//! [`VerifyError::MissingDedupeKey`](hookbox_core::VerifyError::MissingDedupeKey)
//! when it is absent or empty). Body fields are read only after the signature
//! matched, so a signed `{id}` or `{timestamp}` must come from a header.
//!
//! The MAC is fed the template's pieces one after the other (the body is never
//! copied), each key is prepared once with the template's constant head (such as the
//! URL), and its text is compared with each received signature: lower-case hex or
//! standard padded base64, the spellings providers' own libraries compare. Another
//! spelling of the right MAC is a mismatch whose hint names the spelling. Secrets are
//! used as text; providers whose secrets are base64 (`whsec_…`) follow Standard
//! Webhooks: use `hookbox-standard`.
//!
//! # The TOML format
//! With the `toml` feature, `Scheme::from_toml` reads a file like this one (every
//! key shown; unknown keys are errors):
//! ```toml
//! name = "acme"                      # the provider's name: a-z, 0-9, `-`, `_`
//! signed = "{timestamp}.{body}"      # {body} (required), {timestamp}, {id}, {url}, text
//! retention_days = 3                 # how long the provider retries (required)
//! url = "https://example.com/hooks"  # the URL it signs: only with {url}
//!
//! [signature]
//! header = "Acme-Signature"
//! algorithm = "sha256"               # sha1 | sha256 | sha512
//! encoding = "hex"                   # hex (lower-case) | base64 (standard, padded)
//! prefix = "v1="                     # optional: text before each MAC
//! separator = ","                    # optional: several signatures, one per secret
//!
//! [id]                               # required: the dedupe key, the same on retries
//! header = "Acme-Delivery"           # or: field = "event_id" (top-level body field)
//!
//! [event_type]                       # optional
//! field = "type"                     # or: header = "Acme-Event"
//!
//! [timestamp]                        # optional
//! header = "Acme-Timestamp"          # or: field = "created_at" (not with {timestamp})
//! unit = "seconds"                   # seconds | milliseconds
//! tolerance_secs = 300               # required with a timestamp: both directions
//! ```
//! Tables may be written inline as well: `id = { header = "Acme-Delivery" }`.
//!
//! # Shipped schemes
//! `providers/custom/schemes/` holds schemes of real providers, each verified
//! against the provider's published sample in this crate's tests:
//!
//! | provider | signature | signed | id | retention | sample |
//! |---|---|---|---|---|---|
//! | Razorpay | `X-Razorpay-Signature: <hex HMAC-SHA256>` | the body | `X-Razorpay-Event-Id` | 15 days | `razorpay-python` `tests/test_client_utility.py` |
//! | Typeform | `Typeform-Signature: sha256=<base64 HMAC-SHA256>` | the body | body `event_id` | 1 day | Typeform `js-api-client` `tests/unit/verify-signature.test.ts` |
//!
//! # Examples
//! Razorpay's scheme, built in code (the same as `schemes/razorpay.toml`):
//! ```
//! use hookbox_core::{Provider, Retention, Signer, time::OffsetDateTime};
//! use hookbox_custom::{Algorithm, Custom, CustomSigner, Encoding, Scheme, Source};
//!
//! let razorpay = Scheme::builder("razorpay")
//!     .signature("X-Razorpay-Signature", Algorithm::Sha256, Encoding::Hex)
//!     .signed("{body}")
//!     .id(Source::header("X-Razorpay-Event-Id"))
//!     .event_type(Source::field("event"))
//!     .retention(Retention::from_days(15))
//!     .build()?;
//! let body = br#"{"entity":"event","event":"payment.captured","payload":{}}"#;
//! let headers = CustomSigner::new(razorpay.clone(), "webhook-secret")?
//!     .sign("F8Xs2CgNP1Ulmn", 0, body)
//!     .to_header_map();
//! let delivery = Custom::new(razorpay, "webhook-secret")?
//!     .verify(&headers, body.as_slice().into(), OffsetDateTime::now_utc())?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "F8Xs2CgNP1Ulmn");
//! assert_eq!(delivery.event_type(), Some("payment.captured"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The same scheme from TOML:
//! ```
//! # #[cfg(feature = "toml")] {
//! use hookbox_custom::Scheme;
//!
//! let razorpay = Scheme::from_toml(r#"
//!     name = "razorpay"
//!     signed = "{body}"
//!     retention_days = 15
//!     signature = { header = "X-Razorpay-Signature", algorithm = "sha256", encoding = "hex" }
//!     id = { header = "X-Razorpay-Event-Id" }
//!     event_type = { field = "event" }
//! "#)?;
//! assert_eq!(razorpay.name(), "razorpay");
//! # }
//! # Ok::<(), hookbox_custom::SchemeError>(())
//! ```
#![forbid(unsafe_code)]

mod builder;
mod error;
mod kinds;
mod mac;
mod names;
mod parse;
mod scheme;
mod sign;
mod template;
#[cfg(feature = "toml")]
mod toml;
mod verify;

pub use builder::SchemeBuilder;
pub use error::{Role, SchemeError};
pub use kinds::{Algorithm, Encoding, Source, Unit};
pub use scheme::Scheme;
pub use sign::CustomSigner;
pub use verify::Custom;
