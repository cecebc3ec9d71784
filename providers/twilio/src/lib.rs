//! Twilio webhooks for hookbox.
//!
//! | fact | value | source |
//! |---|---|---|
//! | signature | `X-Twilio-Signature: <base64>`, one per request | [Webhooks security](https://www.twilio.com/docs/usage/webhooks/webhooks-security) |
//! | signed content, form body | the full URL Twilio called (scheme, host, optional port, path, query), then every POST parameter's name followed by its value, sorted by name; HMAC-SHA1 keyed with the account's Auth Token, standard base64 | same page; `twilio-python` `twilio/request_validator.py` (`compute_signature`), `twilio-node` `src/webhooks/webhooks.ts` (`getExpectedTwilioSignature`), `twilio-java` `RequestValidator` |
//! | repeated names | sorted by name, then by value, identical name–value pairs once: `for value in sorted(set(values))` | `twilio-python` `compute_signature`; `twilio-node` `toFormUrlEncodedParam` (`Array.from(new Set(…)).sort()`) |
//! | signed content, JSON body | for `Content-Type: application/json` the URL carries `bodySHA256=<lower-case hex SHA-256 of the raw body>`, appended last; the signature covers that URL alone, no parameters | [Webhooks security](https://www.twilio.com/docs/usage/webhooks/webhooks-security); `twilio-python` `validate` (`compute_hash`), `twilio-node` `validateRequestWithBody`, `twilio-java` `validate(url, body, …)`; the SDK tests' `uriWithBody` (`uri + "&bodySHA256=" + bodyHash`) |
//! | default port | the URL verifies with and without its scheme's default port (`:443`, `:80`), "since sig generation on back end is inconsistent" | `twilio-python` `add_port`/`remove_port`, `twilio-node` `addPort`/`removePort`, `twilio-java` `addPort`/`removePort` |
//! | HMAC-SHA256 | when a Webhook Rule applies a Setting with a SharedKey, Twilio signs the same content with that key and algorithm and sends `X-Twilio-Webhooks-Signature-Settings: key=<SharedKey>,algorithm=HMAC_SHA256`; without the header, HMAC-SHA1 with the Auth Token | [Sign webhooks with shared keys](https://www.twilio.com/docs/usage/webhooks/webhook-shared-keys); `twilio-node` `examples/WebhookSignatureValidation.md` |
//! | dedupe key | the `I-Twilio-Idempotency-Token` header, the same on every retry of a request | [Webhook connection overrides](https://www.twilio.com/docs/usage/webhooks/webhooks-connection-overrides) |
//! | timestamp | none signed: there is no replay window to check | [Webhooks security](https://www.twilio.com/docs/usage/webhooks/webhooks-security) |
//! | rotation | Twilio signs with the primary Auth Token only (a secondary token verifies nothing until it is promoted), so while promoting configure the old and the new token; a SharedKey is rotated without touching the Auth Token | [Error 57012](https://www.twilio.com/docs/api/errors/57012), [Sign webhooks with shared keys](https://www.twilio.com/docs/usage/webhooks/webhook-shared-keys) |
//! | retention minimum | 1 hour: Twilio retries a failed request at most 5 times (`#rc`, default 1) within a total of at most 15 seconds (`#tt`); nothing is resent later | [Webhook connection overrides](https://www.twilio.com/docs/usage/webhooks/webhooks-connection-overrides) |
//!
//! # The public URL is configuration
//! Twilio signs the URL it called, which a receiver behind a proxy, a load balancer
//! or a tunnel never sees. [`Twilio::new`] takes that URL exactly as entered in the
//! Twilio console, query string included: it must be an absolute `http://` or
//! `https://` URL ([`VerifyError::InvalidConfig`] otherwise). A fragment
//! (`#rc=3&rp=all`, the connection overrides) is never sent, so it is not signed and is
//! dropped. A URL that already carries `bodySHA256` is refused: that is a request URL,
//! not the configured one.
//!
//! The `Content-Type` header chooses what is signed:
//! - `application/x-www-form-urlencoded` (parameters and case ignored): the public
//!   URL, then the parameters. They are decoded (`+` is a space, `%XX` a byte, a `%`
//!   without two hex digits is itself), sorted by name and then value in Unicode code
//!   point order (twilio-python's order; the other SDKs sort UTF-16 units, which
//!   differ only past U+FFFF), and identical pairs count once. A decoded parameter
//!   that is not UTF-8 is signed as its bytes, where a framework would have replaced
//!   them with U+FFFD: Twilio signs text and never sends such a parameter. The
//!   parameters are read in place and fed to the MAC piece by piece: the body is
//!   never copied whole.
//! - `application/json`: the public URL followed by `&` (when it has a query) or `?`
//!   and [`body_sha256_query`], which is what Twilio requests. The SHA-256 of the body
//!   is part of the signed URL, so a changed body is a signature mismatch.
//! - anything else is a [`VerifyError::MalformedHeader`] (Twilio sends only these
//!   two), a missing `Content-Type` a [`VerifyError::MissingHeader`].
//!
//! The URL is tried as configured first, then written the other way around its
//! scheme's default port (`https://host/…` and `https://host:443/…`); a URL with
//! another port is tried as it is (twilio-python and twilio-node would also drop
//! that port, which accepts a signature made for another endpoint).
//!
//! # Verification
//! Checks, in order: the body size, the headers' shapes (`X-Twilio-Signature`
//! present once and the base64 of a MAC of the algorithm's length,
//! `X-Twilio-Webhooks-Signature-Settings` naming `HMAC_SHA1` or `HMAC_SHA256`,
//! `Content-Type` form or JSON), the signature (every configured token or SharedKey
//! secret, with the algorithm the settings header names, compared in constant time
//! as canonical base64 text, as the SDKs compare it), then the dedupe key:
//! a delivery without `I-Twilio-Idempotency-Token` verifies but is a
//! [`VerifyError::MissingDedupeKey`]. The token is not signed, so its absence says
//! nothing about who sent the request; reporting it after the signature tells the
//! operator that the request was genuine and only the key is missing (a proxy that
//! drops unknown headers).
//!
//! Twilio signs no timestamp and the token is outside the signature: anyone holding
//! a captured request can replay it, with a new token if they like. Serve the
//! endpoint over HTTPS, as Twilio's webhook security guide asks, so that no request
//! can be captured.
//!
//! Twilio sends no event type: the parameters say what happened (`MessageStatus`,
//! `CallStatus`, …). The body is not parsed beyond the form's parameters.
//!
//! # Examples
//! The example of Twilio's SDK tests verifies:
//! ```
//! use hookbox_core::{Provider, http::HeaderMap, time::OffsetDateTime};
//! use hookbox_twilio::Twilio;
//!
//! let twilio = Twilio::new("12345", "https://mycompany.com/myapp.php?foo=1&bar=2")?;
//! let body = "CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234\
//!             &From=%2B14158675309&To=%2B18005551212";
//! let mut headers = HeaderMap::new();
//! headers.insert("X-Twilio-Signature", "RSOYDt4T1cUTdK1PDd93/VVr8B8=".parse()?);
//! headers.insert("Content-Type", "application/x-www-form-urlencoded".parse()?);
//! headers.insert("I-Twilio-Idempotency-Token", "7c8d7a4e-2c77-4b2f-9f4b-6e0d1f7a2b11".parse()?);
//!
//! let delivery = twilio.verify(&headers, body.into(), OffsetDateTime::now_utc())?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "7c8d7a4e-2c77-4b2f-9f4b-6e0d1f7a2b11");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Sign your own test deliveries with [`TwilioSigner`]; behind a proxy the request
//! goes to another address than the public URL both sides are configured with:
//! ```
//! use hookbox_core::{Provider, Signer, time::OffsetDateTime};
//! use hookbox_twilio::{Twilio, TwilioSigner};
//!
//! let url = "https://public.example/webhooks/twilio";
//! let body = b"MessageSid=SM1f0e8ae6ade43cb3c0ce4525424e404f&MessageStatus=delivered";
//! let headers = TwilioSigner::new("test-auth-token", url)?
//!     .sign("idem-1", 0, body)
//!     .to_header_map();
//! let delivery = Twilio::new("test-auth-token", url)?
//!     .verify(&headers, body.as_slice().into(), OffsetDateTime::now_utc())?;
//! assert_eq!(delivery.dedupe_key().delivery_id(), "idem-1");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

mod consts;
mod form;
mod mac;
mod signer;
mod url;
mod verify;

#[cfg(doc)]
use hookbox_core::VerifyError;

pub use consts::{
    BODY_SHA256, CONTENT_TYPE, FORM, IDEMPOTENCY_TOKEN, JSON, MIN_RETENTION, NAME, SIGNATURE,
    SIGNATURE_SETTINGS,
};
pub use signer::TwilioSigner;
pub use url::body_sha256_query;
pub use verify::Twilio;
