//! Escaping for the two contexts the pages put text in (element content and quoted
//! attribute values), URL building, and the page frame every page shares.
//!
//! Every piece of text that did not come from this crate's own literals goes
//! through [`Esc`]; URLs are built from percent-encoded parts and then escaped as
//! attribute values, and always start with the console's own path, so no delivery
//! content can become a scheme (`javascript:`), a tag or an attribute.

use std::fmt::{self, Write as _};

/// Text escaped for HTML element content and for double- or single-quoted
/// attribute values: `&`, `<`, `>`, `"` and `'` become character references, and
/// control characters other than tab, line feed and carriage return become U+FFFD.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Esc<'a>(pub(crate) &'a str);

impl fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0;
        let mut start = 0;
        for (at, c) in text.char_indices() {
            let replacement = match c {
                '&' => "&amp;",
                '<' => "&lt;",
                '>' => "&gt;",
                '"' => "&quot;",
                '\'' => "&#x27;",
                '\t' | '\n' | '\r' => continue,
                c if c.is_control() => "\u{fffd}",
                _ => continue,
            };
            f.write_str(&text[start..at])?;
            f.write_str(replacement)?;
            start = at + c.len_utf8();
        }
        f.write_str(&text[start..])
    }
}

/// Returns `text` escaped as [`Esc`] writes it.
pub(crate) fn escape(text: &str) -> String {
    Esc(text).to_string()
}

/// Percent-encodes `text` as one URL path segment: everything but the unreserved
/// characters (`A-Z a-z 0-9 - . _ ~`).
pub(crate) fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Encodes `pairs` as a query string (`a=1&b=x+y`), skipping empty values.
pub(crate) fn query<'a, 'b>(pairs: impl IntoIterator<Item = (&'a str, &'b str)>) -> String {
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        if !value.is_empty() {
            serializer.append_pair(name, value);
        }
    }
    serializer.finish()
}

/// Returns at most `max` characters of `text`, with `…` when it was cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// What the frame around a page needs to know.
#[derive(Debug)]
pub(crate) struct Frame<'a> {
    /// The console's path prefix (empty at the root), for links and assets.
    pub(crate) base: &'a str,
    /// The page title (escaped here).
    pub(crate) title: &'a str,
    /// Which navigation entry is current: `overview`, `deliveries`, `outbox`.
    pub(crate) nav: &'a str,
    /// Who is signed in and as what, for the header; `None` on the login page.
    pub(crate) who: Option<(&'a str, &'a str)>,
    /// The CSRF token for the sign-out form; `None` when there is no form.
    pub(crate) csrf: Option<&'a str>,
}

/// Wraps `body` (already safe HTML) in the page frame: the document head with the
/// embedded stylesheet and script, and the navigation.
pub(crate) fn page(frame: &Frame<'_>, body: &str) -> String {
    let base = frame.base;
    let mut out = String::with_capacity(body.len() + 2048);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"referrer\" content=\"same-origin\">\
         <title>{title} · hookbox console</title>\
         <link rel=\"stylesheet\" href=\"{css}\">\
         <script src=\"{js}\" defer></script></head><body>",
        title = Esc(frame.title),
        css = Esc(&format!("{base}/{}", crate::assets::css_path())),
        js = Esc(&format!("{base}/{}", crate::assets::js_path())),
    );
    out.push_str("<header class=\"top\"><span class=\"brand\">hookbox console</span>");
    if let Some((name, role)) = frame.who {
        out.push_str("<nav>");
        for (key, label, path) in [
            ("overview", "Overview", "overview"),
            ("deliveries", "Deliveries", "deliveries"),
            ("outbox", "Outbox", "outbox"),
        ] {
            let current = if frame.nav == key {
                " class=\"current\" aria-current=\"page\""
            } else {
                ""
            };
            let _ = write!(
                out,
                "<a href=\"{}\"{current}>{label}</a>",
                Esc(&format!("{base}/{path}"))
            );
        }
        out.push_str("</nav>");
        let _ = write!(
            out,
            "<span class=\"who\">{} <span class=\"role\">{}</span></span>",
            Esc(name),
            Esc(role)
        );
        if let Some(csrf) = frame.csrf {
            let _ = write!(
                out,
                "<form method=\"post\" action=\"{}\" class=\"inline\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
                 <button type=\"submit\" class=\"link\">Sign out</button></form>",
                Esc(&format!("{base}/logout")),
                Esc(csrf)
            );
        }
    }
    out.push_str("</header><main>");
    out.push_str(body);
    out.push_str("</main></body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_are_escaped() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#x27;y&#x27;"
        );
        assert_eq!(
            escape("<img src=x onerror=alert(1)>"),
            "&lt;img src=x onerror=alert(1)&gt;"
        );
        assert_eq!(escape("plain text"), "plain text");
        assert_eq!(escape("a\tb\nc\u{0}d\u{1b}e"), "a\tb\nc\u{fffd}d\u{fffd}e");
    }

    #[test]
    fn path_segments_and_queries_are_percent_encoded() {
        assert_eq!(
            path_segment("javascript:alert(1)"),
            "javascript%3Aalert%281%29"
        );
        assert_eq!(path_segment("a/b c"), "a%2Fb%20c");
        assert_eq!(
            query([("provider", "a&b=c"), ("state", ""), ("q", "<x y>")]),
            "provider=a%26b%3Dc&q=%3Cx+y%3E"
        );
    }

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(truncate("héllo", 2), "hé…");
        assert_eq!(truncate("hé", 2), "hé");
    }

    #[test]
    fn the_frame_escapes_its_title_and_names() {
        let frame = Frame {
            base: "/ops\"x",
            title: "<b>",
            nav: "overview",
            who: Some(("<i>mallory</i>", "admin")),
            csrf: Some("t\"k"),
        };
        let html = page(&frame, "<p>body</p>");
        assert!(html.contains("&lt;b&gt; · hookbox console"));
        assert!(html.contains("&lt;i&gt;mallory&lt;/i&gt;"));
        assert!(html.contains("/ops&quot;x/overview"));
        assert!(html.contains("value=\"t&quot;k\""));
        assert!(!html.contains("<i>"));
    }
}
