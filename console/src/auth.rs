//! Who is asking: the two roles, the token check (constant time), the signed
//! session cookie a login sets, the CSRF token of each session, and the user an
//! external auth layer names.

use std::fmt;

use axum::http::HeaderMap;
use axum::http::header::{AUTHORIZATION, COOKIE};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac as _};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;
use time::OffsetDateTime;

use crate::error::ConsoleError;

type HmacSha256 = Hmac<Sha256>;

/// The shortest token [`ConsoleAuth::tokens`] accepts, in bytes.
pub const MIN_TOKEN_LEN: usize = 16;

/// The session cookie's name.
pub(crate) const COOKIE_NAME: &str = "hookbox_console";

/// How long a session cookie is valid: one working day.
pub(crate) const SESSION_SECS: i64 = 12 * 3600;

/// What a signed-in user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Every page; no action.
    ReadOnly,
    /// Every page and every action: replay, replay or purge what a filter selects.
    Admin,
}

impl Role {
    /// The role's name: `read-only` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::Admin => "admin",
        }
    }

    fn code(self) -> &'static str {
        match self {
            Self::ReadOnly => "ro",
            Self::Admin => "admin",
        }
    }

    fn from_code(code: &str) -> Option<Self> {
        match code {
            "ro" => Some(Self::ReadOnly),
            "admin" => Some(Self::Admin),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The user an external auth layer authenticated: insert one into the request's
/// extensions before the console sees it (see [`ConsoleAuth::external`]). The name
/// appears on the pages and in every action's log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleUser {
    name: String,
    role: Role,
}

impl ConsoleUser {
    /// A user called `name` with `role`.
    pub fn new(name: impl Into<String>, role: Role) -> Self {
        Self {
            name: name.into(),
            role,
        }
    }

    /// Returns the user's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Returns the user's role.
    pub fn role(&self) -> Role {
        self.role
    }
}

/// How the console authenticates requests: its own tokens, or an auth layer of
/// yours.
///
/// Either way a request without valid credentials gets 401 on every page and
/// action (the login page and the stylesheet and script excepted), a read-only user
/// gets 403 on every action, and every form post needs the session's CSRF token.
#[derive(Clone)]
pub struct ConsoleAuth {
    mode: Mode,
    /// Signs session cookies and CSRF tokens.
    key: [u8; 32],
}

#[derive(Clone)]
enum Mode {
    Tokens {
        read_only: Option<[u8; 32]>,
        admin: Option<[u8; 32]>,
    },
    External,
}

impl fmt::Debug for ConsoleAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match &self.mode {
            Mode::Tokens { read_only, admin } => format!(
                "Tokens {{ read_only: {}, admin: {} }}",
                if read_only.is_some() {
                    "<redacted>"
                } else {
                    "None"
                },
                if admin.is_some() {
                    "<redacted>"
                } else {
                    "None"
                },
            ),
            Mode::External => "External".to_string(),
        };
        f.debug_struct("ConsoleAuth")
            .field("mode", &format_args!("{mode}"))
            .finish_non_exhaustive()
    }
}

/// The variable [`ConsoleAuth::from_env`] reads the read-only token from.
pub const TOKEN_VAR: &str = "HOOKBOX_CONSOLE_TOKEN";
/// The variable [`ConsoleAuth::from_env`] reads the admin token from.
pub const ADMIN_TOKEN_VAR: &str = "HOOKBOX_CONSOLE_ADMIN_TOKEN";

impl ConsoleAuth {
    /// Authenticates with the console's own tokens: `read_only` for the read-only
    /// role, `admin` for the admin role (either may be `None`, not both).
    ///
    /// A script sends `Authorization: Bearer <token>`; a browser signs in once on
    /// the login page, which sets an `HttpOnly`, `SameSite=Strict` session cookie
    /// valid for 12 hours. Tokens are compared in constant time. The cookie is
    /// signed with a key derived from the tokens, so every replica with the same
    /// tokens accepts it and changing a token signs every session out.
    ///
    /// # Errors
    /// [`ConsoleError::NoToken`] without any token (an empty string counts as
    /// none), [`ConsoleError::TokenTooShort`] for a token under
    /// [`MIN_TOKEN_LEN`] bytes, [`ConsoleError::SameTokens`] when both are equal.
    pub fn tokens(read_only: Option<String>, admin: Option<String>) -> Result<Self, ConsoleError> {
        let read_only = read_only.filter(|t| !t.is_empty());
        let admin = admin.filter(|t| !t.is_empty());
        if read_only.is_none() && admin.is_none() {
            return Err(ConsoleError::NoToken);
        }
        for (role, token) in [("read-only", &read_only), ("admin", &admin)] {
            if let Some(token) = token
                && token.len() < MIN_TOKEN_LEN
            {
                return Err(ConsoleError::TokenTooShort {
                    role,
                    len: token.len(),
                    min: MIN_TOKEN_LEN,
                });
            }
        }
        if read_only.is_some() && read_only == admin {
            return Err(ConsoleError::SameTokens);
        }
        // the signing key: a hash of both tokens, length-prefixed
        let mut hash = Sha256::new();
        hash.update(b"hookbox-console session key v1");
        for token in [&read_only, &admin] {
            let token = token.as_deref().unwrap_or("");
            hash.update((token.len() as u64).to_be_bytes());
            hash.update(token.as_bytes());
        }
        Ok(Self {
            key: hash.finalize().into(),
            mode: Mode::Tokens {
                read_only: read_only.as_deref().map(digest),
                admin: admin.as_deref().map(digest),
            },
        })
    }

    /// [`ConsoleAuth::tokens`] with the tokens of the environment variables
    /// `HOOKBOX_CONSOLE_TOKEN` (read-only) and `HOOKBOX_CONSOLE_ADMIN_TOKEN`
    /// (admin).
    ///
    /// # Errors
    /// As [`ConsoleAuth::tokens`].
    pub fn from_env() -> Result<Self, ConsoleError> {
        Self::tokens(
            std::env::var(TOKEN_VAR).ok(),
            std::env::var(ADMIN_TOKEN_VAR).ok(),
        )
    }

    /// Trusts an auth layer of yours: the console serves a request as the
    /// [`ConsoleUser`] found in its extensions, and answers 401 when there is none.
    /// There is no login page; signing in and out is your layer's.
    ///
    /// CSRF tokens are signed with a random key made here; replicas behind one load
    /// balancer should share a key ([`ConsoleAuth::with_key`]), or a form loaded
    /// from one replica is refused by another.
    ///
    /// # Errors
    /// [`ConsoleError::Random`] when the system random source fails.
    pub fn external() -> Result<Self, ConsoleError> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(ConsoleError::Random)?;
        Ok(Self {
            mode: Mode::External,
            key,
        })
    }

    /// Signs session cookies and CSRF tokens with `key` (32 secret bytes) instead of
    /// the default one.
    #[must_use]
    pub fn with_key(mut self, key: [u8; 32]) -> Self {
        self.key = key;
        self
    }

    /// Returns `true` when the console's own tokens authenticate (there is a login
    /// page).
    pub(crate) fn has_login(&self) -> bool {
        matches!(self.mode, Mode::Tokens { .. })
    }

    /// Returns the role `token` grants, comparing it with both tokens in constant
    /// time.
    pub(crate) fn role_of_token(&self, token: &str) -> Option<Role> {
        let Mode::Tokens { read_only, admin } = &self.mode else {
            return None;
        };
        let given = digest(token);
        // both comparisons always run, so the time says nothing about which matched
        let is_admin = admin.is_some_and(|d| bool::from(d.ct_eq(&given)));
        let is_read_only = read_only.is_some_and(|d| bool::from(d.ct_eq(&given)));
        if is_admin {
            Some(Role::Admin)
        } else if is_read_only {
            Some(Role::ReadOnly)
        } else {
            None
        }
    }

    /// Authenticates a request from its headers and extensions.
    pub(crate) fn authenticate(
        &self,
        headers: &HeaderMap,
        external: Option<&ConsoleUser>,
        now: OffsetDateTime,
    ) -> Option<Session> {
        match self.mode {
            Mode::External => external.map(|user| Session {
                name: user.name.clone(),
                role: user.role,
                via: Via::External,
                csrf: Some(self.csrf_for(&format!("user\0{}\0{}", user.role.code(), user.name))),
            }),
            Mode::Tokens { .. } => {
                if let Some(value) = headers.get(AUTHORIZATION) {
                    // a script's bearer token: no cookie, no CSRF (a browser never
                    // attaches this header to a cross-site request by itself)
                    let token = value.to_str().ok()?.strip_prefix("Bearer ")?.trim();
                    let role = self.role_of_token(token)?;
                    return Some(Session {
                        name: format!("{role} token"),
                        role,
                        via: Via::Bearer,
                        csrf: None,
                    });
                }
                let cookie = cookie_value(headers, COOKIE_NAME)?;
                let (name, role) = self.open_session(cookie, now)?;
                Some(Session {
                    name,
                    role,
                    via: Via::Cookie,
                    csrf: Some(self.csrf_for(&format!("session\0{cookie}"))),
                })
            }
        }
    }

    /// Makes a session cookie's value for `name` with `role`, valid until `now` plus
    /// [`SESSION_SECS`].
    pub(crate) fn seal_session(&self, name: &str, role: Role, now: OffsetDateTime) -> String {
        let expires = now.unix_timestamp() + SESSION_SECS;
        let payload = format!(
            "v1.{}.{expires}.{}",
            role.code(),
            URL_SAFE_NO_PAD.encode(name.as_bytes())
        );
        let tag = self.mac(b"session\0", payload.as_bytes());
        format!("{payload}.{}", URL_SAFE_NO_PAD.encode(tag))
    }

    /// Reads a session cookie back: its name and role when the signature holds and
    /// it has not expired.
    fn open_session(&self, value: &str, now: OffsetDateTime) -> Option<(String, Role)> {
        let (payload, tag) = value.rsplit_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let mut mac = HmacSha256::new_from_slice(&self.key).ok()?;
        mac.update(b"session\0");
        mac.update(payload.as_bytes());
        mac.verify_slice(&tag).ok()?;
        let mut parts = payload.split('.');
        let (Some("v1"), Some(role), Some(expires), Some(name), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return None;
        };
        let role = Role::from_code(role)?;
        let expires: i64 = expires.parse().ok()?;
        if now.unix_timestamp() >= expires {
            return None;
        }
        let name = String::from_utf8(URL_SAFE_NO_PAD.decode(name).ok()?).ok()?;
        Some((name, role))
    }

    /// The CSRF token of the session `binding` names.
    fn csrf_for(&self, binding: &str) -> String {
        URL_SAFE_NO_PAD.encode(self.mac(b"csrf\0", binding.as_bytes()))
    }

    fn mac(&self, domain: &[u8], message: &[u8]) -> [u8; 32] {
        // HMAC accepts a key of any length: this cannot fail
        let mut mac = <HmacSha256 as hmac::digest::KeyInit>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("hmac takes keys of any length"));
        mac.update(domain);
        mac.update(message);
        mac.finalize().into_bytes().into()
    }
}

/// SHA-256 of a token: what is kept and compared, so comparing never depends on
/// the tokens' lengths.
fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// How a request authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// `Authorization: Bearer`.
    Bearer,
    /// The login's session cookie.
    Cookie,
    /// The user's own auth layer.
    External,
}

impl Via {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Bearer => "bearer",
            Self::Cookie => "session",
            Self::External => "external",
        }
    }
}

/// An authenticated request's user.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) name: String,
    pub(crate) role: Role,
    pub(crate) via: Via,
    /// The token every form post of this session must carry; `None` for bearer
    /// requests, which need none.
    pub(crate) csrf: Option<String>,
}

impl Session {
    /// Checks a posted CSRF token in constant time; a bearer request needs none.
    pub(crate) fn csrf_ok(&self, posted: Option<&str>) -> bool {
        match (&self.csrf, posted) {
            (None, _) => self.via == Via::Bearer,
            (Some(expected), Some(posted)) => {
                expected.len() == posted.len()
                    && bool::from(expected.as_bytes().ct_eq(posted.as_bytes()))
            }
            (Some(_), None) => false,
        }
    }
}

/// Returns the value of cookie `name` from the `Cookie` headers.
pub(crate) fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.trim_matches('"'))
}

/// Cleans a name typed on the login page: printable characters only, at most 64,
/// `operator` when nothing is left.
pub(crate) fn clean_name(name: &str) -> String {
    let name: String = name
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(64)
        .collect();
    if name.trim().is_empty() {
        "operator".to_string()
    } else {
        name.trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RO: &str = "read-only-token-0123456789";
    const ADMIN: &str = "admin-token-0123456789abcdef";

    fn auth() -> ConsoleAuth {
        ConsoleAuth::tokens(Some(RO.into()), Some(ADMIN.into())).unwrap()
    }

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_796_292_000).unwrap()
    }

    fn with_header(name: &'static str, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, value.parse().unwrap());
        headers
    }

    #[test]
    fn tokens_are_checked_when_built() {
        assert!(matches!(
            ConsoleAuth::tokens(None, None),
            Err(ConsoleError::NoToken)
        ));
        assert!(matches!(
            ConsoleAuth::tokens(Some(String::new()), Some(String::new())),
            Err(ConsoleError::NoToken)
        ));
        assert!(matches!(
            ConsoleAuth::tokens(Some("short".into()), None),
            Err(ConsoleError::TokenTooShort { len: 5, .. })
        ));
        assert!(matches!(
            ConsoleAuth::tokens(Some(RO.into()), Some(RO.into())),
            Err(ConsoleError::SameTokens)
        ));
        assert!(ConsoleAuth::tokens(None, Some(ADMIN.into())).is_ok());
        let debug = format!("{:?}", auth());
        assert!(!debug.contains(RO) && !debug.contains(ADMIN), "{debug}");
    }

    #[test]
    fn a_bearer_token_grants_its_role() {
        let auth = auth();
        assert_eq!(auth.role_of_token(RO), Some(Role::ReadOnly));
        assert_eq!(auth.role_of_token(ADMIN), Some(Role::Admin));
        assert_eq!(auth.role_of_token("admin-token-0123456789abcdeX"), None);
        assert_eq!(auth.role_of_token(""), None);
        let session = auth
            .authenticate(
                &with_header("authorization", &format!("Bearer {ADMIN}")),
                None,
                now(),
            )
            .unwrap();
        assert_eq!((session.role, session.via), (Role::Admin, Via::Bearer));
        assert!(session.csrf_ok(None));
        assert!(
            auth.authenticate(&with_header("authorization", "Bearer nope"), None, now())
                .is_none()
        );
        assert!(
            auth.authenticate(&with_header("authorization", ADMIN), None, now())
                .is_none()
        );
        assert!(auth.authenticate(&HeaderMap::new(), None, now()).is_none());
    }

    #[test]
    fn a_session_cookie_holds_until_it_expires_or_is_changed() {
        let auth = auth();
        let cookie = auth.seal_session("alice", Role::Admin, now());
        let headers = with_header("cookie", &format!("other=1; {COOKIE_NAME}={cookie}"));
        let session = auth.authenticate(&headers, None, now()).unwrap();
        assert_eq!(session.name, "alice");
        assert_eq!((session.role, session.via), (Role::Admin, Via::Cookie));
        let csrf = session.csrf.clone().unwrap();
        assert!(session.csrf_ok(Some(&csrf)));
        assert!(!session.csrf_ok(None));
        assert!(!session.csrf_ok(Some("x")));

        let later = now() + time::Duration::seconds(SESSION_SECS);
        assert!(auth.authenticate(&headers, None, later).is_none());
        // a read-only session turned admin: the signature no longer holds
        let forged = auth
            .seal_session("bob", Role::ReadOnly, now())
            .replacen(".ro.", ".admin.", 1);
        let forged = with_header("cookie", &format!("{COOKIE_NAME}={forged}"));
        assert!(auth.authenticate(&forged, None, now()).is_none());
        // another token pair signs with another key
        let other =
            ConsoleAuth::tokens(Some(RO.into()), Some("another-admin-token-xyz".into())).unwrap();
        assert!(other.authenticate(&headers, None, now()).is_none());
    }

    #[test]
    fn an_external_user_is_trusted_as_the_layer_names_it() {
        let auth = ConsoleAuth::external().unwrap();
        assert!(!auth.has_login());
        assert!(auth.authenticate(&HeaderMap::new(), None, now()).is_none());
        let user = ConsoleUser::new("carol@example.com", Role::ReadOnly);
        let session = auth
            .authenticate(&HeaderMap::new(), Some(&user), now())
            .unwrap();
        assert_eq!(session.name, "carol@example.com");
        assert_eq!(session.via, Via::External);
        assert!(session.csrf.is_some());
        // tokens mean nothing here
        let bearer = with_header("authorization", &format!("Bearer {ADMIN}"));
        assert!(auth.authenticate(&bearer, None, now()).is_none());
    }

    #[test]
    fn names_are_cleaned() {
        assert_eq!(clean_name("  alice \n"), "alice");
        assert_eq!(clean_name("\u{1b}[31m"), "[31m");
        assert_eq!(clean_name(""), "operator");
        assert_eq!(clean_name(&"x".repeat(100)).len(), 64);
    }
}
