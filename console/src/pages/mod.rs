//! The pages and actions: overview, deliveries, a delivery, the outbox, a message,
//! the confirmations of actions on everything a filter selects, and the login.

// a handler's early answer (401, 404, 403) travels as the `Err` of its checks, once
// per request: its size costs nothing worth a box
#![allow(clippy::result_large_err)]

use std::fmt::Write as _;

use axum::extract::{Path, Request, State};
use axum::http::header::{self, HeaderValue};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse as _, Redirect, Response};
use hookbox_core::time::{Duration, OffsetDateTime};
use hookbox_core::{
    AnyStoreError, BODY_SEARCH_WINDOW, DeliveryState, InboxAdmin, InboxFilter, MessageId,
    MessageState, OutboxAdmin, OutboxFilter, error_chain,
};
use serde_json::json;

use crate::Role;
use crate::auth::{COOKIE_NAME, SESSION_SECS, Via, clean_name};
use crate::html::{Esc, Frame, escape, page, path_segment, query, truncate};
use crate::query::{InboxQuery, OutboxQuery, Params, page_size};
use crate::show::{BodyView, age, badge, body_views, headers_table, maybe_time, render_body, time};
use crate::state::{App, Ctx, Posted, admin_only, admin_post, html_headers, same_origin};

pub(crate) mod deliveries;
pub(crate) mod inbox_actions;
pub(crate) mod login;
pub(crate) mod outbox;
pub(crate) mod overview;

fn ctx_of(req: &Request) -> Result<Ctx, Response> {
    req.extensions()
        .get::<Ctx>()
        .cloned()
        .ok_or_else(|| StatusCode::UNAUTHORIZED.into_response())
}

fn params_of(req: &Request) -> Params {
    Params::parse(req.uri().query().unwrap_or_default().as_bytes())
}

/// A page for `ctx`'s user.
fn render(ctx: &Ctx, title: &str, nav: &str, body: &str) -> Response {
    render_status(ctx, StatusCode::OK, title, nav, body)
}

fn render_status(ctx: &Ctx, status: StatusCode, title: &str, nav: &str, body: &str) -> Response {
    let frame = Frame {
        base: &ctx.base,
        title,
        nav,
        who: Some((&ctx.session.name, ctx.session.role.as_str())),
        csrf: ctx.session.csrf.as_deref(),
    };
    (status, html_headers(), page(&frame, body)).into_response()
}

/// 500 with the store's error chain (logged too).
fn store_failed(ctx: &Ctx, err: &AnyStoreError) -> Response {
    let chain = error_chain(err);
    tracing::error!(target: "hookbox_console", error = %chain, "console: the store failed");
    render_status(
        ctx,
        StatusCode::INTERNAL_SERVER_ERROR,
        "Store error",
        "",
        &format!(
            "<h1>The store failed</h1><section class=\"panel\"><pre class=\"wrap\">{}</pre></section>",
            Esc(&chain)
        ),
    )
}

fn bad_request(ctx: &Ctx, why: &str) -> Response {
    render_status(
        ctx,
        StatusCode::BAD_REQUEST,
        "Bad request",
        "",
        &format!("<h1>Bad request</h1><p class=\"warning\">{}</p>", Esc(why)),
    )
}

fn not_found_page(ctx: &Ctx, what: &str) -> Response {
    render_status(
        ctx,
        StatusCode::NOT_FOUND,
        "Not found",
        "",
        &format!("<h1>Not found</h1><p>{}</p>", Esc(what)),
    )
}

/// A notice after an action, from the fixed set a redirect names (never text from
/// the URL).
fn notice(params: &Params) -> String {
    let n: u64 = params.get("n").and_then(|n| n.parse().ok()).unwrap_or(0);
    let text = match params.get("notice") {
        Some("replayed") => format!("Replayed {n} dead letter{}.", plural(n)),
        Some("purged") => format!("Deleted {n} dead letter{}.", plural(n)),
        Some("replayed-one") => "Replayed: the delivery is due now.".to_string(),
        Some("not-dead") => {
            "Nothing replayed: the delivery is not a dead letter (any more).".to_string()
        }
        Some("message-replayed") => "Replayed: the message is due now.".to_string(),
        Some("message-not-replayed") => {
            "Nothing replayed: the message is pending or gone.".to_string()
        }
        Some("messages-replayed") => format!("Replayed {n} dead message{}.", plural(n)),
        _ => return String::new(),
    };
    format!(
        "<p class=\"notice\" role=\"status\" id=\"notice\">{}</p>",
        Esc(&text)
    )
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The dead letters among what `filter` selects: what `replay_matching` and
/// `purge_matching` act on; `None` when the filter selects no dead letter at all.
fn dead_among(filter: InboxFilter) -> Option<InboxFilter> {
    match filter.state {
        None | Some(DeliveryState::Dead) => Some(InboxFilter {
            state: Some(DeliveryState::Dead),
            ..filter
        }),
        Some(_) => None,
    }
}

fn dead_messages_among(filter: OutboxFilter) -> Option<OutboxFilter> {
    match filter.state {
        None | Some(MessageState::Dead) => Some(OutboxFilter {
            state: Some(MessageState::Dead),
            ..filter
        }),
        Some(_) => None,
    }
}

fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn parse_id(ctx: &Ctx, id: &str) -> Result<i64, Response> {
    id.parse()
        .map_err(|_| not_found_page(ctx, "No delivery with that id."))
}

fn download(bytes: Vec<u8>, file: &str) -> Response {
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{file}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

/// Logs an action with who did it.
fn audit(ctx: &Ctx, action: &str, target: &str, count: u64) {
    tracing::info!(
        target: "hookbox_console::audit",
        user = %ctx.session.name,
        role = %ctx.session.role,
        via = ctx.session.via.as_str(),
        action,
        target,
        count,
        "console action"
    );
}

/// Answers an action: JSON for a script (bearer token), a redirect with a notice
/// for a browser.
fn acted(ctx: &Ctx, json: serde_json::Value, to: String) -> Response {
    if ctx.session.via == Via::Bearer {
        return (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            json.to_string(),
        )
            .into_response();
    }
    Redirect::to(&to).into_response()
}

/// Which bulk action a confirmation is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bulk {
    Replay,
    Purge,
}

impl Bulk {
    fn parse(name: &str) -> Option<Self> {
        match name {
            "replay" => Some(Self::Replay),
            "purge" => Some(Self::Purge),
            _ => None,
        }
    }
}

/// 409 for a confirmation shown again because the count changed, else 200.
fn conflict_or_ok(changed_from: Option<u64>) -> StatusCode {
    if changed_from.is_some() {
        StatusCode::CONFLICT
    } else {
        StatusCode::OK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_actions_count_dead_letters_only() {
        assert_eq!(dead_among(InboxFilter::all()), Some(InboxFilter::dead()));
        let stripe = InboxFilter::dead().with_provider("stripe");
        assert_eq!(dead_among(stripe.clone()), Some(stripe));
        assert_eq!(dead_among(InboxFilter::pending()), None);
        assert_eq!(dead_among(InboxFilter::processed()), None);
        assert_eq!(
            dead_messages_among(OutboxFilter::all()),
            Some(OutboxFilter::dead())
        );
        assert_eq!(dead_messages_among(OutboxFilter::sent()), None);
    }

    #[test]
    fn notices_come_from_a_fixed_set() {
        let params = Params::parse(b"notice=replayed&n=3");
        assert!(notice(&params).contains("Replayed 3 dead letters."));
        let params = Params::parse(b"notice=%3Cscript%3E&n=1");
        assert_eq!(notice(&params), "");
        assert_eq!(group_thousands(10_000), "10,000");
        assert_eq!(group_thousands(999), "999");
    }
}
