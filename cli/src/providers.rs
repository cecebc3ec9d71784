//! The registry: `--provider` names mapped to the provider crates.

use std::time::Duration;

use hookbox_core::{DEFAULT_TOLERANCE, Provider, Secrets, Signer, VerifyError, VerifyOptions};
use hookbox_custom::{Custom, CustomSigner, Scheme};
use hookbox_discord::{Discord, DiscordSigner};
use hookbox_github::{GitHub, GitHubSigner};
use hookbox_gitlab::{GitLab, GitLabSigner};
use hookbox_linear::{Linear, LinearSigner};
use hookbox_paddle::{Paddle, PaddleSigner};
use hookbox_shopify::{Shopify, ShopifySigner};
use hookbox_slack::{Slack, SlackSigner};
use hookbox_square::{Square, SquareSigner};
use hookbox_standard::{Standard, StandardSigner};
use hookbox_stripe::{Stripe, StripeSigner};
use hookbox_svix::{Svix, SvixSigner};
use hookbox_twilio::{Twilio, TwilioSigner};
use hookbox_twitch::{Twitch, TwitchSigner};
use hookbox_zoom::{Zoom, ZoomSigner};

/// A provider `hookbox` can verify and sign for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ProviderName {
    Stripe,
    Shopify,
    Github,
    Svix,
    Standard,
    Slack,
    Twitch,
    Zoom,
    Discord,
    Paddle,
    Twilio,
    Square,
    Gitlab,
    Linear,
    /// Any other provider, described by `--scheme <file.toml>`.
    Custom,
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
            Self::Slack => "slack",
            Self::Twitch => "twitch",
            Self::Zoom => "zoom",
            Self::Discord => "discord",
            Self::Paddle => "paddle",
            Self::Twilio => "twilio",
            Self::Square => "square",
            Self::Gitlab => "gitlab",
            Self::Linear => "linear",
            Self::Custom => "custom",
        }
    }

    /// Returns how long this provider can resend a delivery; for `custom`, which
    /// names itself in its scheme, [`DEFAULT_KEEP`](hookbox_core::DEFAULT_KEEP) (its
    /// scheme states its own).
    pub(crate) fn min_retention(self) -> hookbox_core::Retention {
        match self {
            Self::Stripe => hookbox_stripe::MIN_RETENTION,
            Self::Shopify => hookbox_shopify::MIN_RETENTION,
            Self::Github => hookbox_github::MIN_RETENTION,
            Self::Svix => hookbox_svix::MIN_RETENTION,
            Self::Standard => hookbox_standard::MIN_RETENTION,
            Self::Slack => hookbox_slack::MIN_RETENTION,
            Self::Twitch => hookbox_twitch::MIN_RETENTION,
            Self::Zoom => hookbox_zoom::MIN_RETENTION,
            Self::Discord => hookbox_discord::MIN_RETENTION,
            Self::Paddle => hookbox_paddle::MIN_RETENTION,
            Self::Twilio => hookbox_twilio::MIN_RETENTION,
            Self::Square => hookbox_square::MIN_RETENTION,
            Self::Gitlab => hookbox_gitlab::MIN_RETENTION,
            Self::Linear => hookbox_linear::MIN_RETENTION,
            Self::Custom => {
                hookbox_core::Retention::from_secs(hookbox_core::DEFAULT_KEEP.as_secs())
            }
        }
    }

    /// Returns the provider's default timestamp tolerance: 300 s, Twitch's 600 s,
    /// Paddle's 5 s, Linear's 60 s; a custom scheme's own.
    pub(crate) fn default_tolerance(self, scheme: Option<&Scheme>) -> Duration {
        match self {
            Self::Twitch => hookbox_twitch::DEFAULT_TOLERANCE,
            Self::Paddle => hookbox_paddle::DEFAULT_TOLERANCE,
            Self::Linear => hookbox_linear::DEFAULT_TOLERANCE,
            Self::Custom => scheme
                .and_then(Scheme::tolerance)
                .unwrap_or(DEFAULT_TOLERANCE),
            _ => DEFAULT_TOLERANCE,
        }
    }

    /// Returns `true` when the provider signs the URL it calls, so `--public-url`
    /// (`--url` for `hookbox verify`) is required.
    pub(crate) fn signs_the_url(self) -> bool {
        matches!(self, Self::Twilio | Self::Square)
    }

    /// Returns `true` when the delivery id is in the body, so `--id` signs nothing.
    pub(crate) fn id_in_body(self) -> bool {
        matches!(
            self,
            Self::Stripe | Self::Slack | Self::Zoom | Self::Discord | Self::Paddle | Self::Square
        )
    }

    /// Returns `true` when one delivery carries one signature per secret; GitHub and
    /// Shopify send exactly one.
    pub(crate) fn signs_with_several_secrets(self) -> bool {
        matches!(
            self,
            Self::Stripe | Self::Svix | Self::Standard | Self::Paddle | Self::Custom
        )
    }
}

/// What some providers need besides their secrets.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ProviderConfig<'a> {
    /// The URL the provider signed (Twilio, Square): the public one, whatever
    /// address the request reached.
    pub(crate) public_url: Option<&'a str>,
    /// The description of a `custom` provider.
    pub(crate) scheme: Option<&'a Scheme>,
}

impl<'a> ProviderConfig<'a> {
    /// The public URL, or the configuration error that names the missing option.
    fn public_url(&self, name: ProviderName) -> Result<&'a str, VerifyError> {
        self.public_url.ok_or_else(|| {
            VerifyError::invalid_config(format!(
                "{} signs the URL it calls: give that URL (--url for verify, --public-url for sign and send)",
                name.as_str()
            ))
        })
    }

    /// The scheme, or the configuration error that names the missing option.
    fn scheme(&self) -> Result<Scheme, VerifyError> {
        self.scheme.cloned().ok_or_else(|| {
            VerifyError::invalid_config("a custom provider needs --scheme <file.toml>")
        })
    }
}

/// Builds the verifier for `name`.
///
/// # Errors
/// [`VerifyError::InvalidSecret`] when a secret cannot be used by this provider;
/// [`VerifyError::InvalidConfig`] when its URL or scheme is missing or unusable.
pub(crate) fn provider(
    name: ProviderName,
    secrets: Secrets,
    options: VerifyOptions,
    config: &ProviderConfig<'_>,
) -> Result<Box<dyn Provider>, VerifyError> {
    Ok(match name {
        ProviderName::Stripe => Box::new(Stripe::new(secrets)?.with_options(options)),
        ProviderName::Shopify => Box::new(Shopify::new(secrets)?.with_options(options)),
        ProviderName::Github => Box::new(GitHub::new(secrets)?.with_options(options)),
        ProviderName::Svix => Box::new(Svix::new(secrets)?.with_options(options)),
        ProviderName::Standard => Box::new(Standard::new(secrets)?.with_options(options)),
        ProviderName::Slack => Box::new(Slack::new(secrets)?.with_options(options)),
        ProviderName::Twitch => Box::new(Twitch::new(secrets)?.with_options(options)),
        ProviderName::Zoom => Box::new(Zoom::new(secrets)?.with_options(options)),
        ProviderName::Discord => Box::new(Discord::new(secrets)?.with_options(options)),
        ProviderName::Paddle => Box::new(Paddle::new(secrets)?.with_options(options)),
        ProviderName::Twilio => {
            Box::new(Twilio::new(secrets, config.public_url(name)?)?.with_options(options))
        }
        ProviderName::Square => {
            Box::new(Square::new(secrets, config.public_url(name)?)?.with_options(options))
        }
        ProviderName::Gitlab => Box::new(GitLab::new(secrets)?.with_options(options)),
        ProviderName::Linear => Box::new(Linear::new(secrets)?.with_options(options)),
        ProviderName::Custom => {
            Box::new(Custom::new(config.scheme()?, secrets)?.with_options(options))
        }
    })
}

/// What a signer puts in headers besides the signature.
#[derive(Debug, Default)]
pub(crate) struct SignerSettings<'a> {
    /// GitHub's `X-GitHub-Event`, Shopify's topic, Twitch's subscription type.
    pub(crate) event: Option<&'a str>,
    /// Twitch's `Twitch-Eventsub-Message-Type`.
    pub(crate) message_type: Option<&'a str>,
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
    config: &ProviderConfig<'_>,
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
        ProviderName::Slack => Box::new(SlackSigner::new(first)?),
        ProviderName::Twitch => {
            let mut signer = TwitchSigner::new(first)?;
            if let Some(event) = settings.event {
                signer = signer.subscription_type(event);
            }
            if let Some(message_type) = settings.message_type {
                signer = signer.message_type(message_type);
            }
            Box::new(signer)
        }
        ProviderName::Zoom => Box::new(ZoomSigner::new(first)?),
        // the secret is the signing key's seed (64 hex digits); the receiver holds
        // its public key
        ProviderName::Discord => Box::new(DiscordSigner::new(first)?),
        ProviderName::Paddle => Box::new(PaddleSigner::new(secrets.to_vec())?),
        ProviderName::Twilio => Box::new(TwilioSigner::new(first, config.public_url(name)?)?),
        ProviderName::Square => Box::new(SquareSigner::new(first, config.public_url(name)?)?),
        ProviderName::Gitlab => {
            let mut signer = GitLabSigner::new(first)?;
            if let Some(event) = settings.event {
                signer = signer.event(event);
            }
            Box::new(signer)
        }
        ProviderName::Linear => {
            let mut signer = LinearSigner::new(first)?;
            if let Some(event) = settings.event {
                signer = signer.event(event);
            }
            Box::new(signer)
        }
        ProviderName::Custom => Box::new(CustomSigner::new(config.scheme()?, secrets.to_vec())?),
    })
}
