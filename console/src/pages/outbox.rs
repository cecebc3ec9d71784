//! The outbox: the filtered list, one message, its replay, and the replay of the
//! dead messages a filter selects after a confirmation.

use super::deliveries::{body_section, messages_table};
#[allow(clippy::wildcard_imports)]
use super::*;

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
        return crate::state::forbidden("this action needs the admin role");
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

pub(super) async fn dead_message_count(
    app: &App,
    filter: OutboxFilter,
) -> Result<u64, AnyStoreError> {
    match dead_messages_among(filter) {
        Some(dead) => OutboxAdmin::count(app.store(), dead).await,
        None => Ok(0),
    }
}

pub(super) fn outbox_confirm_page(
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
