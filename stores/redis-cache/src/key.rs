//! The Redis key of a dedupe key.
//!
//! `{prefix}{namespace}{source}:{tenant}:{provider}:{delivery id}` with `%` and `:`
//! percent-escaped in every part, so no two dedupe keys share a Redis key and an
//! operator can still read them (`redis-cli --scan --pattern 'hookbox:k:billing:*'`).
//! The tenant part is empty without a tenant and `=`-prefixed with one, so "no
//! tenant" and "an empty tenant" stay apart.
//!
//! The encoding is at least as fine as every store's unique key (which joins source
//! and tenant into one scope column): two keys the database tells apart never share
//! a Redis key, so a hit can never stand for another delivery.

use hookbox_core::DedupeKey;

/// The namespace of keys claimed by `process_once`.
pub(crate) const PROCESSED: &str = "k:";
/// The namespace of deliveries stored by `Inbox::receive`.
pub(crate) const INBOX: &str = "i:";

/// Returns the Redis key of `key` in `namespace`.
pub(crate) fn redis_key(prefix: &str, namespace: &str, key: &DedupeKey) -> String {
    let mut out = String::with_capacity(
        prefix.len() + namespace.len() + key.source().len() + key.delivery_id().len() + 24,
    );
    out.push_str(prefix);
    out.push_str(namespace);
    escape_into(&mut out, key.source());
    out.push(':');
    if let Some(tenant) = key.tenant() {
        out.push('=');
        escape_into(&mut out, tenant);
    }
    out.push(':');
    escape_into(&mut out, key.provider());
    out.push(':');
    escape_into(&mut out, key.delivery_id());
    out
}

fn escape_into(out: &mut String, part: &str) {
    for c in part.chars() {
        match c {
            '%' => out.push_str("%25"),
            ':' => out.push_str("%3A"),
            c => out.push(c),
        }
    }
}

/// Returns a `SCAN MATCH` pattern for every key under `prefix` (glob characters in
/// the prefix escaped).
pub(crate) fn prefix_pattern(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + 2);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('*');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_readable_and_scoped() {
        let key = DedupeKey::new("billing", "stripe", "evt_1");
        assert_eq!(
            redis_key("hookbox:", PROCESSED, &key),
            "hookbox:k:billing::stripe:evt_1"
        );
        let key = DedupeKey::new("shop", "shopify", "b5").with_tenant("a.myshopify.com");
        assert_eq!(
            redis_key("hookbox:", INBOX, &key),
            "hookbox:i:shop:=a.myshopify.com:shopify:b5"
        );
    }

    #[test]
    fn separators_inside_parts_cannot_collide() {
        let keys = [
            DedupeKey::new("a:b", "p", "c"),
            DedupeKey::new("a", "p", "b:c"),
            DedupeKey::new("a", "b:p", "c"),
            DedupeKey::new("a", "p", "b%3Ac"),
            DedupeKey::new("a", "p", "c").with_tenant(""),
            DedupeKey::new("a", "p", "c"),
            DedupeKey::new("a", "p", "c").with_tenant("b"),
            DedupeKey::new("a/b", "p", "c"),
            DedupeKey::new("a", "p", "c").with_tenant("=b"),
            DedupeKey::new("a=", "p", "c").with_tenant("b"),
        ];
        let encoded: std::collections::HashSet<_> =
            keys.iter().map(|k| redis_key("x:", PROCESSED, k)).collect();
        assert_eq!(encoded.len(), keys.len());
    }

    #[test]
    fn namespaces_do_not_share_keys() {
        let key = DedupeKey::new("a", "p", "c");
        assert_ne!(
            redis_key("x:", PROCESSED, &key),
            redis_key("x:", INBOX, &key)
        );
    }

    #[test]
    fn the_scan_pattern_matches_only_the_prefix() {
        assert_eq!(prefix_pattern("hookbox:"), "hookbox:*");
        assert_eq!(prefix_pattern("a*b?[c]\\:"), "a\\*b\\?\\[c\\]\\\\:*");
    }
}
