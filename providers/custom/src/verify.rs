//! [`Custom`]: a [`Provider`] that verifies what a [`Scheme`] describes.

use hookbox_core::bytes::Bytes;
use hookbox_core::http::HeaderMap;
use hookbox_core::support::{
    BodyKeys, Found, HeaderSpec, MacEncoding, Spelling, diagnose_mismatch, non_canonical_hint,
    scan_into,
};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    DedupeKey, DeliveryParts, DeliveryText, KeptHeaders, Provider, Retention, Secrets,
    VerifiedDelivery, VerifyError, VerifyOptions,
};

use crate::kinds::{Encoding, Source, Unit};
use crate::mac::{Macs, Signed};
use crate::names::{field_path, header_spec, intern};
use crate::parse::{field_text, parse_timestamp, signatures};
use crate::scheme::Scheme;

/// Where a value is found once the scheme is compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// The header at this index of `Custom::headers`.
    Header(usize),
    /// The body field at this index of `Custom::body`.
    Field(usize),
}

/// Verifies the webhooks of the provider a [`Scheme`] describes.
///
/// Verification checks, in order: the body size; the headers (the signature, and
/// the id and timestamp headers the scheme names, each present once); the signature
/// over the raw bytes, every secret against every signature, in constant time; the
/// timestamp window; then the body, when a value lives in it (a JSON object, else
/// [`VerifyError::MalformedBody`]). A missing or empty id is a
/// [`VerifyError::MissingDedupeKey`]; a missing event type is no event type.
///
/// Dedupe keys are scoped by the scheme's name: it is the key's provider, and its
/// source unless [`VerifyOptions::source`] names another.
///
/// # Examples
/// ```
/// use hookbox_core::{Provider, Retention, Signer, time::OffsetDateTime};
/// use hookbox_custom::{Algorithm, Custom, CustomSigner, Encoding, Scheme, Source};
///
/// let scheme = Scheme::builder("acme")
///     .signature("Acme-Signature", Algorithm::Sha256, Encoding::Base64)
///     .prefix("sha256=")
///     .signed("{body}")
///     .id(Source::field("event_id"))
///     .event_type(Source::field("event_type"))
///     .retention(Retention::from_days(1))
///     .build()?;
/// let body = br#"{"event_id":"01HW8","event_type":"form_response"}"#;
/// let headers = CustomSigner::new(scheme.clone(), "secret")?.sign("", 0, body).to_header_map();
/// let delivery = Custom::new(scheme, "secret")?
///     .verify(&headers, body.as_slice().into(), OffsetDateTime::now_utc())?;
/// assert_eq!(delivery.dedupe_key().delivery_id(), "01HW8");
/// assert_eq!(delivery.provider(), "acme");
/// assert_eq!(delivery.event_type(), Some("form_response"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Custom {
    scheme: Scheme,
    name: &'static str,
    /// The signature header first, then the id, timestamp and event type headers the
    /// scheme reads, in that order.
    headers: Vec<HeaderSpec>,
    id: Slot,
    timestamp: Option<(Slot, Unit)>,
    event_type: Option<Slot>,
    /// The reader of the body fields, when a value lives in the body.
    body: Option<BodyKeys>,
    /// The body fields read, by `Slot::Field` index, for errors.
    fields: Vec<&'static str>,
    macs: Macs,
    secrets: Secrets,
    options: VerifyOptions,
}

impl Custom {
    /// Accepts webhooks signed as `scheme` says with any of `secrets` (several
    /// during a rotation), each used as text. The tolerance is the scheme's.
    ///
    /// # Errors
    /// [`VerifyError::InvalidSecret`] when no secret is given or one is blank.
    pub fn new(scheme: Scheme, secrets: impl Into<Secrets>) -> Result<Self, VerifyError> {
        let secrets = secrets.into();
        let macs = Macs::new(&scheme, &secrets)?;
        let mut headers = vec![header_spec(&scheme.signature_header)];
        let mut fields = Vec::new();
        let mut slot = |source: &Source| match source {
            Source::Header(name) => {
                headers.push(header_spec(name));
                Slot::Header(headers.len() - 1)
            }
            Source::Field(name) => {
                let name = intern(name);
                // one path per field: the id and the event type may be the same field
                let index = fields.iter().position(|known| *known == name);
                Slot::Field(index.unwrap_or_else(|| {
                    fields.push(name);
                    fields.len() - 1
                }))
            }
        };
        let id = slot(&scheme.id);
        let timestamp = scheme
            .timestamp
            .as_ref()
            .map(|(source, unit)| (slot(source), *unit));
        let event_type = scheme.event_type.as_ref().map(&mut slot);
        let paths: Vec<_> = fields.iter().map(|field| field_path(field)).collect();
        let body = (!paths.is_empty()).then(|| BodyKeys::new(&paths));
        let mut options = VerifyOptions::default();
        if let Some(tolerance) = scheme.tolerance {
            options = options.tolerance(tolerance);
        }
        Ok(Self {
            name: intern(&scheme.name),
            scheme,
            headers,
            id,
            timestamp,
            event_type,
            body,
            fields,
            macs,
            secrets,
            options,
        })
    }

    /// Replaces the default options (tolerance, body limit, source name); start from
    /// `custom.options().clone()` to keep the scheme's tolerance.
    pub fn with_options(mut self, options: VerifyOptions) -> Self {
        self.options = options;
        self
    }

    /// Returns the scheme this provider verifies.
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    fn label(&self, slot: Slot) -> &'static str {
        match slot {
            Slot::Header(index) => self.headers[index].label(),
            Slot::Field(index) => self.fields[index],
        }
    }

    /// Explains why no key's MAC over `signed` is among the texts `received()`
    /// yields; runs only on the failure path.
    fn mismatch<'r, I>(&self, signed: &Signed<'_>, received: impl Fn() -> I) -> VerifyError
    where
        I: Iterator<Item = &'r str>,
    {
        let scheme = &self.scheme;
        let encoding = match scheme.encoding {
            Encoding::Hex => MacEncoding::LowerHex,
            Encoding::Base64 => MacEncoding::Base64,
        };
        let bytes = scheme.algorithm.mac_len();
        let (mut canonical, mut other) = (false, None);
        for text in received() {
            match encoding.spelling(text, bytes) {
                Spelling::Canonical => canonical = true,
                Spelling::NonCanonical(spelling) => {
                    other.get_or_insert(spelling);
                }
                Spelling::Invalid => {}
            }
        }
        let hint = match other {
            None if !canonical => {
                return VerifyError::malformed(
                    self.headers[0].label(),
                    format!(
                        "no signature is a {}-byte {} MAC in {}{}",
                        bytes,
                        scheme.algorithm,
                        encoding.canonical(),
                        scheme
                            .prefix
                            .as_ref()
                            .map(|prefix| format!(" after `{prefix}`"))
                            .unwrap_or_default(),
                    ),
                );
            }
            Some(spelling) if !canonical => {
                non_canonical_hint(scheme.name(), spelling, encoding.canonical())
            }
            _ => diagnose_mismatch(&self.secrets, signed.body, |secret, body| {
                let signed = Signed { body, ..*signed };
                self.macs.matches_with(secret, &signed, &received)
            }),
        };
        let hint = match scheme.url() {
            Some(url) if hint.starts_with("no configured secret") => format!(
                "{hint}. The scheme also signs the URL: check that `{url}` is exactly the webhook's URL as configured at the provider, not the one this server sees behind a proxy"
            ),
            _ => hint,
        };
        VerifyError::SignatureMismatch { hint }
    }
}

impl Provider for Custom {
    /// Returns the scheme's name.
    fn name(&self) -> &'static str {
        self.name
    }

    fn min_retention(&self) -> Retention {
        self.scheme.retention
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
        let scheme = &self.scheme;

        // the headers: one pass for all of them
        let mut found = [Found::absent(&self.headers[0]); 4];
        for (found, spec) in found.iter_mut().zip(&self.headers) {
            *found = Found::absent(spec);
        }
        let found = &mut found[..self.headers.len()];
        scan_into(headers, found);
        let mut kept = KeptHeaders::with_capacity(found.len());
        let signature = found[0].take_required(&mut kept)?;
        let id_header = match self.id {
            Slot::Header(index) => Some(found[index].take_required(&mut kept)?),
            Slot::Field(_) => None,
        };
        let timestamp_header = match self.timestamp {
            Some((Slot::Header(index), unit)) => {
                let text = found[index].take_required(&mut kept)?;
                let unix = parse_timestamp(text, unit).map_err(|reason| {
                    VerifyError::malformed(found[index].spec().label(), reason)
                })?;
                Some((text, unix))
            }
            _ => None,
        };
        let event_header = match self.event_type {
            Some(Slot::Header(index)) => found[index].take(&mut kept)?,
            _ => None,
        };
        let prefix = scheme.prefix.as_deref();
        let received = || signatures(signature, prefix, scheme.separator);
        if received().next().is_none() {
            return Err(VerifyError::malformed(
                self.headers[0].label(),
                match prefix {
                    Some(prefix) => format!("no signature after `{prefix}`"),
                    None => "no signature".to_string(),
                },
            ));
        }

        // the signature over the raw bytes
        let signed = Signed {
            body: &body,
            timestamp: timestamp_header.map_or("", |(text, _)| text),
            id: id_header.unwrap_or_default(),
        };
        if !self.macs.any_matches(&signed, received) {
            return Err(self.mismatch(&signed, received));
        }

        // the timestamp window
        let mut signed_at = match timestamp_header {
            Some((_, unix)) => Some(self.options.check_timestamp(unix, now)?),
            None => None,
        };

        // the body, authenticated now
        let fields = match &self.body {
            Some(reader) => Some(
                reader
                    .read(&body)
                    .map_err(|err| VerifyError::MalformedBody {
                        reason: format!(
                            "the body is not a JSON object ({err}); {} reads `{}` from it",
                            scheme.name,
                            self.fields.join("`, `"),
                        ),
                    })?,
            ),
            None => None,
        };
        let field = |index| fields.as_ref().and_then(|fields| field_text(fields, index));
        if let Some((Slot::Field(index), unit)) = self.timestamp {
            let label = self.fields[index];
            let text = field(index).ok_or_else(|| VerifyError::MalformedBody {
                reason: format!("the body has no `{label}` timestamp"),
            })?;
            let unix =
                parse_timestamp(text, unit).map_err(|reason| VerifyError::MalformedBody {
                    reason: format!("`{label}`: {reason}"),
                })?;
            signed_at = Some(self.options.check_timestamp(unix, now)?);
        }
        let id = match self.id {
            Slot::Header(_) => id_header,
            Slot::Field(index) => field(index),
        };
        let Some(id) = id.filter(|id| !id.is_empty()) else {
            return Err(VerifyError::MissingDedupeKey {
                field: self.label(self.id).to_string(),
            });
        };
        let event_type = match self.event_type {
            Some(Slot::Header(_)) => event_header,
            Some(Slot::Field(index)) => field(index),
            None => None,
        };

        let key = DedupeKey::new(self.options.source_or(self.name), self.name, id);
        let event_type = event_type.map(DeliveryText::from);
        Ok(VerifiedDelivery::from_parts(DeliveryParts {
            key,
            body: body.clone(),
            headers: kept,
            event_type,
            correlation_id: None,
            signed_at,
        }))
    }
}
