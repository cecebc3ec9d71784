//! The actions on deliveries: replay one, and replay or purge the dead letters a
//! filter selects after a confirmation that names their count.

#[allow(clippy::wildcard_imports)]
use super::*;

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

/// `GET /deliveries/confirm?action=replay|purge&…filter`: the count, and the form
/// that names it.
pub(crate) async fn deliveries_confirm(State(app): State<App>, req: Request) -> Response {
    let ctx = match ctx_of(&req) {
        Ok(ctx) => ctx,
        Err(response) => return response,
    };
    if ctx.session.role != Role::Admin {
        return crate::state::forbidden("this action needs the admin role");
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

pub(super) async fn dead_count(app: &App, filter: InboxFilter) -> Result<u64, AnyStoreError> {
    match dead_among(filter) {
        Some(dead) => InboxAdmin::count(app.store(), dead).await,
        None => Ok(0),
    }
}

pub(super) fn inbox_confirm_page(
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

/// `POST /deliveries/replay`.
pub(crate) async fn deliveries_replay_matching(State(app): State<App>, req: Request) -> Response {
    inbox_bulk(app, req, Bulk::Replay).await
}

/// `POST /deliveries/purge`.
pub(crate) async fn deliveries_purge_matching(State(app): State<App>, req: Request) -> Response {
    inbox_bulk(app, req, Bulk::Purge).await
}

/// Recounts, and acts only when the count is still the one the user confirmed.
pub(super) async fn inbox_bulk(app: App, req: Request, action: Bulk) -> Response {
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
