//! [`ConsoleError`]: why a console could not be set up.

/// Why a [`ConsoleAuth`](crate::ConsoleAuth) could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// Neither a read-only nor an admin token was given: every request would be
    /// refused.
    #[error(
        "no console token: set a read-only or an admin token (HOOKBOX_CONSOLE_TOKEN, HOOKBOX_CONSOLE_ADMIN_TOKEN)"
    )]
    NoToken,
    /// A token is shorter than [`MIN_TOKEN_LEN`](crate::MIN_TOKEN_LEN) bytes, short
    /// enough to guess.
    #[error("the {role} token is {len} bytes long; a console token needs at least {min} bytes")]
    TokenTooShort {
        /// Which token: `read-only` or `admin`.
        role: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The minimum.
        min: usize,
    },
    /// The read-only and the admin token are the same, so the roles could not be
    /// told apart.
    #[error("the read-only and the admin token are the same")]
    SameTokens,
    /// The operating system's random source failed while making a signing key.
    #[error("the system random source failed")]
    Random(#[source] getrandom::Error),
}
