//! The filters as the pages carry them: read from a query string or a form body,
//! turned into the store's [`InboxFilter`] and [`OutboxFilter`], and written back
//! into links and hidden form fields.

use std::fmt::Write as _;

use hookbox_core::time::format_description::well_known::Rfc3339;
use hookbox_core::time::{OffsetDateTime, PrimitiveDateTime, UtcOffset};
use hookbox_core::{DeliveryState, InboxFilter, MessageState, OutboxFilter};

use crate::html::{Esc, query};

/// The default number of rows on a page.
pub(crate) const PAGE_SIZE: u32 = 50;
/// The most rows one page shows.
pub(crate) const MAX_PAGE_SIZE: u32 = 500;

/// A query string or form body's pairs, the first value of each name.
#[derive(Debug, Default, Clone)]
pub(crate) struct Params(Vec<(String, String)>);

impl Params {
    /// Parses `application/x-www-form-urlencoded` bytes.
    pub(crate) fn parse(bytes: &[u8]) -> Self {
        Self(form_urlencoded::parse(bytes).into_owned().collect())
    }

    /// Returns the trimmed value of `name`, `None` when absent or blank.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }
}

/// The deliveries page's filter, as typed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct InboxQuery {
    pub(crate) state: String,
    pub(crate) provider: String,
    pub(crate) event_type: String,
    pub(crate) since: String,
    pub(crate) until: String,
    pub(crate) delivery_id: String,
    pub(crate) body: String,
}

impl InboxQuery {
    /// The names of the filter's fields, in the order the form shows them.
    const FIELDS: [&'static str; 7] = [
        "state",
        "provider",
        "event_type",
        "since",
        "until",
        "delivery_id",
        "body",
    ];

    pub(crate) fn from_params(params: &Params) -> Self {
        let value = |name| params.get(name).unwrap_or_default().to_string();
        Self {
            state: value("state"),
            provider: value("provider"),
            event_type: value("event_type"),
            since: value("since"),
            until: value("until"),
            delivery_id: value("delivery_id"),
            body: value("body"),
        }
    }

    fn values(&self) -> [&str; 7] {
        [
            &self.state,
            &self.provider,
            &self.event_type,
            &self.since,
            &self.until,
            &self.delivery_id,
            &self.body,
        ]
    }

    /// The filter's pairs, without the empty ones.
    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&'static str, &str)> {
        Self::FIELDS
            .into_iter()
            .zip(self.values())
            .filter(|(_, v)| !v.is_empty())
    }

    /// The filter as a query string (no `?`).
    pub(crate) fn to_query(&self) -> String {
        query(self.pairs())
    }

    /// The filter as hidden form fields.
    pub(crate) fn hidden_fields(&self) -> String {
        hidden_fields(self.pairs())
    }

    /// Returns `true` when no condition is set.
    pub(crate) fn is_empty(&self) -> bool {
        self.pairs().next().is_none()
    }

    /// The store's filter; `Err` names the field that does not parse.
    pub(crate) fn to_filter(&self) -> Result<InboxFilter, String> {
        let state = match self.state.as_str() {
            "" => None,
            name => {
                Some(DeliveryState::parse(name).ok_or_else(|| format!("unknown state {name:?}"))?)
            }
        };
        let some = |v: &str| (!v.is_empty()).then(|| v.to_string());
        Ok(InboxFilter {
            state,
            provider: some(&self.provider),
            event_type: some(&self.event_type),
            received_since: parse_time(&self.since).map_err(|e| format!("since: {e}"))?,
            received_before: parse_time(&self.until).map_err(|e| format!("until: {e}"))?,
            delivery_id: some(&self.delivery_id),
            body_contains: some(&self.body),
            ..InboxFilter::default()
        })
    }

    /// A short description of the filter for confirmations and log lines, e.g.
    /// `state=dead provider=stripe`, or `every delivery`.
    pub(crate) fn describe(&self) -> String {
        if self.is_empty() {
            return "every delivery".to_string();
        }
        describe(self.pairs())
    }
}

/// The outbox page's filter, as typed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct OutboxQuery {
    pub(crate) state: String,
    pub(crate) sink: String,
}

impl OutboxQuery {
    pub(crate) fn from_params(params: &Params) -> Self {
        Self {
            state: params.get("state").unwrap_or_default().to_string(),
            sink: params.get("sink").unwrap_or_default().to_string(),
        }
    }

    pub(crate) fn pairs(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [("state", self.state.as_str()), ("sink", self.sink.as_str())]
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
    }

    pub(crate) fn to_query(&self) -> String {
        query(self.pairs())
    }

    pub(crate) fn hidden_fields(&self) -> String {
        hidden_fields(self.pairs())
    }

    pub(crate) fn to_filter(&self) -> Result<OutboxFilter, String> {
        let state = match self.state.as_str() {
            "" => None,
            name => {
                Some(MessageState::parse(name).ok_or_else(|| format!("unknown state {name:?}"))?)
            }
        };
        Ok(OutboxFilter {
            state,
            sink: (!self.sink.is_empty()).then(|| self.sink.clone()),
            key: None,
            before_seq: None,
        })
    }

    pub(crate) fn describe(&self) -> String {
        if self.pairs().next().is_none() {
            return "every message".to_string();
        }
        describe(self.pairs())
    }
}

fn describe<'a>(pairs: impl Iterator<Item = (&'static str, &'a str)>) -> String {
    let mut out = String::new();
    for (name, value) in pairs {
        if !out.is_empty() {
            out.push(' ');
        }
        let _ = write!(out, "{name}={value:?}");
    }
    out
}

fn hidden_fields<'a>(pairs: impl Iterator<Item = (&'static str, &'a str)>) -> String {
    let mut out = String::new();
    for (name, value) in pairs {
        let _ = write!(
            out,
            "<input type=\"hidden\" name=\"{name}\" value=\"{}\">",
            Esc(value)
        );
    }
    out
}

/// Reads a time as a `datetime-local` input sends it (`2026-12-03T10:15`, with or
/// without seconds, taken as UTC) or as RFC 3339; `None` for an empty text.
pub(crate) fn parse_time(text: &str) -> Result<Option<OffsetDateTime>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    if let Ok(at) = OffsetDateTime::parse(text, &Rfc3339) {
        return Ok(Some(at));
    }
    let with_seconds = if text.len() == 16 {
        format!("{text}:00")
    } else {
        text.to_string()
    };
    let format = hookbox_core::time::format_description::parse_borrowed::<2>(
        "[year]-[month]-[day]T[hour]:[minute]:[second]",
    )
    .map_err(|e| e.to_string())?;
    PrimitiveDateTime::parse(&with_seconds, &format)
        .map(|at| Some(at.assume_offset(UtcOffset::UTC)))
        .map_err(|_| "expected a time like 2026-12-03T10:15 (UTC)".to_string())
}

/// Reads a page size: [`PAGE_SIZE`] when absent, at most [`MAX_PAGE_SIZE`].
pub(crate) fn page_size(params: &Params) -> u32 {
    params
        .get("limit")
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|n| *n > 0)
        .map_or(PAGE_SIZE, |n| n.min(MAX_PAGE_SIZE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_reads_into_a_filter_and_back() {
        let params = Params::parse(
            b"state=dead&provider=stripe&event_type=&since=2026-12-03T10%3A15&body=%3Cscript%3E&before=99",
        );
        let query = InboxQuery::from_params(&params);
        let filter = query.to_filter().unwrap();
        assert_eq!(filter.state, Some(DeliveryState::Dead));
        assert_eq!(filter.provider.as_deref(), Some("stripe"));
        assert_eq!(filter.event_type, None);
        assert_eq!(filter.body_contains.as_deref(), Some("<script>"));
        assert_eq!(
            filter.received_since.unwrap().unix_timestamp(),
            1_796_292_900
        );
        assert_eq!(
            query.to_query(),
            "state=dead&provider=stripe&since=2026-12-03T10%3A15&body=%3Cscript%3E"
        );
        assert_eq!(
            InboxQuery::from_params(&Params::parse(query.to_query().as_bytes())),
            query
        );
        assert!(query.hidden_fields().contains("value=\"&lt;script&gt;\""));
        assert_eq!(
            query.describe(),
            "state=\"dead\" provider=\"stripe\" since=\"2026-12-03T10:15\" body=\"<script>\""
        );
    }

    #[test]
    fn bad_values_are_named() {
        let bad_state = InboxQuery::from_params(&Params::parse(b"state=zombie"));
        assert!(bad_state.to_filter().unwrap_err().contains("zombie"));
        let bad_time = InboxQuery::from_params(&Params::parse(b"until=yesterday"));
        assert!(bad_time.to_filter().unwrap_err().starts_with("until"));
        assert!(parse_time("2026-12-03T10:15:30Z").unwrap().is_some());
        assert!(parse_time("2026-12-03T10:15:30").unwrap().is_some());
        let outbox = OutboxQuery::from_params(&Params::parse(b"state=failed"));
        assert!(outbox.to_filter().is_err());
    }

    #[test]
    fn page_sizes_are_bounded() {
        assert_eq!(page_size(&Params::parse(b"")), PAGE_SIZE);
        assert_eq!(page_size(&Params::parse(b"limit=0")), PAGE_SIZE);
        assert_eq!(page_size(&Params::parse(b"limit=10")), 10);
        assert_eq!(page_size(&Params::parse(b"limit=100000")), MAX_PAGE_SIZE);
    }
}
