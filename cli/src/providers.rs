//! The registry: `--provider` names mapped to the provider crates.

use hookbox_core::{Provider, Secrets, Signer, VerifyError, VerifyOptions};
use hookbox_github::{GitHub, GitHubSigner};
use hookbox_shopify::{Shopify, ShopifySigner};
use hookbox_standard::{Standard, StandardSigner};
use hookbox_stripe::{Stripe, StripeSigner};
use hookbox_svix::{Svix, SvixSigner};

/// A provider `hookbox` can verify and sign for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProviderName {
    Stripe,
    Shopify,
    Github,
    Svix,
    Standard,
}

impl ProviderName {
    /// Returns the name as `--provider` spells it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Stripe => "stripe",
            Self::Shopify => "shopify",
            Self::Github => "github",
            Self::Svix => "svix",
            Self::Standard => "standard",
        }
    }

    /// Returns how long this provider can resend a delivery.
    pub(crate) fn min_retention(self) -> hookbox_core::Retention {
        match self {
            Self::Stripe => hookbox_stripe::MIN_RETENTION,
            Self::Shopify => hookbox_shopify::MIN_RETENTION,
            Self::Github => hookbox_github::MIN_RETENTION,
            Self::Svix => hookbox_svix::MIN_RETENTION,
            Self::Standard => hookbox_standard::MIN_RETENTION,
        }
    }

    /// Returns `true` when one delivery carries one signature per secret; GitHub and
    /// Shopify send exactly one.
    pub(crate) fn signs_with_several_secrets(self) -> bool {
        matches!(self, Self::Stripe | Self::Svix | Self::Standard)
    }
}

/// Builds the verifier for `name`.
///
/// # Errors
/// [`VerifyError::InvalidSecret`] when a secret cannot be used by this provider.
pub(crate) fn provider(
    name: ProviderName,
    secrets: Secrets,
    options: VerifyOptions,
) -> Result<Box<dyn Provider>, VerifyError> {
    Ok(match name {
        ProviderName::Stripe => Box::new(Stripe::new(secrets)?.with_options(options)),
        ProviderName::Shopify => Box::new(Shopify::new(secrets)?.with_options(options)),
        ProviderName::Github => Box::new(GitHub::new(secrets)?.with_options(options)),
        ProviderName::Svix => Box::new(Svix::new(secrets)?.with_options(options)),
        ProviderName::Standard => Box::new(Standard::new(secrets)?.with_options(options)),
    })
}

/// What a signer puts in headers besides the signature.
#[derive(Debug, Default)]
pub(crate) struct SignerSettings<'a> {
    /// GitHub's `X-GitHub-Event`, Shopify's topic.
    pub(crate) event: Option<&'a str>,
    /// Shopify's shop domain.
    pub(crate) shop_domain: Option<&'a str>,
}

/// Builds the signer for `name`. GitHub and Shopify sign with the first secret only
/// (the caller refuses several for them).
///
/// # Errors
/// [`VerifyError::InvalidSecret`] when a secret cannot be used by this provider.
pub(crate) fn signer(
    name: ProviderName,
    secrets: &[String],
    settings: &SignerSettings<'_>,
) -> Result<Box<dyn Signer>, VerifyError> {
    // an empty first secret is reported as blank by the provider itself
    let first = secrets.first().map_or("", String::as_str);
    Ok(match name {
        ProviderName::Stripe => Box::new(StripeSigner::new(secrets.to_vec())?),
        ProviderName::Shopify => {
            let mut signer = ShopifySigner::new(first)?;
            if let Some(topic) = settings.event {
                signer = signer.topic(topic);
            }
            if let Some(domain) = settings.shop_domain {
                signer = signer.shop_domain(domain);
            }
            Box::new(signer)
        }
        ProviderName::Github => {
            let mut signer = GitHubSigner::new(first)?;
            if let Some(event) = settings.event {
                signer = signer.event(event);
            }
            Box::new(signer)
        }
        ProviderName::Svix => Box::new(SvixSigner::new(secrets.to_vec())?),
        ProviderName::Standard => Box::new(StandardSigner::new(secrets.to_vec())?),
    })
}
