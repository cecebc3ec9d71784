//! [`Console::router`]: the routes, the authentication in front of them, and the
//! headers every answer carries.

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderValue};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse as _, Response};
use axum::routing::{any, get, post};
use hookbox_core::time::OffsetDateTime;

use crate::auth::ConsoleUser;
use crate::html::Esc;
use crate::pages;
use crate::state::{App, Console, Ctx, html_headers};

/// The Content-Security-Policy of every answer: scripts, styles and everything else
/// from the console's own origin only; no inline script or style, no frames, no
/// plug-ins, forms posting to the console only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

impl Console {
    /// Returns the console's routes, to [`nest`](axum::Router::nest) under a prefix
    /// of your choice (or serve at the root).
    pub fn router(self) -> Router {
        let app = App::new(self);
        let protected = Router::new()
            .route("/", get(pages::overview::overview))
            .route("/overview", get(pages::overview::overview))
            .route("/deliveries", get(pages::deliveries::deliveries))
            .route(
                "/deliveries/confirm",
                get(pages::inbox_actions::deliveries_confirm),
            )
            .route(
                "/deliveries/lookup",
                get(pages::deliveries::deliveries_lookup),
            )
            .route(
                "/deliveries/replay",
                post(pages::inbox_actions::deliveries_replay_matching),
            )
            .route(
                "/deliveries/purge",
                post(pages::inbox_actions::deliveries_purge_matching),
            )
            .route("/deliveries/{id}", get(pages::deliveries::delivery))
            .route(
                "/deliveries/{id}/body",
                get(pages::deliveries::delivery_body),
            )
            .route(
                "/deliveries/{id}/replay",
                post(pages::inbox_actions::delivery_replay),
            )
            .route("/api/overview", get(crate::api::overview))
            .route("/api/deliveries", get(crate::api::deliveries))
            .route("/api/deliveries/{id}", get(crate::api::delivery))
            .route("/outbox", get(pages::outbox::outbox))
            .route("/outbox/confirm", get(pages::outbox::outbox_confirm))
            .route(
                "/outbox/replay",
                post(pages::outbox::outbox_replay_matching),
            )
            .route("/outbox/{id}", get(pages::outbox::message))
            .route("/outbox/{id}/replay", post(pages::outbox::message_replay))
            .route("/logout", post(pages::login::logout))
            // any other path under the console: 401 without credentials, 404 with
            .route("/{*rest}", any(not_found))
            .route_layer(middleware::from_fn_with_state(app.clone(), authenticate));
        Router::new()
            .route(
                "/login",
                get(pages::login::login_form).post(pages::login::login),
            )
            .route("/assets/{name}", get(asset))
            .merge(protected)
            .layer(middleware::map_response(security_headers))
            .with_state(app)
    }
}

/// Lets a request through with its [`Ctx`] when it authenticates; 401 otherwise,
/// whatever it asked for.
async fn authenticate(State(app): State<App>, mut req: Request, next: Next) -> Response {
    let now = OffsetDateTime::now_utc();
    let base = app.base(req.extensions());
    let session =
        app.auth()
            .authenticate(req.headers(), req.extensions().get::<ConsoleUser>(), now);
    let Some(session) = session else {
        return unauthorized(&app, &base);
    };
    req.extensions_mut().insert(Ctx { base, session, now });
    next.run(req).await
}

/// 401 with a pointer to the login page.
pub(crate) fn unauthorized(app: &App, base: &str) -> Response {
    let login = if app.auth().has_login() {
        format!(
            "<p><a href=\"{}\">Sign in</a> with a console token, or send <code>Authorization: Bearer &lt;token&gt;</code>.</p>",
            Esc(&format!("{base}/login"))
        )
    } else {
        "<p>Sign in through your application first.</p>".to_string()
    };
    let body = crate::html::page(
        &crate::html::Frame {
            base,
            title: "Sign in required",
            nav: "",
            who: None,
            csrf: None,
        },
        &format!("<section class=\"panel login\"><h1>Sign in required</h1>{login}</section>"),
    );
    let mut response = (StatusCode::UNAUTHORIZED, html_headers(), body).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"hookbox console\""),
    );
    response
}

async fn not_found(req: Request) -> Response {
    let _ = req;
    (StatusCode::NOT_FOUND, "not found").into_response()
}

async fn asset(Path(name): Path<String>) -> Response {
    crate::assets::serve(&name)
}

/// The headers every answer carries: the CSP, no sniffing, no framing, no referrer
/// to another origin (`no-referrer` would make a browser send `Origin: null` with
/// the console's own form posts),
/// and no caching of pages (the assets set their own cache).
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}
