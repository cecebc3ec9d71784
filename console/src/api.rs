//! The JSON views for scripts (`/api/…`): the same reads as the pages, under the
//! same authentication; the actions answer JSON already when called with a bearer
//! token.

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderValue};
use axum::response::{IntoResponse as _, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hookbox_core::time::format_description::well_known::Rfc3339;
use hookbox_core::time::{Duration, OffsetDateTime};
use hookbox_core::{
    AnyStoreError, InboxAdmin, KeptHeaders, OutboxAdmin, OutboxFilter, StoredDelivery, error_chain,
};
use serde_json::{Value, json};

use crate::query::{InboxQuery, Params, page_size};
use crate::show::is_masked;
use crate::state::{App, Ctx};

fn json_response(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        value.to_string(),
    )
        .into_response()
}

fn failed(err: &AnyStoreError) -> Response {
    let chain = error_chain(err);
    tracing::error!(target: "hookbox_console", error = %chain, "console: the store failed");
    json_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        &json!({ "ok": false, "error": "store_failed", "message": chain }),
    )
}

fn bad(why: &str) -> Response {
    json_response(
        StatusCode::BAD_REQUEST,
        &json!({ "ok": false, "error": "bad_request", "message": why }),
    )
}

fn time(at: Option<OffsetDateTime>) -> Value {
    at.and_then(|at| at.format(&Rfc3339).ok())
        .map_or(Value::Null, Value::String)
}

/// Headers as `[name, value]` pairs, masked values as `null`.
fn headers(headers: &KeptHeaders, masked: &[String]) -> Value {
    headers
        .iter()
        .map(|(name, value)| {
            let shown = if is_masked(name.as_str(), masked) {
                Value::Null
            } else {
                Value::String(String::from_utf8_lossy(value.as_bytes()).into_owned())
            };
            json!([name.as_str(), shown])
        })
        .collect()
}

fn summary(row: &StoredDelivery) -> Value {
    json!({
        "id": row.id,
        "key": row.key.to_string(),
        "provider": row.key.provider(),
        "delivery_id": row.key.delivery_id(),
        "event_type": row.event_type,
        "state": row.state().as_str(),
        "attempts": row.attempts,
        "last_error": row.last_error,
        "received_at": time(Some(row.received_at)),
        "processed_at": time(row.processed_at),
        "dead_at": time(row.dead_at),
    })
}

/// `GET /api/overview`: the overview's counts.
pub(crate) async fn overview(State(app): State<App>, req: Request) -> Response {
    let now = req
        .extensions()
        .get::<Ctx>()
        .map_or_else(OffsetDateTime::now_utc, |ctx| ctx.now);
    let inbox = match InboxAdmin::overview(app.store(), now - Duration::hours(1)).await {
        Ok(inbox) => inbox,
        Err(err) => return failed(&err),
    };
    let sinks = match OutboxAdmin::sinks(app.store()).await {
        Ok(sinks) => sinks,
        Err(err) => return failed(&err),
    };
    let providers: Vec<Value> = inbox
        .providers
        .iter()
        .map(|p| {
            json!({
                "provider": p.provider, "received": p.received(), "processed": p.processed,
                "pending": p.pending, "failed": p.failed, "dead": p.dead,
                "oldest_pending": time(p.oldest_pending),
            })
        })
        .collect();
    let minutes: Vec<Value> = inbox
        .minutes
        .iter()
        .map(|m| json!({ "minute": time(Some(m.minute)), "received": m.received, "processed": m.processed }))
        .collect();
    let sinks: Vec<Value> = sinks
        .iter()
        .map(|s| {
            json!({
                "sink": s.sink, "pending": s.pending, "sent": s.sent, "dead": s.dead,
                "oldest_pending": time(s.oldest_pending),
            })
        })
        .collect();
    json_response(
        StatusCode::OK,
        &json!({ "providers": providers, "minutes": minutes, "sinks": sinks }),
    )
}

/// `GET /api/deliveries?…filter&before=&limit=`: one page of summaries and the
/// cursor of the next (`next_before`, `null` on the last page).
pub(crate) async fn deliveries(State(app): State<App>, req: Request) -> Response {
    let params = Params::parse(req.uri().query().unwrap_or_default().as_bytes());
    let mut filter = match InboxQuery::from_params(&params).to_filter() {
        Ok(filter) => filter,
        Err(why) => return bad(&why),
    };
    filter.before_id = params.get("before").and_then(|b| b.parse().ok());
    let limit = page_size(&params);
    let mut rows = match InboxAdmin::list(app.store(), filter, limit.saturating_add(1)).await {
        Ok(rows) => rows,
        Err(err) => return failed(&err),
    };
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next = if more {
        rows.last().map_or(Value::Null, |r| json!(r.id))
    } else {
        Value::Null
    };
    let list: Vec<Value> = rows.iter().map(summary).collect();
    json_response(
        StatusCode::OK,
        &json!({ "deliveries": list, "next_before": next }),
    )
}

/// `GET /api/deliveries/{id}`: one delivery with its masked headers, its body
/// (text when it is UTF-8, else base64) and the outbox messages it staged.
pub(crate) async fn delivery(
    State(app): State<App>,
    Path(id): Path<String>,
    _req: Request,
) -> Response {
    let not_found = || {
        json_response(
            StatusCode::NOT_FOUND,
            &json!({ "ok": false, "error": "not_found" }),
        )
    };
    let Ok(id) = id.parse::<i64>() else {
        return not_found();
    };
    let row = match InboxAdmin::get(app.store(), id).await {
        Ok(Some(row)) => row,
        Ok(None) => return not_found(),
        Err(err) => return failed(&err),
    };
    let staged = OutboxFilter::all().with_key(row.key.clone());
    let messages = match OutboxAdmin::list(app.store(), staged, 100).await {
        Ok(messages) => messages,
        Err(err) => return failed(&err),
    };
    let mut value = summary(&row);
    let (body, encoding) = match std::str::from_utf8(&row.body) {
        Ok(text) => (text.to_string(), "utf-8"),
        Err(_) => (STANDARD.encode(&row.body), "base64"),
    };
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| {
            json!({
                "id": m.id.as_str(), "seq": m.seq, "sink": m.sink, "handler": m.handler,
                "state": m.state().as_str(), "attempts": m.attempts, "last_error": m.last_error,
            })
        })
        .collect();
    if let Value::Object(map) = &mut value {
        map.insert("source".into(), json!(row.key.source()));
        map.insert("tenant".into(), json!(row.key.tenant()));
        map.insert("correlation_id".into(), json!(row.correlation_id));
        map.insert("signed_at".into(), time(row.signed_at));
        map.insert("next_attempt_at".into(), time(Some(row.next_attempt_at)));
        map.insert("headers".into(), headers(&row.headers, app.masked()));
        map.insert("body".into(), Value::String(body));
        map.insert("body_encoding".into(), json!(encoding));
        map.insert("outbox".into(), Value::Array(messages));
    }
    json_response(StatusCode::OK, &value)
}
