//! The console's state and what every handler reads from a request: [`Console`]
//! and the store it reads through, the shared [`App`], an authenticated request's
//! [`Ctx`], and the checks every form post passes (same origin, admin role, CSRF
//! token). The routes that use them are in `router`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{NestedPath, Request};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse as _, Response};
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{InboxAdmin, OutboxAdmin};

use crate::auth::{ConsoleAuth, Session};
use crate::query::Params;

/// What the console reads and acts through: a store's inbox and outbox operator
/// views. Every type that is both is one (`hookbox-sqlite`'s `SqliteStore`,
/// `hookbox-diesel-pg`'s `PgStore`, `hookbox-redis-cache`'s `Cached<S>`, and an
/// `Arc` of any of them).
pub trait ConsoleStore: InboxAdmin + OutboxAdmin {}

impl<T: InboxAdmin + OutboxAdmin + ?Sized> ConsoleStore for T {}

/// The largest form body the console reads.
const FORM_LIMIT: usize = 64 * 1024;

/// An operator console over a store, to mount in your axum application.
///
/// [`console_router`](crate::console_router) is `Console::new(store, auth).router()`;
/// the builder adds headers to mask and a public path for proxies that rewrite it.
#[derive(Clone)]
pub struct Console {
    store: Arc<dyn ConsoleStore>,
    auth: ConsoleAuth,
    masked: Vec<String>,
    base_path: Option<String>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("auth", &self.auth)
            .field("masked", &self.masked)
            .field("base_path", &self.base_path)
            .finish_non_exhaustive()
    }
}

impl Console {
    /// A console over `store`, authenticating with `auth`.
    pub fn new(store: impl ConsoleStore + 'static, auth: ConsoleAuth) -> Self {
        Self {
            store: Arc::new(store),
            auth,
            masked: Vec::new(),
            base_path: None,
        }
    }

    /// Masks the header `name` (case-insensitive) on every page, besides the ones
    /// masked always ([`DEFAULT_MASKED_HEADERS`](crate::DEFAULT_MASKED_HEADERS) and
    /// any name containing `token`, `secret`, `password`, `session` or `api-key`).
    #[must_use]
    pub fn mask_header(mut self, name: impl Into<String>) -> Self {
        self.masked.push(name.into().to_ascii_lowercase());
        self
    }

    /// Builds links with `path` as the console's public prefix (`/ops/console`)
    /// instead of the path it is nested at: for a proxy that strips or changes the
    /// prefix before the request reaches your application.
    #[must_use]
    pub fn with_base_path(mut self, path: impl Into<String>) -> Self {
        self.base_path = Some(path.into().trim_end_matches('/').to_string());
        self
    }
}

/// The console's shared state.
#[derive(Clone)]
pub(crate) struct App(Arc<Console>);

impl App {
    /// The state of `console`'s routes.
    pub(crate) fn new(console: Console) -> Self {
        Self(Arc::new(console))
    }

    pub(crate) fn store(&self) -> &dyn ConsoleStore {
        &*self.0.store
    }

    pub(crate) fn auth(&self) -> &ConsoleAuth {
        &self.0.auth
    }

    pub(crate) fn masked(&self) -> &[String] {
        &self.0.masked
    }

    /// The console's public prefix for this request: the configured one, or the
    /// path it is nested at (empty at the root).
    pub(crate) fn base(&self, req_extensions: &axum::http::Extensions) -> String {
        if let Some(base) = &self.0.base_path {
            return base.clone();
        }
        req_extensions
            .get::<NestedPath>()
            .map(|p| p.as_str().trim_end_matches('/').to_string())
            .unwrap_or_default()
    }
}

/// An authenticated request's context, put in its extensions by [`authenticate`].
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub(crate) base: String,
    pub(crate) session: Session,
    pub(crate) now: OffsetDateTime,
}

/// The `Content-Type` of a page.
pub(crate) fn html_headers() -> [(header::HeaderName, HeaderValue); 1] {
    [(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    )]
}

/// Returns `true` when a state-changing request comes from the console's own
/// origin: a browser's `Origin` (sent with every form post) names the `Host` it
/// was sent to, and `Sec-Fetch-Site`, where sent, says `same-origin`. A request
/// with neither (a script) passes this check and must authenticate with a bearer
/// token or carry the session's CSRF token.
pub(crate) fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site")
        && !matches!(site.as_bytes(), b"same-origin" | b"none")
    {
        return false;
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let (Ok(origin), Some(host)) = (
        origin.to_str(),
        headers.get(header::HOST).and_then(|h| h.to_str().ok()),
    ) else {
        return false;
    };
    origin
        .split_once("://")
        .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host))
}

/// A form post read and checked: the same origin, the admin role, the CSRF token.
pub(crate) struct Posted {
    pub(crate) ctx: Ctx,
    pub(crate) params: Params,
}

/// Reads a form post and checks it may change something: 403 for a cross-origin
/// request, a read-only user or a missing or wrong CSRF token; 400 for an
/// unreadable body.
pub(crate) async fn admin_post(req: Request) -> Result<Posted, Response> {
    debug_assert_eq!(req.method(), Method::POST);
    let (parts, body) = req.into_parts();
    let ctx = parts
        .extensions
        .get::<Ctx>()
        .cloned()
        .ok_or_else(|| StatusCode::UNAUTHORIZED.into_response())?;
    if !same_origin(&parts.headers) {
        return Err(forbidden("cross-origin request refused"));
    }
    let bytes = axum::body::to_bytes(Body::new(body), FORM_LIMIT)
        .await
        .map_err(|_| (StatusCode::BAD_REQUEST, "unreadable form body").into_response())?;
    let params = Params::parse(&bytes);
    if !ctx.session.csrf_ok(params.get("csrf")) {
        return Err(forbidden(
            "missing or invalid CSRF token: reload the page and try again",
        ));
    }
    Ok(Posted { ctx, params })
}

/// Like [`admin_post`], and the user must be an admin.
pub(crate) async fn admin_only(req: Request) -> Result<Posted, Response> {
    let posted = admin_post(req).await?;
    if posted.ctx.session.role != crate::Role::Admin {
        return Err(forbidden("this action needs the admin role"));
    }
    Ok(posted)
}

/// 403 with `why`.
pub(crate) fn forbidden(why: &'static str) -> Response {
    (StatusCode::FORBIDDEN, why).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn only_the_same_origin_may_post() {
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8080")])));
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080")
        ])));
        assert!(same_origin(&headers(&[
            ("host", "ops.example.com"),
            ("origin", "https://ops.example.com"),
            ("sec-fetch-site", "same-origin")
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example")
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "null")
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "127.0.0.1:8080"),
            ("sec-fetch-site", "cross-site")
        ])));
        assert!(!same_origin(&headers(&[(
            "origin",
            "http://127.0.0.1:8080"
        )])));
    }
}
