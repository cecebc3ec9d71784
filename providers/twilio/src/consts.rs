//! The provider's name, retention floor, header names and content types.

use hookbox_core::Retention;
use hookbox_core::support::HeaderSpec;

/// The provider's name in dedupe keys and `hookbox verify --provider`.
pub const NAME: &str = "twilio";

/// Keys must outlive Twilio's retries: at most 5 within 15 seconds; an hour, with room.
pub const MIN_RETENTION: Retention = Retention::from_hours(1);

/// `X-Twilio-Signature`: the base64 HMAC of the public URL and the parameters.
pub const SIGNATURE: HeaderSpec = HeaderSpec::new("X-Twilio-Signature", "x-twilio-signature");
/// `X-Twilio-Webhooks-Signature-Settings`: `key=<SharedKey>,algorithm=HMAC_SHA256` when
/// a Webhook Setting signs with a SharedKey; absent for the Auth Token's HMAC-SHA1.
pub const SIGNATURE_SETTINGS: HeaderSpec = HeaderSpec::new(
    "X-Twilio-Webhooks-Signature-Settings",
    "x-twilio-webhooks-signature-settings",
);
/// `I-Twilio-Idempotency-Token`: the same on every retry of a request; the dedupe key.
pub const IDEMPOTENCY_TOKEN: HeaderSpec =
    HeaderSpec::new("I-Twilio-Idempotency-Token", "i-twilio-idempotency-token");
/// `Content-Type`: form parameters or JSON, which decides what is signed.
pub const CONTENT_TYPE: HeaderSpec = HeaderSpec::new("Content-Type", "content-type");

/// The query parameter Twilio appends to the URL of a JSON request.
pub const BODY_SHA256: &str = "bodySHA256";
/// The media type of a form body, whose parameters are signed.
pub const FORM: &str = "application/x-www-form-urlencoded";
/// The media type of a JSON body, signed through [`BODY_SHA256`].
pub const JSON: &str = "application/json";
