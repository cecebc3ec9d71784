//! Signing in (a token for a session cookie) and out.

#[allow(clippy::wildcard_imports)]
use super::*;

/// `GET /login`.
pub(crate) async fn login_form(State(app): State<App>, req: Request) -> Response {
    let base = app.base(req.extensions());
    if !app.auth().has_login() {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    }
    login_page(&base, StatusCode::OK, None)
}

pub(super) fn login_page(base: &str, status: StatusCode, error: Option<&str>) -> Response {
    let error = error.map_or_else(String::new, |e| {
        format!("<p class=\"warning\" id=\"login-error\">{}</p>", Esc(e))
    });
    let body = format!(
        "<section class=\"panel login\"><h1>Sign in</h1>{error}\
         <form method=\"post\" action=\"{}\" id=\"login\">\
         <label>Console token<input type=\"password\" name=\"token\" autocomplete=\"current-password\" required autofocus></label>\
         <label>Your name <span class=\"hint\">shown with every action in the log</span><input type=\"text\" name=\"name\" maxlength=\"64\" autocomplete=\"username\"></label>\
         <button type=\"submit\" id=\"sign-in\">Sign in</button></form>\
         <p class=\"hint\">Scripts send <code>Authorization: Bearer &lt;token&gt;</code> instead.</p></section>",
        escape(&format!("{base}/login"))
    );
    let frame = Frame {
        base,
        title: "Sign in",
        nav: "",
        who: None,
        csrf: None,
    };
    (status, html_headers(), page(&frame, &body)).into_response()
}

/// `POST /login`: exchanges a token for a session cookie.
pub(crate) async fn login(State(app): State<App>, req: Request) -> Response {
    let base = app.base(req.extensions());
    if !app.auth().has_login() {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    }
    let (parts, body) = req.into_parts();
    if !same_origin(&parts.headers) {
        return crate::state::forbidden("cross-origin request refused");
    }
    let Ok(bytes) = axum::body::to_bytes(body, 16 * 1024).await else {
        return (StatusCode::BAD_REQUEST, "unreadable form body").into_response();
    };
    let params = Params::parse(&bytes);
    let token = params.get("token").unwrap_or_default();
    let Some(role) = app.auth().role_of_token(token) else {
        tracing::warn!(target: "hookbox_console::audit", "console: a sign-in with an invalid token");
        return login_page(
            &base,
            StatusCode::UNAUTHORIZED,
            Some("That token is not valid."),
        );
    };
    let name = clean_name(params.get("name").unwrap_or_default());
    let now = OffsetDateTime::now_utc();
    let value = app.auth().seal_session(&name, role, now);
    tracing::info!(target: "hookbox_console::audit", user = %name, role = %role, "console sign-in");
    let cookie = format!(
        "{COOKIE_NAME}={value}; Path={}; HttpOnly; SameSite=Strict; Max-Age={SESSION_SECS}{}",
        cookie_path(&base),
        if is_https(&parts.headers) {
            "; Secure"
        } else {
            ""
        }
    );
    let mut response = Redirect::to(&format!("{base}/overview")).into_response();
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

/// `POST /logout`: clears the session cookie.
pub(crate) async fn logout(req: Request) -> Response {
    let Posted { ctx, .. } = match admin_post(req).await {
        Ok(posted) => posted,
        Err(response) => return response,
    };
    tracing::info!(target: "hookbox_console::audit", user = %ctx.session.name, role = %ctx.session.role, "console sign-out");
    let mut response = Redirect::to(&format!("{}/login", ctx.base)).into_response();
    let cookie = format!(
        "{COOKIE_NAME}=; Path={}; HttpOnly; SameSite=Strict; Max-Age=0",
        cookie_path(&ctx.base)
    );
    if let Ok(cookie) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

pub(super) fn cookie_path(base: &str) -> &str {
    if base.is_empty() { "/" } else { base }
}

/// Returns `true` when the browser reached the console over HTTPS (its `Origin`,
/// or a proxy's `X-Forwarded-Proto`): the cookie is then `Secure`.
pub(super) fn is_https(headers: &HeaderMap) -> bool {
    let starts = |name: &str, prefix: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with(prefix))
    };
    starts("origin", "https://") || starts("x-forwarded-proto", "https")
}
