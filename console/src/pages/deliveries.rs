//! The deliveries: the filtered list, the dedupe-key lookup, one delivery with its
//! body, headers, error and staged messages, and the raw body's download.

#[allow(clippy::wildcard_imports)]
use super::*;

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

pub(super) fn inbox_filter_form(base: &str, q: &InboxQuery) -> String {
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
pub(super) fn body_section(params: &Params, body: &[u8], page_url: &str) -> String {
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

pub(super) fn messages_table(base: &str, messages: &[hookbox_core::OutboxMessage]) -> String {
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
