//! Explaining a signature mismatch: the usual mistakes (a secret with whitespace or
//! without its prefix, a body trimmed or re-serialized) retried on the failure path.

use crate::Secrets;

/// Explains a mismatch whose only signatures were spelled non-canonically.
pub fn non_canonical_hint(provider: &str, spelling: &str, canonical: &str) -> String {
    format!(
        "the signature is written in {spelling}; {provider} sends {canonical} and its official libraries compare that text, so no other spelling matches: whatever rewrote the header (a proxy, a test helper) must pass it through unchanged"
    )
}

/// Finds the likely cause of a signature mismatch by retrying the usual mistakes.
///
/// `matches(secret, body)` recomputes the provider's signature with a candidate
/// secret text and body and reports whether it equals a received signature. This runs
/// only on the failure path, so its extra MACs cost nothing on valid deliveries.
pub fn diagnose_mismatch(
    secrets: &Secrets,
    body: &[u8],
    matches: impl Fn(&str, &[u8]) -> bool,
) -> String {
    for (i, secret) in secrets.iter().enumerate() {
        let secret = secret.expose();
        let nth = if secrets.len() > 1 {
            format!("secret #{} ", i + 1)
        } else {
            "the secret ".to_string()
        };
        if secret.trim() != secret && matches(secret.trim(), body) {
            return format!(
                "{nth}has leading or trailing whitespace (a newline from a file or an environment variable?); remove it"
            );
        }
        if !secret.starts_with("whsec_") && matches(&format!("whsec_{}", secret.trim()), body) {
            return format!(
                "{nth}is missing its `whsec_` prefix; use the whole value the provider's dashboard shows"
            );
        }
    }
    let trimmed = body.trim_ascii_end();
    let body_hint = if trimmed.len() != body.len()
        && secrets.iter().any(|s| matches(s.expose(), trimmed))
    {
        Some(
            "the body gained trailing whitespace after it was signed; verify the raw bytes exactly as received",
        )
    } else if secrets.iter().any(|s| {
        let mut with_newline = body.to_vec();
        with_newline.push(b'\n');
        matches(s.expose(), &with_newline)
    }) {
        Some(
            "the body lost its trailing newline (was it trimmed?); verify the raw bytes exactly as received",
        )
    } else {
        None
    };
    if let Some(hint) = body_hint {
        return hint.to_string();
    }
    // a wrong secret is the common cause and compact JSON is what many senders send
    // (GitHub, Shopify), so the secret is named first and the body's shape second
    let tried = secrets.len();
    if looks_reserialized(body) {
        return format!(
            "no configured secret ({tried} tried) matches any signature; the secret most likely belongs to another endpoint or mode (test vs live). If the secret is right, check the body: it is compact JSON, as a JSON library prints it, so it may have been parsed and re-serialized before verification, which changes the signed bytes (verify the raw body before parsing it)"
        );
    }
    format!(
        "no configured secret ({tried} tried) matches any signature; the secret most likely belongs to another endpoint or mode (test vs live). If the secret is right, the body was changed before verification (parsed and re-serialized, re-encoded, or trimmed)"
    )
}

/// Returns `true` when `body` is JSON exactly as `serde_json` would print it compactly:
/// a sign that a framework parsed and re-serialized the payload before verification.
fn looks_reserialized(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|value| serde_json::to_vec(&value).ok())
        .is_some_and(|compact| compact == body && body.len() > 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnosis_names_whitespace_in_the_secret() {
        let secrets = Secrets::from("key\n");
        let hint = diagnose_mismatch(&secrets, b"{}", |s, _| s == "key");
        assert!(hint.contains("whitespace"), "{hint}");
    }

    #[test]
    fn a_wrong_secret_on_compact_json_names_the_secret_before_the_body() {
        let secrets = Secrets::from("wrong");
        let hint = diagnose_mismatch(&secrets, br#"{"id":"evt_1"}"#, |_, _| false);
        let secret_at = hint.find("another endpoint").expect(&hint);
        let body_at = hint.find("re-serialized").expect(&hint);
        assert!(secret_at < body_at, "{hint}");
        assert!(hint.starts_with("no configured secret (1 tried)"), "{hint}");
    }

    #[test]
    fn diagnosis_names_a_trimmed_body() {
        let secrets = Secrets::from("key");
        let hint = diagnose_mismatch(&secrets, b"{}", |_, b| b == b"{}\n");
        assert!(hint.contains("trailing newline"), "{hint}");
    }
}
