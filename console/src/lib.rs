//! An operator console for hookbox: see, search and replay webhook deliveries in a
//! browser, served by your own receiver.
//!
//! [`console_router`] returns an axum [`Router`](axum::Router) over a store's
//! inbox and outbox operator views ([`InboxAdmin`](hookbox_core::InboxAdmin),
//! [`OutboxAdmin`](hookbox_core::OutboxAdmin)); nest it under any prefix. Every
//! page, stylesheet and script is embedded in the crate: no CDN, no build step.
//!
//! - **Overview**: per provider, deliveries received, processed, pending, failed
//!   and dead, and the lag (the oldest pending row's age); received and processed
//!   per minute over the last hour; each sink's outbox backlog and dead messages.
//! - **Deliveries**: filter by provider, event type, state, time range, delivery
//!   id and a bounded search in the body (the newest
//!   [`BODY_SEARCH_WINDOW`](hookbox_core::BODY_SEARCH_WINDOW) rows that match the
//!   rest), newest first, one page after another by row id (keyset pagination);
//!   or open the delivery a dedupe key names.
//! - **A delivery**: its headers with credentials masked, its body as indented
//!   JSON, text or a hex dump, its attempts, its last error with the cause chain,
//!   and the outbox messages it staged.
//! - **Actions** (admin role): replay one dead letter; replay or delete every dead
//!   letter a filter selects, or retry every dead outbox message, after a page
//!   that shows how many and a button that names the count. Every action is logged
//!   (target `hookbox_console::audit`) with who did it.
//!
//! # Authentication
//! [`ConsoleAuth::tokens`] (or [`ConsoleAuth::from_env`]) gives a read-only and an
//! admin token: scripts send `Authorization: Bearer <token>`, browsers sign in on
//! the login page and get an `HttpOnly`, `SameSite=Strict` session cookie.
//! [`ConsoleAuth::external`] trusts your own auth layer instead: it puts a
//! [`ConsoleUser`] in the request's extensions. Without valid credentials every
//! page, JSON view and action answers 401.
//!
//! # Scripts
//! With `Authorization: Bearer <token>`, `GET /api/overview`, `GET /api/deliveries`
//! (the page's filter parameters, `before` and `limit`) and `GET
//! /api/deliveries/{id}` answer JSON (masked headers as `null`), and every action
//! answers JSON instead of redirecting.
//!
//! # Security
//! Deliveries are written by strangers. Everything from one is escaped for where
//! it is shown; every answer carries a Content-Security-Policy
//! ([`CONTENT_SECURITY_POLICY`]) that allows no inline script and nothing from
//! another origin; state-changing requests are POST only, need the admin role and
//! the session's CSRF token, and are refused from another `Origin`. Tokens are
//! compared in constant time.
//!
//! # Examples
//! Mount the console under `/console` beside a receiver:
//! ```no_run
//! use hookbox_console::{ConsoleAuth, console_router};
//! use hookbox_sqlite::{SqliteOptions, SqliteStore};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = SqliteStore::open("hookbox.db", SqliteOptions::default()).await?;
//! // HOOKBOX_CONSOLE_TOKEN (read-only) and HOOKBOX_CONSOLE_ADMIN_TOKEN (admin)
//! let auth = ConsoleAuth::from_env()?;
//! let app = axum::Router::new().nest("/console", console_router(store, auth));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
//!
//! Behind your own authentication, a layer that names the user:
//! ```
//! use axum::extract::Request;
//! use axum::middleware::{self, Next};
//! use hookbox_console::{Console, ConsoleAuth, ConsoleUser, Role};
//! # use hookbox_console::ConsoleStore;
//!
//! async fn my_auth(mut req: Request, next: Next) -> axum::response::Response {
//!     // your session lookup; here everyone is a read-only "alice"
//!     req.extensions_mut().insert(ConsoleUser::new("alice", Role::ReadOnly));
//!     next.run(req).await
//! }
//!
//! # fn build(store: impl ConsoleStore + 'static) -> Result<(), hookbox_console::ConsoleError> {
//! let console = Console::new(store, ConsoleAuth::external()?)
//!     .mask_header("x-internal-signature")
//!     .router()
//!     .layer(middleware::from_fn(my_auth));
//! let app: axum::Router = axum::Router::new().nest("/ops/console", console);
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod api;
mod assets;
mod auth;
mod error;
mod html;
mod pages;
mod query;
mod router;
mod show;
mod state;

pub use auth::{ADMIN_TOKEN_VAR, ConsoleAuth, ConsoleUser, MIN_TOKEN_LEN, Role, TOKEN_VAR};
pub use error::ConsoleError;
pub use router::CONTENT_SECURITY_POLICY;
pub use show::DEFAULT_MASKED_HEADERS;
pub use state::{Console, ConsoleStore};

/// Returns the console's routes over `store`, authenticated by `auth`:
/// `Console::new(store, auth).router()`. Nest it under the prefix of your choice.
pub fn console_router(store: impl ConsoleStore + 'static, auth: ConsoleAuth) -> axum::Router {
    Console::new(store, auth).router()
}
