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
use crate::router::{App, Ctx, Posted, admin_only, admin_post, html_headers, same_origin};
use crate::show::{BodyView, age, badge, body_views, headers_table, maybe_time, render_body, time};

/// The minutes the overview's chart covers.
const CHART_MINUTES: i64 = 60;

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

/// `GET /` and `GET /overview`.
pub(crate) async fn overview(State(app): State<App>, req: Request) -> Response {
    let ctx = match ctx_of(&req) {
        Ok(ctx) => ctx,
        Err(response) => return response,
    };
    let since = ctx.now - Duration::minutes(CHART_MINUTES);
    let inbox = match InboxAdmin::overview(app.store(), since).await {
        Ok(inbox) => inbox,
        Err(err) => return store_failed(&ctx, &err),
    };
    let sinks = match OutboxAdmin::sinks(app.store()).await {
        Ok(sinks) => sinks,
        Err(err) => return store_failed(&ctx, &err),
    };
    let base = &ctx.base;
    let link = |q: &str| escape(&format!("{base}/deliveries?{q}"));
    let mut out = String::from("<h1>Overview</h1>");
    out.push_str("<section class=\"panel\"><h2>Inbox by provider</h2>");
    if inbox.providers.is_empty() {
        out.push_str("<p class=\"muted\">The inbox is empty.</p>");
    } else {
        out.push_str(
            "<table id=\"providers\"><thead><tr><th>Provider</th><th class=\"num\">Received</th>\
             <th class=\"num\">Processed</th><th class=\"num\">Pending</th><th class=\"num\">Failed</th>\
             <th class=\"num\">Dead</th><th>Lag (oldest pending)</th></tr></thead><tbody>",
        );
        let mut totals = [0u64; 5];
        for p in &inbox.providers {
            let q = |state: &str| query([("state", state), ("provider", p.provider.as_str())]);
            let _ = write!(
                out,
                "<tr><td><a href=\"{}\">{}</a></td><td class=\"num\">{}</td>\
                 <td class=\"num\"><a href=\"{}\">{}</a></td><td class=\"num\"><a href=\"{}\">{}</a></td>\
                 <td class=\"num\"><a href=\"{}\">{}</a></td><td class=\"num\"><a href=\"{}\" data-count=\"dead\">{}</a></td><td>{}</td></tr>",
                link(&q("")),
                Esc(&p.provider),
                p.received(),
                link(&q("processed")),
                p.processed,
                link(&q("pending")),
                p.pending,
                link(&q("failed")),
                p.failed,
                link(&q("dead")),
                p.dead,
                p.oldest_pending.map_or_else(
                    || "<span class=\"muted\">none pending</span>".to_string(),
                    |at| format!(
                        "{} <span class=\"hint\">since {}</span>",
                        age(at, ctx.now),
                        time(at)
                    )
                ),
            );
            for (total, n) in
                totals
                    .iter_mut()
                    .zip([p.received(), p.processed, p.pending, p.failed, p.dead])
            {
                *total += n;
            }
        }
        let _ = write!(
            out,
            "<tr class=\"total\"><th>All</th><th class=\"num\">{}</th><th class=\"num\">{}</th>\
             <th class=\"num\">{}</th><th class=\"num\">{}</th><th class=\"num\" id=\"total-dead\">{}</th><th></th></tr>",
            totals[0], totals[1], totals[2], totals[3], totals[4]
        );
        out.push_str("</tbody></table>");
    }
    out.push_str("</section>");

    out.push_str("<section class=\"panel\"><h2>Received and processed per minute, last hour</h2>");
    out.push_str(&chart(&inbox.minutes));
    out.push_str("</section>");

    out.push_str("<section class=\"panel\"><h2>Outbox by sink</h2>");
    if sinks.is_empty() {
        out.push_str("<p class=\"muted\">No outbox messages.</p>");
    } else {
        out.push_str(
            "<table id=\"sinks\"><thead><tr><th>Sink</th><th class=\"num\">Backlog</th><th class=\"num\">Sent</th>\
             <th class=\"num\">Dead</th><th>Lag (oldest pending)</th></tr></thead><tbody>",
        );
        for s in &sinks {
            let q = |state: &str| {
                escape(&format!(
                    "{base}/outbox?{}",
                    query([("state", state), ("sink", s.sink.as_str())])
                ))
            };
            let _ = write!(
                out,
                "<tr><td><a href=\"{}\">{}</a></td><td class=\"num\"><a href=\"{}\">{}</a></td>\
                 <td class=\"num\">{}</td><td class=\"num\"><a href=\"{}\">{}</a></td><td>{}</td></tr>",
                q(""),
                Esc(&s.sink),
                q("pending"),
                s.pending,
                s.sent,
                q("dead"),
                s.dead,
                s.oldest_pending.map_or_else(
                    || "<span class=\"muted\">none pending</span>".to_string(),
                    |at| age(at, ctx.now)
                ),
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</section>");
    render(&ctx, "Overview", "overview", &out)
}

/// An SVG bar chart of received (light) and processed (dark) per minute.
fn chart(minutes: &[hookbox_core::MinuteCounts]) -> String {
    if minutes.is_empty() {
        return "<p class=\"muted\">No minutes to show.</p>".to_string();
    }
    let (width, height, top) = (600.0_f64, 130.0_f64, 12.0_f64);
    let max = minutes
        .iter()
        .map(|m| m.received.max(m.processed))
        .max()
        .unwrap_or(0)
        .max(1);
    let slot = width / minutes.len() as f64;
    let bar = (slot / 2.0 - 0.5).max(0.5);
    let mut out = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {width} {height}\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"received and processed per minute\">"
    );
    let _ = write!(
        out,
        "<line class=\"axis\" x1=\"0\" y1=\"{height}\" x2=\"{width}\" y2=\"{height}\"/>"
    );
    for (i, m) in minutes.iter().enumerate() {
        let x = i as f64 * slot;
        for (offset, value, class) in [
            (0.0, m.received, "received"),
            (bar, m.processed, "processed"),
        ] {
            if value == 0 {
                continue;
            }
            let h = (height - top) * value as f64 / max as f64;
            let minute = m
                .minute
                .format(&hookbox_core::time::format_description::well_known::Rfc3339)
                .unwrap_or_default();
            let _ = write!(
                out,
                "<rect class=\"{class}\" x=\"{:.2}\" y=\"{:.2}\" width=\"{bar:.2}\" height=\"{h:.2}\"><title>{} {value} {class}</title></rect>",
                x + offset,
                height - h,
                Esc(&minute)
            );
        }
    }
    let _ = write!(
        out,
        "</svg><div class=\"legend\"><span>-{CHART_MINUTES} min</span><span><span class=\"swatch received\"></span>received</span>\
         <span><span class=\"swatch processed\"></span>processed</span><span>highest: {max}/min</span><span class=\"end\">now</span></div>"
    );
    out
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

/// `GET /deliveries`: the filter form, one page of rows, the pager.
pub(crate) async fn deliveries(State(app): State<App>, req: Request) -> Response {
    let ctx = match ctx_of(&req) {
        Ok(ctx) => ctx,
        Err(response) => return response,
    };
    let params = params_of(&req);
    let q = InboxQuery::from_params(&params);
    let mut filter = match q.to_filter() {
        Ok(filter) => filter,
        Err(why) => return bad_request(&ctx, &why),
    };
    let before: Option<i64> = params.get("before").and_then(|b| b.parse().ok());
    filter.before_id = before;
    let limit = page_size(&params);
    let mut rows = match InboxAdmin::list(app.store(), filter, limit.saturating_add(1)).await {
        Ok(rows) => rows,
        Err(err) => return store_failed(&ctx, &err),
    };
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);

    let base = &ctx.base;
    let mut out = String::from("<h1>Deliveries</h1>");
    out.push_str(&notice(&params));
    out.push_str(&inbox_filter_form(base, &q));
    if ctx.session.role == Role::Admin {
        let confirm = |action: &str| {
            let mut pairs: Vec<(&str, &str)> = vec![("action", action)];
            pairs.extend(q.pairs());
            escape(&format!("{base}/deliveries/confirm?{}", query(pairs)))
        };
        let _ = write!(
            out,
            "<div class=\"actions\"><a id=\"replay-matching\" href=\"{}\">Replay the dead letters matching this filter…</a>\
             <a id=\"purge-matching\" href=\"{}\">Delete the dead letters matching this filter…</a></div>",
            confirm("replay"),
            confirm("purge")
        );
    }
    out.push_str("<section class=\"panel\">");
    if rows.is_empty() {
        out.push_str("<p class=\"muted\" id=\"no-rows\">No delivery matches.</p>");
    } else {
        out.push_str(
            "<table id=\"deliveries\"><thead><tr><th>Id</th><th>Received</th><th>Provider</th><th>Event type</th>\
             <th>Delivery id</th><th>State</th><th class=\"num\">Attempts</th><th>Last error</th></tr></thead><tbody>",
        );
        for row in &rows {
            let state = row.state().as_str();
            let first_error = row
                .last_error
                .as_deref()
                .and_then(|e| e.lines().next())
                .unwrap_or("");
            let _ = write!(
                out,
                "<tr data-state=\"{state}\"><td><a class=\"row-link\" href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td>\
                 <td class=\"clip mono\">{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"clip\">{}</td></tr>",
                escape(&format!("{base}/deliveries/{}", row.id)),
                row.id,
                time(row.received_at),
                Esc(row.key.provider()),
                Esc(&truncate(row.event_type.as_deref().unwrap_or(""), 60)),
                Esc(&truncate(row.key.delivery_id(), 60)),
                badge(state),
                row.attempts,
                Esc(&truncate(first_error, 120)),
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("<div class=\"pager\">");
    if before.is_some() {
        let _ = write!(
            out,
            "<a href=\"{}\">« Newest</a>",
            escape(&format!("{base}/deliveries?{}", q.to_query()))
        );
    }
    if more && let Some(last) = rows.last() {
        let last = last.id.to_string();
        let mut pairs: Vec<(&str, &str)> = q.pairs().collect();
        pairs.push(("before", &last));
        let limit = limit.to_string();
        if limit != crate::query::PAGE_SIZE.to_string() {
            pairs.push(("limit", &limit));
        }
        let _ = write!(
            out,
            "<a id=\"older\" href=\"{}\">Older »</a>",
            escape(&format!("{base}/deliveries?{}", query(pairs)))
        );
    }
    out.push_str("</div></section>");
    render(&ctx, "Deliveries", "deliveries", &out)
}

fn inbox_filter_form(base: &str, q: &InboxQuery) -> String {
    let mut states = String::from("<option value=\"\">any</option>");
    for state in DeliveryState::ALL {
        let name = state.as_str();
        let selected = if q.state == name { " selected" } else { "" };
        let _ = write!(states, "<option value=\"{name}\"{selected}>{name}</option>");
    }
    let input = |name: &str, label: &str, value: &str, kind: &str, hint: &str| {
        format!(
            "<label>{label}<input type=\"{kind}\" name=\"{name}\" value=\"{}\"{}></label>",
            Esc(value),
            if hint.is_empty() {
                String::new()
            } else {
                format!(" placeholder=\"{}\"", Esc(hint))
            }
        )
    };
    format!(
        "<section class=\"panel\"><form class=\"filters\" method=\"get\" action=\"{action}\" id=\"filters\">\
         <label>State<select name=\"state\">{states}</select></label>{provider}{event}{since}{until}{id}{body}\
         <button type=\"submit\">Filter</button><a href=\"{action}\">Clear</a></form>\
         <p class=\"hint\">Times are UTC. The body search looks for the text in the newest {window} deliveries that match the other conditions.</p>\
         <form class=\"filters\" method=\"get\" action=\"{lookup}\" id=\"lookup\"><label>Dedupe key<input type=\"text\" name=\"key\" placeholder=\"source/provider/delivery id\" size=\"40\"></label>\
         <button type=\"submit\" class=\"secondary\">Open</button></form></section>",
        lookup = escape(&format!("{base}/deliveries/lookup")),
        action = escape(&format!("{base}/deliveries")),
        provider = input("provider", "Provider", &q.provider, "text", "stripe"),
        event = input(
            "event_type",
            "Event type",
            &q.event_type,
            "text",
            "invoice.paid"
        ),
        since = input("since", "Received from", &q.since, "datetime-local", ""),
        until = input("until", "Received before", &q.until, "datetime-local", ""),
        id = input(
            "delivery_id",
            "Delivery id",
            &q.delivery_id,
            "text",
            "dedupe key's id"
        ),
        body = input(
            "body",
            "Body contains",
            &q.body,
            "search",
            "text in the body"
        ),
        window = group_thousands(u64::from(BODY_SEARCH_WINDOW)),
    )
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

/// `GET /deliveries/lookup?key=…`: opens the delivery a dedupe key names, as its
/// page shows it (`source[/tenant]/provider/delivery id`); a text without `/` is
/// taken as a delivery id and filtered on.
pub(crate) async fn deliveries_lookup(State(app): State<App>, req: Request) -> Response {
    let ctx = match ctx_of(&req) {
        Ok(ctx) => ctx,
        Err(response) => return response,
    };
    let params = params_of(&req);
    let key = params.get("key").unwrap_or_default();
    let base = &ctx.base;
    let segments: Vec<&str> = key.split('/').collect();
    if segments.len() < 3 {
        return Redirect::to(&format!(
            "{base}/deliveries?{}",
            query([("delivery_id", key)])
        ))
        .into_response();
    }
    // the scope (source or source/tenant) and the delivery id may hold `/` too:
    // try every split, each an exact match on provider and delivery id
    for at in 1..segments.len() - 1 {
        let scope = segments[..at].join("/");
        // the whole key: one row, through the unique key
        let filter = InboxFilter::all()
            .with_source(scope.clone())
            .with_provider(segments[at])
            .with_delivery_id(segments[at + 1..].join("/"));
        let rows = match InboxAdmin::list(app.store(), filter, 20).await {
            Ok(rows) => rows,
            Err(err) => return store_failed(&ctx, &err),
        };
        if let Some(row) = rows.iter().find(|row| row.key.scope() == scope) {
            return Redirect::to(&format!("{base}/deliveries/{}", row.id)).into_response();
        }
    }
    not_found_page(&ctx, &format!("No delivery has the dedupe key {key}."))
}

fn parse_id(ctx: &Ctx, id: &str) -> Result<i64, Response> {
    id.parse()
        .map_err(|_| not_found_page(ctx, "No delivery with that id."))
}

/// `GET /deliveries/{id}`.
pub(crate) async fn delivery(
    State(app): State<App>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let ctx = match ctx_of(&req) {
        Ok(ctx) => ctx,
        Err(response) => return response,
    };
    let id = match parse_id(&ctx, &id) {
        Ok(id) => id,
        Err(response) => return response,
    };
    let params = params_of(&req);
    let row = match InboxAdmin::get(app.store(), id).await {
        Ok(Some(row)) => row,
        Ok(None) => return not_found_page(&ctx, &format!("No delivery with id {id}.")),
        Err(err) => return store_failed(&ctx, &err),
    };
    let staged = OutboxFilter::all().with_key(row.key.clone());
    let messages = match OutboxAdmin::list(app.store(), staged, 100).await {
        Ok(messages) => messages,
        Err(err) => return store_failed(&ctx, &err),
    };
    let base = &ctx.base;
    let state = row.state();
    let mut out = format!("<h1>Delivery {id}</h1>");
    out.push_str(&notice(&params));
    out.push_str("<section class=\"panel\"><dl class=\"facts\">");
    let fact = |out: &mut String, name: &str, value: String| {
        let _ = write!(out, "<dt>{name}</dt><dd>{value}</dd>");
    };
    let text = |t: &str| format!("<code>{}</code>", Esc(t));
    let opt =
        |t: Option<&str>| t.map_or_else(|| "<span class=\"muted\">–</span>".to_string(), text);
    fact(
        &mut out,
        "State",
        format!("<span id=\"state\">{}</span>", badge(state.as_str())),
    );
    fact(&mut out, "Provider", text(row.key.provider()));
    fact(&mut out, "Source", text(row.key.source()));
    fact(&mut out, "Tenant", opt(row.key.tenant()));
    fact(&mut out, "Delivery id", text(row.key.delivery_id()));
    fact(&mut out, "Dedupe key", text(&row.key.to_string()));
    fact(&mut out, "Event type", opt(row.event_type.as_deref()));
    fact(
        &mut out,
        "Correlation id",
        opt(row.correlation_id.as_deref()),
    );
    fact(&mut out, "Signed at", maybe_time(row.signed_at));
    fact(&mut out, "Received", time(row.received_at));
    fact(&mut out, "Attempts", row.attempts.to_string());
    // a processed row or a dead letter is not retried: its next attempt means nothing
    let waiting = matches!(state, DeliveryState::Pending | DeliveryState::Failed);
    fact(
        &mut out,
        "Next attempt",
        maybe_time(waiting.then_some(row.next_attempt_at)),
    );
    fact(&mut out, "Processed", maybe_time(row.processed_at));
    fact(&mut out, "Dead since", maybe_time(row.dead_at));
    out.push_str("</dl>");
    if ctx.session.role == Role::Admin {
        if state == DeliveryState::Dead {
            let _ = write!(
                out,
                "<form method=\"post\" action=\"{}\" class=\"actions\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
                 <button type=\"submit\" id=\"replay-one\">Replay this delivery</button>\
                 <span class=\"hint\">Makes it due now with its attempts reset.</span></form>",
                escape(&format!("{base}/deliveries/{id}/replay")),
                Esc(ctx.session.csrf.as_deref().unwrap_or_default())
            );
        } else {
            out.push_str("<p class=\"hint\">Only a dead letter can be replayed.</p>");
        }
    }
    out.push_str("</section>");

    if let Some(error) = &row.last_error {
        let _ = write!(
            out,
            "<section class=\"panel\"><h2>Last error</h2><pre class=\"wrap\" id=\"last-error\">{}</pre></section>",
            Esc(error)
        );
    }

    out.push_str("<section class=\"panel\"><h2>Headers</h2>");
    out.push_str(&headers_table(&row.headers, app.masked()));
    out.push_str("</section>");

    out.push_str(&body_section(
        &params,
        &row.body,
        &format!("{base}/deliveries/{id}"),
    ));

    out.push_str("<section class=\"panel\"><h2>Outbox messages it staged</h2>");
    if messages.is_empty() {
        out.push_str("<p class=\"muted\">None.</p>");
    } else {
        out.push_str(&messages_table(base, &messages));
    }
    out.push_str("</section>");
    render(&ctx, &format!("Delivery {id}"), "deliveries", &out)
}

/// The body panel: the view tabs, the body, the download link.
fn body_section(params: &Params, body: &[u8], page_url: &str) -> String {
    let views = body_views(body);
    let view = params
        .get("view")
        .and_then(BodyView::parse)
        .unwrap_or(views[0]);
    let mut out = format!(
        "<section class=\"panel\"><h2>Body <span class=\"hint\">{} bytes</span></h2><div class=\"tabs\">",
        body.len()
    );
    for candidate in [BodyView::Pretty, BodyView::Text, BodyView::Hex] {
        let label = match candidate {
            BodyView::Pretty => "JSON",
            BodyView::Text => "Text",
            BodyView::Hex => "Hex",
        };
        if candidate == view {
            let _ = write!(out, "<span class=\"current\">{label}</span>");
        } else if views.contains(&candidate) {
            let _ = write!(
                out,
                "<a href=\"{}\">{label}</a>",
                escape(&format!("{page_url}?view={}", candidate.as_str()))
            );
        }
    }
    let _ = write!(
        out,
        "<a href=\"{}\">Download the raw bytes</a><button type=\"button\" class=\"secondary\" data-wrap=\"body\" hidden>Toggle line wrap</button></div>",
        escape(&format!("{page_url}/body"))
    );
    if body.is_empty() {
        out.push_str("<p class=\"muted\">Empty body.</p></section>");
        return out;
    }
    let (shown, cut) = render_body(body, view);
    let _ = write!(out, "<pre id=\"body\" class=\"wrap\">{shown}</pre>");
    if cut {
        out.push_str("<p class=\"hint\">Only the beginning is shown; download the raw bytes for the rest.</p>");
    }
    if view == BodyView::Text && std::str::from_utf8(body).is_err() {
        out.push_str(
            "<p class=\"hint\">Not UTF-8: invalid bytes are shown as replacement characters.</p>",
        );
    }
    out.push_str("</section>");
    out
}

fn messages_table(base: &str, messages: &[hookbox_core::OutboxMessage]) -> String {
    let mut out = String::from(
        "<table id=\"messages\"><thead><tr><th>Seq</th><th>Message id</th><th>Staged</th><th>Sink</th><th>Handler</th>\
         <th>Delivery</th><th>State</th><th class=\"num\">Attempts</th><th>Last error</th></tr></thead><tbody>",
    );
    for m in messages {
        let first_error = m
            .last_error
            .as_deref()
            .and_then(|e| e.lines().next())
            .unwrap_or("");
        let _ = write!(
            out,
            "<tr data-state=\"{state}\"><td>{seq}</td><td class=\"mono\"><a href=\"{href}\">{id}</a></td><td>{staged}</td>\
             <td>{sink}</td><td>{handler}</td><td class=\"clip mono\">{key}</td><td>{badge}</td><td class=\"num\">{attempts}</td><td class=\"clip\">{error}</td></tr>",
            state = m.state().as_str(),
            seq = m.seq,
            href = escape(&format!("{base}/outbox/{}", path_segment(m.id.as_str()))),
            id = Esc(m.id.as_str()),
            staged = time(m.staged_at),
            sink = Esc(&m.sink),
            handler = Esc(&m.handler),
            key = Esc(&truncate(&m.key.to_string(), 80)),
            badge = badge(m.state().as_str()),
            attempts = m.attempts,
            error = Esc(&truncate(first_error, 120)),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// `GET /deliveries/{id}/body`: the raw bytes, as a download only.
pub(crate) async fn delivery_body(
    State(app): State<App>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let ctx = match ctx_of(&req) {
        Ok(ctx) => ctx,
        Err(response) => return response,
    };
    let id = match parse_id(&ctx, &id) {
        Ok(id) => id,
        Err(response) => return response,
    };
    match InboxAdmin::get(app.store(), id).await {
        Ok(Some(row)) => download(row.body.to_vec(), &format!("delivery-{id}.bin")),
        Ok(None) => not_found_page(&ctx, &format!("No delivery with id {id}.")),
        Err(err) => store_failed(&ctx, &err),
    }
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

/// `POST /deliveries/{id}/replay`.
pub(crate) async fn delivery_replay(
    State(app): State<App>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let Posted { ctx, .. } = match admin_only(req).await {
        Ok(posted) => posted,
        Err(response) => return response,
    };
    let id = match parse_id(&ctx, &id) {
        Ok(id) => id,
        Err(response) => return response,
    };
    let replayed = match InboxAdmin::replay(app.store(), id).await {
        Ok(replayed) => replayed,
        Err(err) => return store_failed(&ctx, &err),
    };
    audit(
        &ctx,
        "inbox.replay",
        &format!("delivery {id}"),
        u64::from(replayed),
    );
    let notice = if replayed { "replayed-one" } else { "not-dead" };
    acted(
        &ctx,
        json!({ "ok": true, "replayed": u64::from(replayed) }),
        format!("{}/deliveries/{id}?notice={notice}", ctx.base),
    )
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

/// `GET /deliveries/confirm?action=replay|purge&…filter`: the count, and the form
/// that names it.
pub(crate) async fn deliveries_confirm(State(app): State<App>, req: Request) -> Response {
    let ctx = match ctx_of(&req) {
        Ok(ctx) => ctx,
        Err(response) => return response,
    };
    if ctx.session.role != Role::Admin {
        return crate::router::forbidden("this action needs the admin role");
    }
    let params = params_of(&req);
    let Some(action) = params.get("action").and_then(Bulk::parse) else {
        return bad_request(&ctx, "action must be replay or purge");
    };
    let q = InboxQuery::from_params(&params);
    let filter = match q.to_filter() {
        Ok(filter) => filter,
        Err(why) => return bad_request(&ctx, &why),
    };
    let count = match dead_count(&app, filter).await {
        Ok(count) => count,
        Err(err) => return store_failed(&ctx, &err),
    };
    inbox_confirm_page(&ctx, action, &q, count, None)
}

async fn dead_count(app: &App, filter: InboxFilter) -> Result<u64, AnyStoreError> {
    match dead_among(filter) {
        Some(dead) => InboxAdmin::count(app.store(), dead).await,
        None => Ok(0),
    }
}

fn inbox_confirm_page(
    ctx: &Ctx,
    action: Bulk,
    q: &InboxQuery,
    count: u64,
    changed_from: Option<u64>,
) -> Response {
    let base = &ctx.base;
    let (verb, title, path, class, consequence) = match action {
        Bulk::Replay => (
            "Replay",
            "Replay dead letters",
            "replay",
            "",
            "Each is made due now with its attempts reset; the worker applies it again.",
        ),
        Bulk::Purge => (
            "Delete",
            "Delete dead letters",
            "purge",
            " class=\"danger\"",
            "They are deleted for good. A provider that sends one of them again has it stored as new.",
        ),
    };
    let back = escape(&format!("{base}/deliveries?{}", q.to_query()));
    let mut out = format!("<h1>{title}</h1><section class=\"panel\">");
    if let Some(before) = changed_from {
        let _ = write!(
            out,
            "<p class=\"warning\" id=\"changed\">The set changed since you looked: {before} then, {count} now. Nothing was done; confirm again.</p>"
        );
    }
    let _ = write!(out, "<p>Filter: <code>{}</code></p>", Esc(&q.describe()));
    if count == 0 {
        let _ = write!(
            out,
            "<p id=\"confirm-count\" data-count=\"0\">No dead letter matches this filter: nothing to do.</p><p><a href=\"{back}\">Back</a></p></section>"
        );
        return render_status(ctx, conflict_or_ok(changed_from), title, "deliveries", &out);
    }
    let noun = format!("dead letter{}", plural(count));
    let _ = write!(
        out,
        "<p id=\"confirm-count\" data-count=\"{count}\"><strong>{count} {noun}</strong> match{}. {consequence}</p>\
         <form method=\"post\" action=\"{action}\" class=\"actions\">{hidden}\
         <input type=\"hidden\" name=\"expected\" value=\"{count}\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <button type=\"submit\" id=\"confirm\"{class}>{verb} {count} {noun}</button><a href=\"{back}\">Cancel</a></form></section>",
        if count == 1 { "es" } else { "" },
        action = escape(&format!("{base}/deliveries/{path}")),
        hidden = q.hidden_fields(),
        csrf = Esc(ctx.session.csrf.as_deref().unwrap_or_default()),
    );
    let status = conflict_or_ok(changed_from);
    render_status(ctx, status, title, "deliveries", &out)
}

/// 409 for a confirmation shown again because the count changed, else 200.
fn conflict_or_ok(changed_from: Option<u64>) -> StatusCode {
    if changed_from.is_some() {
        StatusCode::CONFLICT
    } else {
        StatusCode::OK
    }
}

/// `POST /deliveries/replay`.
pub(crate) async fn deliveries_replay_matching(State(app): State<App>, req: Request) -> Response {
    inbox_bulk(app, req, Bulk::Replay).await
}

/// `POST /deliveries/purge`.
pub(crate) async fn deliveries_purge_matching(State(app): State<App>, req: Request) -> Response {
    inbox_bulk(app, req, Bulk::Purge).await
}

/// Recounts, and acts only when the count is still the one the user confirmed.
async fn inbox_bulk(app: App, req: Request, action: Bulk) -> Response {
    let Posted { ctx, params } = match admin_only(req).await {
        Ok(posted) => posted,
        Err(response) => return response,
    };
    let q = InboxQuery::from_params(&params);
    let filter = match q.to_filter() {
        Ok(filter) => filter,
        Err(why) => return bad_request(&ctx, &why),
    };
    let Some(expected) = params.get("expected").and_then(|n| n.parse::<u64>().ok()) else {
        return bad_request(&ctx, "expected: the count you confirmed is missing");
    };
    let count = match dead_count(&app, filter.clone()).await {
        Ok(count) => count,
        Err(err) => return store_failed(&ctx, &err),
    };
    if count != expected {
        if ctx.session.via == Via::Bearer {
            return (
                StatusCode::CONFLICT,
                [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
                json!({ "ok": false, "error": "count_changed", "expected": expected, "count": count })
                    .to_string(),
            )
                .into_response();
        }
        return inbox_confirm_page(&ctx, action, &q, count, Some(expected));
    }
    let done = match action {
        Bulk::Replay => InboxAdmin::replay_matching(app.store(), filter).await,
        Bulk::Purge => InboxAdmin::purge_matching(app.store(), filter).await,
    };
    let done = match done {
        Ok(done) => done,
        Err(err) => return store_failed(&ctx, &err),
    };
    let (name, notice) = match action {
        Bulk::Replay => ("inbox.replay_matching", "replayed"),
        Bulk::Purge => ("inbox.purge_matching", "purged"),
    };
    audit(&ctx, name, &q.describe(), done);
    let mut pairs: Vec<(&str, &str)> = q.pairs().collect();
    let n = done.to_string();
    pairs.push(("notice", notice));
    pairs.push(("n", &n));
    acted(
        &ctx,
        json!({ "ok": true, notice: done }),
        format!("{}/deliveries?{}", ctx.base, query(pairs)),
    )
}

/// `GET /outbox`.
pub(crate) async fn outbox(State(app): State<App>, req: Request) -> Response {
    let ctx = match ctx_of(&req) {
        Ok(ctx) => ctx,
        Err(response) => return response,
    };
    let params = params_of(&req);
    let q = OutboxQuery::from_params(&params);
    let mut filter = match q.to_filter() {
        Ok(filter) => filter,
        Err(why) => return bad_request(&ctx, &why),
    };
    let before: Option<i64> = params.get("before").and_then(|b| b.parse().ok());
    filter.before_seq = before;
    let limit = page_size(&params);
    let mut rows = match OutboxAdmin::list(app.store(), filter, limit.saturating_add(1)).await {
        Ok(rows) => rows,
        Err(err) => return store_failed(&ctx, &err),
    };
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let base = &ctx.base;
    let mut out = String::from("<h1>Outbox</h1>");
    out.push_str(&notice(&params));
    let mut states = String::from("<option value=\"\">any</option>");
    for state in MessageState::ALL {
        let name = state.as_str();
        let selected = if q.state == name { " selected" } else { "" };
        let _ = write!(states, "<option value=\"{name}\"{selected}>{name}</option>");
    }
    let _ = write!(
        out,
        "<section class=\"panel\"><form class=\"filters\" method=\"get\" action=\"{action}\">\
         <label>State<select name=\"state\">{states}</select></label>\
         <label>Sink<input type=\"text\" name=\"sink\" value=\"{sink}\"></label>\
         <button type=\"submit\">Filter</button><a href=\"{action}\">Clear</a></form></section>",
        action = escape(&format!("{base}/outbox")),
        sink = Esc(&q.sink),
    );
    if ctx.session.role == Role::Admin {
        let _ = write!(
            out,
            "<div class=\"actions\"><a id=\"replay-messages\" href=\"{}\">Retry the dead messages matching this filter…</a></div>",
            escape(&format!("{base}/outbox/confirm?{}", q.to_query()))
        );
    }
    out.push_str("<section class=\"panel\">");
    if rows.is_empty() {
        out.push_str("<p class=\"muted\">No message matches.</p>");
    } else {
        out.push_str(&messages_table(base, &rows));
    }
    out.push_str("<div class=\"pager\">");
    if before.is_some() {
        let _ = write!(
            out,
            "<a href=\"{}\">« Newest</a>",
            escape(&format!("{base}/outbox?{}", q.to_query()))
        );
    }
    if more && let Some(last) = rows.last() {
        let last = last.seq.to_string();
        let mut pairs: Vec<(&str, &str)> = q.pairs().collect();
        pairs.push(("before", &last));
        let _ = write!(
            out,
            "<a href=\"{}\">Older »</a>",
            escape(&format!("{base}/outbox?{}", query(pairs)))
        );
    }
    out.push_str("</div></section>");
    render(&ctx, "Outbox", "outbox", &out)
}

/// `GET /outbox/{id}`.
pub(crate) async fn message(
    State(app): State<App>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let ctx = match ctx_of(&req) {
        Ok(ctx) => ctx,
        Err(response) => return response,
    };
    let params = params_of(&req);
    let id = MessageId::from_stored(id);
    let m = match OutboxAdmin::get(app.store(), &id).await {
        Ok(Some(m)) => m,
        Ok(None) => return not_found_page(&ctx, "No outbox message with that id."),
        Err(err) => return store_failed(&ctx, &err),
    };
    let base = &ctx.base;
    let page_url = format!("{base}/outbox/{}", path_segment(id.as_str()));
    let state = m.state();
    let mut out = format!("<h1>Outbox message <code>{}</code></h1>", Esc(id.as_str()));
    out.push_str(&notice(&params));
    out.push_str("<section class=\"panel\"><dl class=\"facts\">");
    let mut fact = |name: &str, value: String| {
        let _ = write!(out, "<dt>{name}</dt><dd>{value}</dd>");
    };
    fact("State", badge(state.as_str()));
    fact("Sink", format!("<code>{}</code>", Esc(&m.sink)));
    fact("Handler", format!("<code>{}</code>", Esc(&m.handler)));
    fact("Sequence", m.sequence.to_string());
    fact(
        "Delivery",
        format!("<code>{}</code>", Esc(&m.key.to_string())),
    );
    fact(
        "Ordering key",
        m.ordering_key
            .as_deref()
            .map_or_else(|| "–".to_string(), |k| format!("<code>{}</code>", Esc(k))),
    );
    fact("Staged", time(m.staged_at));
    fact("Attempts", m.attempts.to_string());
    fact(
        "Next attempt",
        maybe_time((state == MessageState::Pending).then_some(m.next_attempt_at)),
    );
    fact("Sent", maybe_time(m.sent_at));
    fact("Dead since", maybe_time(m.dead_at));
    out.push_str("</dl>");
    if ctx.session.role == Role::Admin {
        if state == MessageState::Pending {
            out.push_str("<p class=\"hint\">A pending message is sent by the relay; there is nothing to replay.</p>");
        } else {
            let _ = write!(
                out,
                "<form method=\"post\" action=\"{}\" class=\"actions\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
                 <button type=\"submit\" id=\"replay-message\">Send this message again</button></form>",
                escape(&format!("{page_url}/replay")),
                Esc(ctx.session.csrf.as_deref().unwrap_or_default())
            );
        }
    }
    out.push_str("</section>");
    if let Some(error) = &m.last_error {
        let _ = write!(
            out,
            "<section class=\"panel\"><h2>Last error</h2><pre class=\"wrap\">{}</pre></section>",
            Esc(error)
        );
    }
    out.push_str("<section class=\"panel\"><h2>Headers</h2>");
    out.push_str(&headers_table(&m.headers, app.masked()));
    out.push_str("</section>");
    out.push_str(&body_section(&params, &m.payload, &page_url).replacen(
        "<h2>Body",
        "<h2>Payload",
        1,
    ));
    render(&ctx, "Outbox message", "outbox", &out)
}

/// `GET /outbox/{id}/body` is not routed: a message's payload is the handler's
/// own output, shown on its page.
/// `POST /outbox/{id}/replay`.
pub(crate) async fn message_replay(
    State(app): State<App>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let Posted { ctx, .. } = match admin_only(req).await {
        Ok(posted) => posted,
        Err(response) => return response,
    };
    let id = MessageId::from_stored(id);
    let replayed = match OutboxAdmin::replay(app.store(), &id).await {
        Ok(replayed) => replayed,
        Err(err) => return store_failed(&ctx, &err),
    };
    audit(
        &ctx,
        "outbox.replay",
        &format!("message {id}"),
        u64::from(replayed),
    );
    let notice = if replayed {
        "message-replayed"
    } else {
        "message-not-replayed"
    };
    acted(
        &ctx,
        json!({ "ok": true, "replayed": u64::from(replayed) }),
        format!(
            "{}/outbox/{}?notice={notice}",
            ctx.base,
            path_segment(id.as_str())
        ),
    )
}

/// `GET /outbox/confirm?…filter`.
pub(crate) async fn outbox_confirm(State(app): State<App>, req: Request) -> Response {
    let ctx = match ctx_of(&req) {
        Ok(ctx) => ctx,
        Err(response) => return response,
    };
    if ctx.session.role != Role::Admin {
        return crate::router::forbidden("this action needs the admin role");
    }
    let q = OutboxQuery::from_params(&params_of(&req));
    let filter = match q.to_filter() {
        Ok(filter) => filter,
        Err(why) => return bad_request(&ctx, &why),
    };
    let count = match dead_message_count(&app, filter).await {
        Ok(count) => count,
        Err(err) => return store_failed(&ctx, &err),
    };
    outbox_confirm_page(&ctx, &q, count, None)
}

async fn dead_message_count(app: &App, filter: OutboxFilter) -> Result<u64, AnyStoreError> {
    match dead_messages_among(filter) {
        Some(dead) => OutboxAdmin::count(app.store(), dead).await,
        None => Ok(0),
    }
}

fn outbox_confirm_page(
    ctx: &Ctx,
    q: &OutboxQuery,
    count: u64,
    changed_from: Option<u64>,
) -> Response {
    let base = &ctx.base;
    let back = escape(&format!("{base}/outbox?{}", q.to_query()));
    let mut out = String::from("<h1>Retry dead messages</h1><section class=\"panel\">");
    if let Some(before) = changed_from {
        let _ = write!(
            out,
            "<p class=\"warning\" id=\"changed\">The set changed since you looked: {before} then, {count} now. Nothing was done; confirm again.</p>"
        );
    }
    let _ = write!(out, "<p>Filter: <code>{}</code></p>", Esc(&q.describe()));
    if count == 0 {
        let _ = write!(
            out,
            "<p id=\"confirm-count\" data-count=\"0\">No dead message matches this filter: nothing to do.</p><p><a href=\"{back}\">Back</a></p></section>"
        );
        return render_status(
            ctx,
            conflict_or_ok(changed_from),
            "Retry dead messages",
            "outbox",
            &out,
        );
    }
    let noun = format!("dead message{}", plural(count));
    let _ = write!(
        out,
        "<p id=\"confirm-count\" data-count=\"{count}\"><strong>{count} {noun}</strong> match{}. Each is made due now with its attempts reset; the relay sends it again with the same id.</p>\
         <form method=\"post\" action=\"{action}\" class=\"actions\">{hidden}\
         <input type=\"hidden\" name=\"expected\" value=\"{count}\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <button type=\"submit\" id=\"confirm\">Retry {count} {noun}</button><a href=\"{back}\">Cancel</a></form></section>",
        if count == 1 { "es" } else { "" },
        action = escape(&format!("{base}/outbox/replay")),
        hidden = q.hidden_fields(),
        csrf = Esc(ctx.session.csrf.as_deref().unwrap_or_default()),
    );
    let status = conflict_or_ok(changed_from);
    render_status(ctx, status, "Retry dead messages", "outbox", &out)
}

/// `POST /outbox/replay`.
pub(crate) async fn outbox_replay_matching(State(app): State<App>, req: Request) -> Response {
    let Posted { ctx, params } = match admin_only(req).await {
        Ok(posted) => posted,
        Err(response) => return response,
    };
    let q = OutboxQuery::from_params(&params);
    let filter = match q.to_filter() {
        Ok(filter) => filter,
        Err(why) => return bad_request(&ctx, &why),
    };
    let Some(expected) = params.get("expected").and_then(|n| n.parse::<u64>().ok()) else {
        return bad_request(&ctx, "expected: the count you confirmed is missing");
    };
    let count = match dead_message_count(&app, filter.clone()).await {
        Ok(count) => count,
        Err(err) => return store_failed(&ctx, &err),
    };
    if count != expected {
        if ctx.session.via == Via::Bearer {
            return (
                StatusCode::CONFLICT,
                [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
                json!({ "ok": false, "error": "count_changed", "expected": expected, "count": count })
                    .to_string(),
            )
                .into_response();
        }
        return outbox_confirm_page(&ctx, &q, count, Some(expected));
    }
    let done = match OutboxAdmin::replay_matching(app.store(), filter).await {
        Ok(done) => done,
        Err(err) => return store_failed(&ctx, &err),
    };
    audit(&ctx, "outbox.replay_matching", &q.describe(), done);
    let mut pairs: Vec<(&str, &str)> = q.pairs().collect();
    let n = done.to_string();
    pairs.push(("notice", "messages-replayed"));
    pairs.push(("n", &n));
    acted(
        &ctx,
        json!({ "ok": true, "replayed": done }),
        format!("{}/outbox?{}", ctx.base, query(pairs)),
    )
}

/// `GET /login`.
pub(crate) async fn login_form(State(app): State<App>, req: Request) -> Response {
    let base = app.base(req.extensions());
    if !app.auth().has_login() {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    }
    login_page(&base, StatusCode::OK, None)
}

fn login_page(base: &str, status: StatusCode, error: Option<&str>) -> Response {
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
        return crate::router::forbidden("cross-origin request refused");
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

fn cookie_path(base: &str) -> &str {
    if base.is_empty() { "/" } else { base }
}

/// Returns `true` when the browser reached the console over HTTPS (its `Origin`,
/// or a proxy's `X-Forwarded-Proto`): the cookie is then `Secure`.
fn is_https(headers: &HeaderMap) -> bool {
    let starts = |name: &str, prefix: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with(prefix))
    };
    starts("origin", "https://") || starts("x-forwarded-proto", "https")
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
