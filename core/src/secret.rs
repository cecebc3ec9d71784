//! Signing secrets that never print.

use std::fmt;

/// One signing secret (or, for Standard Webhooks `v1a`, a public key).
///
/// `Debug` and `Display` are redacted so that a secret never reaches a log line.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret exactly as given: no trimming, no decoding.
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// Returns the secret's text, for the provider that turns it into a key.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl From<&str> for Secret {
    fn from(secret: &str) -> Self {
        Self::new(secret)
    }
}

impl From<String> for Secret {
    fn from(secret: String) -> Self {
        Self(secret)
    }
}

/// The secrets a receiver accepts at once.
///
/// During a rotation both the old and the new secret are valid (Stripe keeps the old
/// one for up to 24 hours); a delivery verifies when any secret matches any signature.
///
/// # Examples
/// ```
/// use hookbox_core::Secrets;
/// let secrets = Secrets::from(["whsec_old", "whsec_new"]);
/// assert_eq!(secrets.len(), 2);
/// assert_eq!(format!("{secrets:?}"), "Secrets([<redacted>; 2])");
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets(Vec<Secret>);

impl Secrets {
    /// Collects secrets; providers reject an empty set when they are built.
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<Secret>,
    {
        Self(secrets.into_iter().map(Into::into).collect())
    }

    /// Returns the secrets in the order they were given.
    pub fn iter(&self) -> impl Iterator<Item = &Secret> {
        self.0.iter()
    }

    /// Returns how many secrets are configured.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Returns `true` when no secret is configured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets([<redacted>; {}])", self.0.len())
    }
}

impl From<&str> for Secrets {
    fn from(secret: &str) -> Self {
        Self(vec![Secret::new(secret)])
    }
}

impl From<String> for Secrets {
    fn from(secret: String) -> Self {
        Self(vec![Secret::new(secret)])
    }
}

impl From<Secret> for Secrets {
    fn from(secret: Secret) -> Self {
        Self(vec![secret])
    }
}

impl<S: Into<Secret>> From<Vec<S>> for Secrets {
    fn from(secrets: Vec<S>) -> Self {
        Self::new(secrets)
    }
}

impl<S: Into<Secret>, const N: usize> From<[S; N]> for Secrets {
    fn from(secrets: [S; N]) -> Self {
        Self::new(secrets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_prints_the_secret() {
        let s = Secret::new("whsec_topsecret");
        assert!(!format!("{s:?}").contains("topsecret"));
        let set = Secrets::from(vec!["whsec_topsecret".to_string()]);
        assert!(!format!("{set:?}").contains("topsecret"));
        assert!(!format!("{set:#?}").contains("topsecret"));
    }
}
