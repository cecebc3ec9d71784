//! The scheme's names as `&'static str`, which hookbox-core's building blocks take
//! (`Provider::name`, `HeaderSpec`, `BodyKeys`, `SignedHeaders`): each distinct name
//! is allocated once per process and never freed. A process configures a handful of
//! schemes, so this is a few hundred bytes, however many times they are built.

use std::sync::{Mutex, PoisonError};

use hookbox_core::support::HeaderSpec;

static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
static PATHS: Mutex<Vec<&'static [&'static str]>> = Mutex::new(Vec::new());

/// Returns `name` as a `&'static str`, the same one for the same text.
pub(crate) fn intern(name: &str) -> &'static str {
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(found) = names.iter().find(|known| **known == name) {
        return found;
    }
    let leaked: &'static str = Box::leak(name.into());
    names.push(leaked);
    leaked
}

/// Returns the one-key body path of the top-level `field`, for a `BodyKeys`.
pub(crate) fn field_path(field: &str) -> &'static [&'static str] {
    let field = intern(field);
    let mut paths = PATHS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(found) = paths.iter().find(|path| path[0] == field) {
        return found;
    }
    let leaked: &'static [&'static str] = Box::leak(Box::new([field]));
    paths.push(leaked);
    leaked
}

/// Returns the spec of the header `label` (a valid header name, as the scheme checked).
pub(crate) fn header_spec(label: &str) -> HeaderSpec {
    HeaderSpec::new(intern(label), intern(&label.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_text_is_the_same_str() {
        let a = intern(&String::from("acme-signature"));
        let b = intern("acme-signature");
        assert!(std::ptr::eq(a, b));
        assert!(std::ptr::eq(field_path("event_id"), field_path("event_id")));
        assert_eq!(
            header_spec("Acme-Signature").name().as_str(),
            "acme-signature"
        );
        assert_eq!(header_spec("Acme-Signature").label(), "Acme-Signature");
    }
}
