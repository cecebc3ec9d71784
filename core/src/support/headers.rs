//! Reading a provider's headers: one lookup or one pass for all, typed errors for a
//! missing, repeated or non-ASCII header, and signed Unix timestamps.

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::{KeptHeaders, VerifyError};

/// A header as the provider documents it: the lowercase name used for lookup and
/// the spelling shown in error messages.
#[derive(Debug, Clone)]
pub struct HeaderSpec {
    name: HeaderName,
    label: &'static str,
}

impl HeaderSpec {
    /// A header looked up by `lowercase` (which must be lowercase) and reported as
    /// `label`.
    pub const fn new(label: &'static str, lowercase: &'static str) -> Self {
        Self {
            name: HeaderName::from_static(lowercase),
            label,
        }
    }

    /// Returns the name used for lookup.
    pub fn name(&self) -> &HeaderName {
        &self.name
    }

    /// Returns the documented spelling.
    pub fn label(&self) -> &'static str {
        self.label
    }

    /// Returns the header's value; `None` when it is absent or empty.
    ///
    /// # Errors
    /// [`VerifyError::MalformedHeader`] when it is sent more than once (a proxy or an
    /// attacker appended a copy; which one is real is unknowable) or holds bytes that
    /// are not visible ASCII.
    pub fn get<'h>(&self, headers: &'h HeaderMap) -> Result<Option<&'h str>, VerifyError> {
        self.lookup(headers).get()
    }

    /// Returns the header's value, as [`HeaderSpec::get`], and keeps a copy of it in
    /// `kept` so the delivery can be verified again later.
    ///
    /// # Errors
    /// As [`HeaderSpec::get`].
    pub fn take<'h>(
        &self,
        headers: &'h HeaderMap,
        kept: &mut KeptHeaders,
    ) -> Result<Option<&'h str>, VerifyError> {
        self.lookup(headers).take(kept)
    }

    /// Returns the header's value and keeps a copy, as [`HeaderSpec::take`].
    ///
    /// # Errors
    /// [`VerifyError::MissingHeader`] when absent or empty, else as [`HeaderSpec::get`].
    pub fn take_required<'h>(
        &self,
        headers: &'h HeaderMap,
        kept: &mut KeptHeaders,
    ) -> Result<&'h str, VerifyError> {
        self.lookup(headers).take_required(kept)
    }

    /// Returns the header's value.
    ///
    /// # Errors
    /// [`VerifyError::MissingHeader`] when absent or empty, else as [`HeaderSpec::get`].
    pub fn require<'h>(&self, headers: &'h HeaderMap) -> Result<&'h str, VerifyError> {
        self.lookup(headers).require()
    }

    /// Builds the [`VerifyError::MissingHeader`] that names this header.
    pub fn missing(&self) -> VerifyError {
        VerifyError::MissingHeader {
            header: self.label.to_string(),
        }
    }

    /// Looks the header up in `headers` (one hash lookup).
    fn lookup<'h, 's>(&'s self, headers: &'h HeaderMap) -> Found<'h, 's> {
        let mut values = headers.get_all(&self.name).iter();
        let slot = match (values.next(), values.next()) {
            (None, _) => Slot::Absent,
            (Some(value), None) => Slot::Once(value),
            (Some(_), Some(_)) => Slot::Repeated,
        };
        Found { spec: self, slot }
    }
}

/// What a scan found for one header.
#[derive(Debug, Clone, Copy)]
enum Slot<'h> {
    Absent,
    Once(&'h HeaderValue),
    Repeated,
}

/// One header of a [`scan`]: the spec it was looked up by and what the request held.
#[derive(Debug, Clone, Copy)]
pub struct Found<'h, 's> {
    spec: &'s HeaderSpec,
    slot: Slot<'h>,
}

impl<'h, 's> Found<'h, 's> {
    /// A header of `spec` not (yet) found: fill a buffer with these and pass it to
    /// [`scan_into`].
    pub fn absent(spec: &'s HeaderSpec) -> Self {
        Self {
            spec,
            slot: Slot::Absent,
        }
    }

    /// Returns the spec this header was looked up by.
    pub fn spec(&self) -> &'s HeaderSpec {
        self.spec
    }

    /// Returns the header's value; `None` when it is absent or empty.
    ///
    /// # Errors
    /// As [`HeaderSpec::get`].
    pub fn get(&self) -> Result<Option<&'h str>, VerifyError> {
        Ok(self.value()?.map(|(_, text)| text))
    }

    /// Returns the header's value and keeps a copy of it in `kept`, as
    /// [`HeaderSpec::take`].
    ///
    /// # Errors
    /// As [`HeaderSpec::get`].
    pub fn take(&self, kept: &mut KeptHeaders) -> Result<Option<&'h str>, VerifyError> {
        Ok(self.value()?.map(|(value, text)| {
            kept.push(self.spec.name.clone(), value.clone());
            text
        }))
    }

    /// Returns the header's value and keeps a copy, as [`HeaderSpec::take_required`].
    ///
    /// # Errors
    /// [`VerifyError::MissingHeader`] when absent or empty, else as [`HeaderSpec::get`].
    pub fn take_required(&self, kept: &mut KeptHeaders) -> Result<&'h str, VerifyError> {
        self.take(kept)?.ok_or_else(|| self.spec.missing())
    }

    /// Returns the header's value.
    ///
    /// # Errors
    /// [`VerifyError::MissingHeader`] when absent or empty, else as [`HeaderSpec::get`].
    pub fn require(&self) -> Result<&'h str, VerifyError> {
        self.get()?.ok_or_else(|| self.spec.missing())
    }

    fn value(&self) -> Result<Option<(&'h HeaderValue, &'h str)>, VerifyError> {
        let value = match self.slot {
            Slot::Absent => return Ok(None),
            Slot::Once(value) => value,
            Slot::Repeated => {
                return Err(VerifyError::malformed(
                    self.spec.label,
                    "sent more than once; the provider sends it once per request",
                ));
            }
        };
        let text = visible_ascii(value.as_bytes()).ok_or_else(|| {
            VerifyError::malformed(self.spec.label, "contains bytes that are not visible ASCII")
        })?;
        Ok((!text.is_empty()).then_some((value, text)))
    }
}

/// Returns the value as text when every byte is visible ASCII or a tab, as
/// [`HeaderValue::to_str`] requires.
///
/// A [`HeaderValue`] never holds a control character other than a tab, nor DEL (`http`
/// refuses them when it builds one), so that is: no byte above 0x7f. Both passes (the
/// ASCII test, then the UTF-8 check safe code needs for a `&str`) read eight bytes at
/// a time.
#[inline]
fn visible_ascii(bytes: &[u8]) -> Option<&str> {
    if bytes.is_ascii() {
        std::str::from_utf8(bytes).ok()
    } else {
        None
    }
}

/// Finds every header of `specs` in one pass over `headers`.
///
/// A [`HeaderMap`] lookup hashes the name and probes the table; a provider reads three
/// to fourteen names, most of which a request does not share a length with, so one
/// pass that compares lengths first costs a fraction of the lookups for the dozen or
/// so headers a webhook request carries.
///
/// # Examples
/// ```
/// use hookbox_core::support::{HeaderSpec, scan};
/// static ID: HeaderSpec = HeaderSpec::new("Acme-Id", "acme-id");
/// static EVENT: HeaderSpec = HeaderSpec::new("Acme-Event", "acme-event");
///
/// let mut headers = http::HeaderMap::new();
/// headers.insert("acme-id", "msg_1".parse()?);
/// let [id, event] = scan(&headers, [&ID, &EVENT]);
/// assert_eq!(id.require()?, "msg_1");
/// assert_eq!(event.get()?, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn scan<'h, 's, const N: usize>(
    headers: &'h HeaderMap,
    specs: [&'s HeaderSpec; N],
) -> [Found<'h, 's>; N] {
    let mut found = specs.map(Found::absent);
    scan_into(headers, &mut found);
    found
}

/// Fills `found` in one pass over `headers`, as [`scan`] does, for lists whose length
/// is known only at run time.
pub fn scan_into<'h>(headers: &'h HeaderMap, found: &mut [Found<'h, '_>]) {
    // one bit per wanted name length; a name of 128 bytes or more sets bit 127 and
    // so is compared whenever a header that long arrives
    let bit = |len: usize| 1u128 << len.min(127);
    let lengths = found
        .iter()
        .fold(0u128, |mask, f| mask | bit(f.spec.name.as_str().len()));
    for (name, value) in headers {
        let name = name.as_str();
        if lengths & bit(name.len()) == 0 {
            continue;
        }
        if let Some(f) = found.iter_mut().find(|f| f.spec.name.as_str() == name) {
            f.slot = match f.slot {
                Slot::Absent => Slot::Once(value),
                Slot::Once(_) | Slot::Repeated => Slot::Repeated,
            };
        }
    }
}

/// Returns the first of `specs` that is present (and not empty), with the spelling
/// that matched, keeping a copy in `kept`: for providers that accept two header
/// families (Svix's `svix-*` and `webhook-*`, Shopify's two).
///
/// # Errors
/// As [`HeaderSpec::get`] for the first header present.
pub fn first_present<'s, 'h>(
    headers: &'h HeaderMap,
    specs: &[&'s HeaderSpec],
    kept: &mut KeptHeaders,
) -> Result<Option<(&'s HeaderSpec, &'h str)>, VerifyError> {
    for spec in specs {
        if let Some(value) = spec.take(headers, kept)? {
            return Ok(Some((spec, value)));
        }
    }
    Ok(None)
}

/// Returns the first of `family` that is present (and not empty), as
/// [`first_present`] does, from headers already [scanned](scan).
///
/// # Errors
/// As [`HeaderSpec::get`] for the first header present.
pub fn first_found<'s, 'h>(
    family: &[Found<'h, 's>],
    kept: &mut KeptHeaders,
) -> Result<Option<(&'s HeaderSpec, &'h str)>, VerifyError> {
    for found in family {
        if let Some(value) = found.take(kept)? {
            return Ok(Some((found.spec, value)));
        }
    }
    Ok(None)
}

/// Parses a signed Unix timestamp in seconds: ASCII digits only, at most 19 of them
/// (no sign, no fraction, no whitespace).
///
/// # Errors
/// [`VerifyError::MalformedHeader`] naming `header`.
pub fn parse_unix_seconds(header: &str, value: &str) -> Result<i64, VerifyError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VerifyError::malformed(
            header,
            "the timestamp is not a whole number of seconds since the Unix epoch",
        ));
    }
    value
        .parse::<i64>()
        .map_err(|_| VerifyError::malformed(header, "the timestamp is too large to be a Unix time"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_plain_digits() {
        assert_eq!(parse_unix_seconds("t", "1614265330"), Ok(1_614_265_330));
        for bad in [
            "",
            "-5",
            "+5",
            " 5",
            "5 ",
            "1.5",
            "abc",
            "99999999999999999999",
        ] {
            let err = parse_unix_seconds("t", bad).unwrap_err();
            assert_eq!(err.kind(), "malformed_header", "{bad:?}");
        }
    }

    #[test]
    fn header_spec_rejects_duplicates_and_non_ascii() {
        let spec = HeaderSpec::new("X-Test", "x-test");
        let mut headers = HeaderMap::new();
        assert_eq!(spec.get(&headers), Ok(None));
        assert_eq!(spec.require(&headers).unwrap_err().kind(), "missing_header");
        headers.insert("x-test", "".parse().unwrap());
        assert_eq!(spec.require(&headers).unwrap_err().kind(), "missing_header");
        headers.insert(
            "x-test",
            http::HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
        );
        assert_eq!(spec.get(&headers).unwrap_err().kind(), "malformed_header");
        headers.insert("x-test", "a".parse().unwrap());
        headers.append("x-test", "b".parse().unwrap());
        assert_eq!(spec.get(&headers).unwrap_err().kind(), "malformed_header");
    }

    #[test]
    fn the_visible_ascii_check_is_http_s() {
        let mut samples: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for b in 0..=255u8 {
            for at in [0, 5, 7, 8, 9, 15, 16, 20] {
                let mut value = b"sha256=0123456789abcdef0123".to_vec();
                value[at] = b;
                samples.push(value);
            }
        }
        for value in samples {
            if let Ok(header) = HeaderValue::from_bytes(&value) {
                assert_eq!(visible_ascii(&value), header.to_str().ok(), "{value:?}");
            }
        }
    }

    #[test]
    fn a_scan_finds_what_lookups_find() {
        static A: HeaderSpec = HeaderSpec::new("X-A", "x-a");
        static B: HeaderSpec = HeaderSpec::new("X-Bb", "x-bb");
        static C: HeaderSpec = HeaderSpec::new("X-Cc", "x-cc");
        let long = format!("x-{}", "l".repeat(200));
        let l = HeaderSpec {
            name: HeaderName::from_bytes(long.as_bytes()).unwrap(),
            label: "X-Long",
        };
        let mut headers = HeaderMap::new();
        headers.insert("x-a", "1".parse().unwrap());
        headers.insert("x-bb", "".parse().unwrap());
        headers.insert("x-cc", "3".parse().unwrap());
        headers.append("x-cc", "4".parse().unwrap());
        headers.insert("content-type", "application/json".parse().unwrap());
        headers.insert("x-dd", "5".parse().unwrap());
        headers.insert(
            HeaderName::from_bytes(long.as_bytes()).unwrap(),
            "6".parse().unwrap(),
        );
        let other = format!("x-{}", "m".repeat(200));
        headers.insert(
            HeaderName::from_bytes(other.as_bytes()).unwrap(),
            "7".parse().unwrap(),
        );
        let [a, b, c, found_long] = scan(&headers, [&A, &B, &C, &l]);
        for (found, spec) in [(a, &A), (b, &B), (c, &C), (found_long, &l)] {
            assert_eq!(found.get(), spec.get(&headers), "{}", spec.label());
        }
        assert_eq!(a.get(), Ok(Some("1")));
        assert_eq!(b.get(), Ok(None));
        assert_eq!(c.get().unwrap_err().kind(), "malformed_header");
        assert_eq!(found_long.get(), Ok(Some("6")));

        let mut kept = KeptHeaders::default();
        let z = HeaderSpec::new("X-Z", "x-z");
        let [missing, present] = scan(&headers, [&z, &A]);
        let (spec, value) = first_found(&[missing, present], &mut kept)
            .unwrap()
            .unwrap();
        assert_eq!((spec.label(), value), ("X-A", "1"));
        assert_eq!(kept.len(), 1);
    }
}
