//! What differs between senders of the Standard Webhooks scheme, as data.

use hookbox_core::http::HeaderMap;
use hookbox_core::support::{Found, HeaderSpec, first_found, scan_into};
use hookbox_core::{KeptHeaders, Retention, VerifyError};

/// One sender's deployment of the Standard Webhooks scheme: its name, the header
/// spellings it uses, how long it retries, and whether it signs with ed25519.
///
/// Each header is a list of [`HeaderSpec`]s tried in order, each header on its own:
/// Svix sends `svix-id` but its libraries also accept `webhook-id`. The first spec of
/// a list is the spelling errors name and signers send. An empty list never matches.
///
/// # Examples
/// A sender that uses the scheme under its own header names:
/// ```
/// use hookbox_core::{Retention, support::HeaderSpec};
/// use hookbox_standard::{Scheme, Standard};
///
/// // statics, not consts: the lists hold `&'static` references
/// static ACME_ID: HeaderSpec = HeaderSpec::new("acme-id", "acme-id");
/// static ACME_TIMESTAMP: HeaderSpec = HeaderSpec::new("acme-timestamp", "acme-timestamp");
/// static ACME_SIGNATURE: HeaderSpec = HeaderSpec::new("acme-signature", "acme-signature");
/// const ACME: Scheme = Scheme {
///     name: "acme",
///     id: &[&ACME_ID],
///     timestamp: &[&ACME_TIMESTAMP],
///     signature: &[&ACME_SIGNATURE],
///     min_retention: Retention::from_hours(24),
///     ed25519: false,
/// };
/// let acme = Standard::with_scheme(ACME, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?;
/// assert_eq!(hookbox_core::Provider::name(&acme), "acme");
/// # Ok::<(), hookbox_core::VerifyError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Scheme {
    /// The provider's name in dedupe keys, errors and `hookbox verify --provider`.
    pub name: &'static str,
    /// The message id header (the dedupe key), in lookup order.
    pub id: &'static [&'static HeaderSpec],
    /// The signed Unix timestamp header, in lookup order.
    pub timestamp: &'static [&'static HeaderSpec],
    /// The signature list header, in lookup order.
    pub signature: &'static [&'static HeaderSpec],
    /// How long the sender can resend a delivery.
    pub min_retention: Retention,
    /// Whether `v1a` (ed25519) signatures, `whpk_` public keys and `whsk_` signing
    /// keys are accepted; when `false` a `v1a` entry is an unknown version.
    pub ed25519: bool,
}

/// A header as one of a scheme's lists found it.
pub(crate) struct Present<'h> {
    pub(crate) spec: &'static HeaderSpec,
    pub(crate) value: &'h str,
}

/// Returns the first header of `family` that is present and not empty, with the
/// spelling that matched, keeping a copy in `kept`.
///
/// # Errors
/// [`VerifyError::MissingHeader`] naming the family's first spelling, or a
/// [`VerifyError::MalformedHeader`] from [`Found::get`].
pub(crate) fn require<'h>(
    family: &[Found<'h, 'static>],
    kept: &mut KeptHeaders,
) -> Result<Present<'h>, VerifyError> {
    match first_found(family, kept)? {
        Some((spec, value)) => Ok(Present { spec, value }),
        None => Err(VerifyError::MissingHeader {
            header: family
                .first()
                .map_or("(no header configured)", |found| found.spec().label())
                .to_string(),
        }),
    }
}

/// The most header spellings a scheme can list in all before [`Scheme`]'s headers are
/// found with a heap buffer; the built-in schemes list three (Standard Webhooks) and
/// six (Svix).
pub(crate) const INLINE_SPELLINGS: usize = 8;

impl Scheme {
    /// Finds the scheme's headers in one pass over `headers` and hands the id,
    /// timestamp and signature families to `f`.
    pub(crate) fn scan<'h, T>(
        &self,
        headers: &'h HeaderMap,
        f: impl FnOnce(&[Found<'h, 'static>], &[Found<'h, 'static>], &[Found<'h, 'static>]) -> T,
    ) -> T {
        let specs = self.id.iter().chain(self.timestamp).chain(self.signature);
        let (ids, timestamps) = (self.id.len(), self.timestamp.len());
        let total = ids + timestamps + self.signature.len();
        let split = |found: &[Found<'h, 'static>]| {
            let (id, rest) = found.split_at(ids);
            let (timestamp, signature) = rest.split_at(timestamps);
            f(id, timestamp, signature)
        };
        match specs.clone().next() {
            None => split(&[]),
            Some(first) if total <= INLINE_SPELLINGS => {
                let mut found = [Found::absent(first); INLINE_SPELLINGS];
                for (slot, spec) in found.iter_mut().zip(specs) {
                    *slot = Found::absent(spec);
                }
                scan_into(headers, &mut found[..total]);
                split(&found[..total])
            }
            Some(_) => {
                // a scheme of many spellings: one heap buffer rather than a limit
                let mut found: Vec<_> = specs.map(|spec| Found::absent(spec)).collect();
                scan_into(headers, &mut found);
                split(&found)
            }
        }
    }
}

/// Returns the spelling errors name and signers send for `family`.
pub(crate) fn label(family: &[&HeaderSpec]) -> &'static str {
    family
        .first()
        .map_or("(no header configured)", |spec| spec.label())
}
