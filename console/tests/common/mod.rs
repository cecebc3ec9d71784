//! What the console's tests share: a store filled with deliveries (hostile ones
//! among them), dead letters and outbox messages, on SQLite or PostgreSQL, and a
//! small client for the router.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use hookbox_core::bytes::Bytes;
use hookbox_core::http::{HeaderName, HeaderValue};
use hookbox_core::spi::Settlement;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{
    DedupeKey, Delivery, HandlerError, IdempotencyStore, Inbox, KeptHeaders, Message, OutboxStore,
    RetryPolicy, VerifiedDelivery, Worked,
};
use http_body_util::BodyExt as _;
use tower::ServiceExt as _;

pub(crate) const READ_ONLY: &str = "read-only-token-for-tests-0123";
pub(crate) const ADMIN: &str = "admin-token-for-tests-456789abc";

/// The retry policy of the fixture's stores: one failure makes a dead letter.
pub(crate) fn one_try() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 1,
        base: Duration::from_secs(3600),
        cap: Duration::from_secs(3600),
    }
}

/// What an injected script would do: set this flag.
pub(crate) const PWN: &str = "window.__pwned=1";

/// A delivery from `provider` with `id`, `event`, `body` and `headers`.
fn delivery(
    provider: &'static str,
    id: &str,
    event: &str,
    body: impl Into<Bytes>,
    headers: &[(&'static str, &[u8])],
) -> VerifiedDelivery {
    let headers: KeptHeaders = headers
        .iter()
        .map(|(n, v)| {
            (
                HeaderName::from_static(n),
                HeaderValue::from_bytes(v).unwrap(),
            )
        })
        .collect();
    VerifiedDelivery::new(
        DedupeKey::new("console-test", provider, id),
        body.into(),
        headers,
    )
    .with_event_type(Some(event.to_string()))
}

/// Fails on every body that contains `fail`.
async fn fail_some<C>(_conn: &mut C, delivery: &Delivery) -> Result<(), HandlerError> {
    if delivery.body().windows(4).any(|w| w == b"fail") {
        return Err(format!(
            "cannot apply {}: the handler failed\ncaused by: <script>{PWN}</script> upstream said no",
            delivery.delivery_id()
        )
        .into());
    }
    Ok(())
}

/// What [`fill`] stored.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Filled {
    /// Rows in the inbox.
    pub(crate) total: u64,
    /// Dead letters among them.
    pub(crate) dead: u64,
    /// Dead letters of `github`.
    pub(crate) github_dead: u64,
    /// Processed rows.
    pub(crate) processed: u64,
    /// Pending rows (received after the worker ran).
    pub(crate) pending: u64,
    /// Outbox messages, and the dead ones.
    pub(crate) messages: u64,
    pub(crate) dead_messages: u64,
}

/// The hostile deliveries' ids.
pub(crate) const HOSTILE_ID: &str = "\"><img src=x onerror=window.__pwned=1>";

/// Fills `store` (whose retry policy is [`one_try`]): processed, dead and pending
/// deliveries of three providers, hostile bodies and headers among the dead ones,
/// and outbox messages (one dead) staged under `stripe`'s `evt_ok`.
pub(crate) async fn fill<S>(store: &S) -> Filled
where
    S: Inbox + OutboxStore + IdempotencyStore,
    S::Conn: 'static,
{
    let json = br#"{"id":"evt_ok","type":"invoice.paid","data":{"object":{"id":"in_1","amount":123456789012345678901234567890}}}"#;
    let mut one_mib = vec![b'A'; 1024 * 1024];
    one_mib[..4].copy_from_slice(b"fail");
    one_mib[500..500 + PWN.len() + 17]
        .copy_from_slice(format!("<script>{PWN}</script>").as_bytes());
    let first = [
        delivery(
            "stripe",
            "evt_ok",
            "invoice.paid",
            Bytes::from_static(json),
            &[
                ("stripe-signature", b"t=1,v1=abc"),
                ("authorization", b"Bearer sk_live_supersecret"),
            ],
        ),
        delivery(
            "github",
            "gh-ok",
            "push",
            Bytes::from_static(b"{\"ok\":true}"),
            &[("x-github-event", b"push")],
        ),
        delivery(
            "github",
            "gh-dead-1",
            "push",
            Bytes::from_static(b"{\"fail\":1}"),
            &[("x-gitlab-token", b"glpat-supersecret")],
        ),
        delivery(
            "github",
            "gh-dead-2",
            "issues",
            Bytes::from_static(b"{\"fail\":2}"),
            &[],
        ),
        delivery(
            "standard",
            "hostile-script",
            &format!("<script>{PWN}</script>"),
            Bytes::from(format!(
                "fail <script>{PWN}</script><img src=x onerror=\"{PWN}\"><a href=\"javascript:{PWN}\">x</a>"
            )),
            &[
                ("webhook-id", b"<script>window.__pwned=1</script>"),
                ("x-link", b"javascript:window.__pwned=1"),
                ("x-img", b"<img src=x onerror=\"window.__pwned=1\">"),
            ],
        ),
        delivery(
            "standard",
            HOSTILE_ID,
            "contact.created",
            Bytes::from_static(b"fail \xff\xfe<script>\xc3\x28 broken utf-8"),
            &[("x-broken", b"caf\xe9 <b>")],
        ),
        delivery(
            "standard",
            "hostile-huge",
            "contact.created",
            Bytes::from(one_mib),
            &[],
        ),
    ];
    for d in &first {
        store.receive(d).await.unwrap();
    }
    let handler = fail_some::<S::Conn>;
    for _ in 0..100 {
        if store.work_one(&handler).await.unwrap() == Worked::Idle {
            break;
        }
    }
    // arrives after the worker ran: pending
    store
        .receive(&delivery(
            "github",
            "gh-pending",
            "push",
            Bytes::from_static(b"{}"),
            &[],
        ))
        .await
        .unwrap();

    // three messages staged under stripe's evt_ok; one dies, one is sent
    let key = DedupeKey::new("console-test", "stripe", "evt_ok");
    store
        .process_once(&key, async |conn| {
            let mut outbox = store.outbox(&key, "notify");
            outbox
                .stage(
                    conn,
                    Message::new("email", format!("<script>{PWN}</script> receipt")),
                )
                .await?;
            outbox
                .stage(
                    conn,
                    Message::new("ledger-http", "{\"amount\":1}").with_header(
                        HeaderName::from_static("authorization"),
                        HeaderValue::from_static("Bearer ledger-secret"),
                    ),
                )
                .await?;
            outbox.stage(conn, Message::new("email", "second")).await?;
            Ok(())
        })
        .await
        .unwrap();
    let now = OffsetDateTime::now_utc();
    let leased = store.lease(10, Duration::from_secs(60), now).await.unwrap();
    assert_eq!(leased.len(), 3);
    for leased in &leased {
        // the ledger's message dies, the first email is sent, the second waits
        let settlement = match (leased.message.sink.as_str(), leased.message.sequence) {
            ("ledger-http", _) => Settlement::Dead {
                error: "ledger said 422 <img src=x onerror=window.__pwned=1>",
            },
            (_, 0) => Settlement::Sent,
            _ => Settlement::Retry {
                error: "timeout",
                at: now + Duration::from_secs(3600),
            },
        };
        assert!(store.settle(leased.lease, settlement, now).await.unwrap());
    }
    Filled {
        total: 8,
        dead: 5,
        github_dead: 2,
        processed: 2,
        pending: 1,
        messages: 3,
        dead_messages: 1,
    }
}

/// An answer read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

impl Answer {
    pub(crate) fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The value of the first `name="…" value="…"` hidden field.
    pub(crate) fn field(&self, name: &str) -> String {
        let marker = format!("name=\"{name}\" value=\"");
        let start = self
            .body
            .find(&marker)
            .unwrap_or_else(|| panic!("no {name} field in {}", self.body))
            + marker.len();
        let end = self.body[start..].find('"').unwrap() + start;
        self.body[start..end].to_string()
    }
}

/// How a test request authenticates.
#[derive(Debug, Clone)]
pub(crate) enum Auth {
    None,
    Bearer(&'static str),
    Cookie(String),
}

pub(crate) async fn send(app: &Router, req: Request<Body>) -> Answer {
    let response = app.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

fn with_auth(builder: axum::http::request::Builder, auth: &Auth) -> axum::http::request::Builder {
    let builder = builder.header("host", "console.test");
    match auth {
        Auth::None => builder,
        Auth::Bearer(token) => builder.header("authorization", format!("Bearer {token}")),
        Auth::Cookie(cookie) => builder.header("cookie", cookie.clone()),
    }
}

pub(crate) async fn get(app: &Router, path: &str, auth: &Auth) -> Answer {
    let req = with_auth(Request::get(path), auth)
        .body(Body::empty())
        .unwrap();
    send(app, req).await
}

pub(crate) async fn post(app: &Router, path: &str, auth: &Auth, form: &[(&str, &str)]) -> Answer {
    post_from(app, path, auth, form, Some("http://console.test")).await
}

pub(crate) async fn post_from(
    app: &Router,
    path: &str,
    auth: &Auth,
    form: &[(&str, &str)],
    origin: Option<&str>,
) -> Answer {
    let mut body = form_urlencoded::Serializer::new(String::new());
    for (n, v) in form {
        body.append_pair(n, v);
    }
    let mut builder = with_auth(Request::post(path), auth)
        .header("content-type", "application/x-www-form-urlencoded");
    if let Some(origin) = origin {
        builder = builder.header("origin", origin);
    }
    send(app, builder.body(Body::from(body.finish())).unwrap()).await
}
