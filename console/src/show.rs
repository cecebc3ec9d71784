//! How a delivery's parts are shown: headers with secrets masked, the body as
//! indented JSON, text or a hex dump, times and ages.

use std::fmt::Write as _;

use hookbox_core::KeptHeaders;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::time::format_description::well_known::Rfc3339;

use crate::html::Esc;

/// Headers masked whatever the user configures: credentials, cookies, and GitLab's
/// token (which is the shared secret itself, sent as it is).
pub const DEFAULT_MASKED_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-gitlab-token",
    "x-api-key",
    "api-key",
];

/// Parts of a header name that mark it as a credential (`x-auth-token`,
/// `x-webhook-secret`, `x-session-id`, …): masked too.
const MASKED_NAME_PARTS: &[&str] = &[
    "token", "secret", "password", "passwd", "session", "api-key", "apikey",
];

/// Returns `true` when a header called `name` is shown masked: one of
/// [`DEFAULT_MASKED_HEADERS`], a name with a credential's word in it, or one of
/// `extra` (lower-case names).
pub(crate) fn is_masked(name: &str, extra: &[String]) -> bool {
    let name = name.to_ascii_lowercase();
    DEFAULT_MASKED_HEADERS.contains(&name.as_str())
        || MASKED_NAME_PARTS.iter().any(|part| name.contains(part))
        || extra.contains(&name)
}

/// Renders headers as a table, masked values replaced by their length.
pub(crate) fn headers_table(headers: &KeptHeaders, extra_masked: &[String]) -> String {
    if headers.is_empty() {
        return "<p class=\"muted\">No headers were kept.</p>".to_string();
    }
    let mut out = String::from(
        "<table class=\"headers\"><thead><tr><th>Name</th><th>Value</th></tr></thead><tbody>",
    );
    for (name, value) in headers.iter() {
        let shown = if is_masked(name.as_str(), extra_masked) {
            format!(
                "<span class=\"masked\">masked ({} bytes)</span>",
                value.as_bytes().len()
            )
        } else {
            match std::str::from_utf8(value.as_bytes()) {
                Ok(text) => format!("<code>{}</code>", Esc(text)),
                Err(_) => format!(
                    "<code>{}</code> <span class=\"hint\">(not UTF-8; shown with replacement characters)</span>",
                    Esc(&String::from_utf8_lossy(value.as_bytes()))
                ),
            }
        };
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td class=\"mono\">{shown}</td></tr>",
            Esc(name.as_str())
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// How a body is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyView {
    /// Indented JSON.
    Pretty,
    /// The bytes as UTF-8 text.
    Text,
    /// A hex dump.
    Hex,
}

impl BodyView {
    pub(crate) fn parse(name: &str) -> Option<Self> {
        match name {
            "pretty" => Some(Self::Pretty),
            "text" => Some(Self::Text),
            "hex" => Some(Self::Hex),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Pretty => "pretty",
            Self::Text => "text",
            Self::Hex => "hex",
        }
    }
}

/// The most bytes of a body shown as text or JSON; the rest is in the download.
pub(crate) const TEXT_LIMIT: usize = 256 * 1024;
/// The most bytes of a body shown as a hex dump.
pub(crate) const HEX_LIMIT: usize = 16 * 1024;

/// Returns the views a body can be shown in, the best first: JSON (when it parses),
/// text (when it is UTF-8), and always hex.
pub(crate) fn body_views(body: &[u8]) -> Vec<BodyView> {
    let mut views = Vec::with_capacity(3);
    if is_json(body) {
        views.push(BodyView::Pretty);
    }
    if std::str::from_utf8(body).is_ok() {
        views.push(BodyView::Text);
    }
    views.push(BodyView::Hex);
    views
}

/// Returns `true` when `body` is one JSON value.
fn is_json(body: &[u8]) -> bool {
    !body.is_empty() && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok()
}

/// Renders `body` in `view` as escaped text for a `<pre>`, and whether it was cut.
pub(crate) fn render_body(body: &[u8], view: BodyView) -> (String, bool) {
    match view {
        BodyView::Pretty => {
            let text = std::str::from_utf8(body)
                .map(indent_json)
                .unwrap_or_default();
            cut_text(&text)
        }
        BodyView::Text => cut_text(&String::from_utf8_lossy(body)),
        BodyView::Hex => {
            let cut = body.len() > HEX_LIMIT;
            (
                Esc(&hex_dump(&body[..body.len().min(HEX_LIMIT)])).to_string(),
                cut,
            )
        }
    }
}

fn cut_text(text: &str) -> (String, bool) {
    if text.len() <= TEXT_LIMIT {
        return (Esc(text).to_string(), false);
    }
    let mut end = TEXT_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (Esc(&text[..end]).to_string(), true)
}

/// Indents JSON text that is known to parse, keeping every token exactly as it
/// was sent (numbers are not reparsed, keys keep their order and escapes).
pub(crate) fn indent_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = text.chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                // skip whitespace to see whether the container is empty
                while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                    chars.next();
                }
                if matches!(chars.peek(), Some('}' | ']')) {
                    if let Some(close) = chars.next() {
                        out.push(close);
                    }
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_ascii_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

/// A hex dump: offset, sixteen bytes in hex, and the printable ASCII ones.
pub(crate) fn hex_dump(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 4 + 16);
    for (line, chunk) in bytes.chunks(16).enumerate() {
        let _ = write!(out, "{:08x}  ", line * 16);
        for i in 0..16 {
            match chunk.get(i) {
                Some(b) => {
                    let _ = write!(out, "{b:02x} ");
                }
                None => out.push_str("   "),
            }
            if i == 7 {
                out.push(' ');
            }
        }
        out.push(' ');
        for &b in chunk {
            out.push(if b.is_ascii_graphic() || b == b' ' {
                char::from(b)
            } else {
                '.'
            });
        }
        out.push('\n');
    }
    out
}

/// A `<time>` element for `at` (UTC, RFC 3339 in its `datetime`).
pub(crate) fn time(at: OffsetDateTime) -> String {
    let text = at.format(&Rfc3339).unwrap_or_default();
    let short = text.get(..19).unwrap_or(&text).replace('T', " ");
    format!(
        "<time datetime=\"{}\">{} UTC</time>",
        Esc(&text),
        Esc(&short)
    )
}

/// [`time`] or a dash.
pub(crate) fn maybe_time(at: Option<OffsetDateTime>) -> String {
    at.map_or_else(|| "<span class=\"muted\">–</span>".to_string(), time)
}

/// An age like `3d 4h`, `12m 5s`, `0s`.
pub(crate) fn age(since: OffsetDateTime, now: OffsetDateTime) -> String {
    let secs = (now - since).whole_seconds().max(0);
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {m}m")
    } else if m > 0 {
        format!("{m}m {s}s")
    } else {
        format!("{s}s")
    }
}

/// A state badge (`state` is one of the fixed state names).
pub(crate) fn badge(state: &str) -> String {
    format!("<span class=\"state state-{0}\">{0}</span>", Esc(state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookbox_core::http::{HeaderName, HeaderValue};

    #[test]
    fn credentials_are_masked_and_the_rest_escaped() {
        let headers: KeptHeaders = [
            ("authorization", b"Bearer sk_live_secret".as_slice()),
            ("x-gitlab-token", b"glpat-secret"),
            ("x-custom-auth-token", b"secret-3"),
            ("x-mine", b"secret-4"),
            ("x-hub-signature-256", b"sha256=<script>alert(1)</script>"),
            ("x-broken", b"caf\xe9"),
        ]
        .into_iter()
        .map(|(n, v)| {
            (
                HeaderName::from_static(n),
                HeaderValue::from_bytes(v).unwrap(),
            )
        })
        .collect();
        let html = headers_table(&headers, &["x-mine".to_string()]);
        for secret in ["sk_live_secret", "glpat-secret", "secret-3", "secret-4"] {
            assert!(!html.contains(secret), "{secret} shown: {html}");
        }
        assert!(html.contains("masked (21 bytes)"));
        assert!(html.contains("sha256=&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("caf\u{fffd}"));
        assert!(!html.contains("<script>"));
    }

    #[test]
    fn json_is_indented_token_for_token() {
        let body =
            r#"{"b":1,"a":[1, 2,{}],"n":123456789012345678901234567890,"s":"x,{\"y\":[]}","e":[]}"#;
        let pretty = indent_json(body);
        assert_eq!(
            pretty,
            "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2,\n    {}\n  ],\n  \"n\": 123456789012345678901234567890,\n  \"s\": \"x,{\\\"y\\\":[]}\",\n  \"e\": []\n}"
        );
        let reparsed: serde_json::Value = serde_json::from_str(&pretty).unwrap();
        assert_eq!(
            reparsed,
            serde_json::from_str::<serde_json::Value>(body).unwrap()
        );
    }

    #[test]
    fn a_body_gets_the_views_it_can_have() {
        assert_eq!(
            body_views(b"{\"a\":1}"),
            [BodyView::Pretty, BodyView::Text, BodyView::Hex]
        );
        assert_eq!(body_views(b"<html>"), [BodyView::Text, BodyView::Hex]);
        assert_eq!(body_views(b"\xff\xfe<"), [BodyView::Hex]);
        assert_eq!(body_views(b""), [BodyView::Text, BodyView::Hex]);
        let (hex, cut) = render_body(b"<a>\xff", BodyView::Hex);
        assert!(!cut);
        assert!(hex.starts_with("00000000  3c 61 3e ff"), "{hex}");
        assert!(hex.ends_with("&lt;a&gt;.\n"), "{hex}");
        let (text, cut) = render_body(&vec![b'x'; TEXT_LIMIT + 10], BodyView::Text);
        assert!(cut);
        assert_eq!(text.len(), TEXT_LIMIT);
        let (script, _) = render_body(b"<script>window.__pwned=1</script>", BodyView::Text);
        assert_eq!(script, "&lt;script&gt;window.__pwned=1&lt;/script&gt;");
    }

    #[test]
    fn ages_read_short() {
        let t = OffsetDateTime::from_unix_timestamp(1_000_000).unwrap();
        assert_eq!(age(t, t + hookbox_core::time::Duration::seconds(5)), "5s");
        assert_eq!(
            age(t, t + hookbox_core::time::Duration::seconds(3725)),
            "1h 2m"
        );
        assert_eq!(
            age(t, t + hookbox_core::time::Duration::seconds(90_000)),
            "1d 1h"
        );
        assert_eq!(age(t + hookbox_core::time::Duration::seconds(9), t), "0s");
    }
}
