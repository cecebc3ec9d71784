//! Every route, role and action of the console over HTTP (the router called as a
//! tower service), on SQLite and, when `HOOKBOX_PG_URL` is set, on PostgreSQL.

#![allow(clippy::unwrap_used)]

mod common;

use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use common::{
    ADMIN, Answer, Auth, Filled, HOSTILE_ID, PWN, READ_ONLY, fill, get, one_try, post, post_from,
};
use hookbox_console::{
    CONTENT_SECURITY_POLICY, Console, ConsoleAuth, ConsoleStore, ConsoleUser, Role,
};
use hookbox_diesel_pg::{PgOptions, PgStore};
use hookbox_sqlite::testing::TempDir;
use hookbox_sqlite::{SqliteOptions, SqliteStore};
use hookbox_testkit::PgSchema;

fn auth() -> ConsoleAuth {
    ConsoleAuth::tokens(Some(READ_ONLY.into()), Some(ADMIN.into())).unwrap()
}

/// The console nested under `/console`, as an application mounts it.
fn app(store: impl ConsoleStore + 'static) -> Router {
    Router::new().nest(
        "/console",
        Console::new(store, auth()).mask_header("X-Link").router(),
    )
}

async fn sqlite() -> (TempDir, SqliteStore) {
    let dir = TempDir::new();
    let store = SqliteStore::open(dir.db(), SqliteOptions::default().with_retry(one_try()))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    (dir, store)
}

async fn postgres() -> Option<(PgSchema, PgStore)> {
    let schema = PgSchema::create().await?;
    let options = PgOptions::new()
        .with_retry(one_try())
        .with_max_connections(4);
    let store = PgStore::connect(&schema.url(), options).await.unwrap();
    store.migrate().await.unwrap();
    Some((schema, store))
}

/// The routes a request without credentials must get 401 on.
const GETS: &[&str] = &[
    "/console",
    "/console/overview",
    "/console/deliveries",
    "/console/deliveries?state=dead",
    "/console/deliveries/1",
    "/console/deliveries/1/body",
    "/console/deliveries/confirm?action=replay",
    "/console/deliveries/lookup?key=a/b/c",
    "/console/outbox",
    "/console/outbox/abc",
    "/console/outbox/confirm",
    "/console/api/overview",
    "/console/api/deliveries",
    "/console/api/deliveries/1",
    "/console/no-such-page",
];
const POSTS: &[&str] = &[
    "/console/deliveries/1/replay",
    "/console/deliveries/replay",
    "/console/deliveries/purge",
    "/console/outbox/replay",
    "/console/outbox/abc/replay",
    "/console/logout",
];

/// Asserts an HTML page carries the CSP and no script but the console's own.
fn assert_safe_page(answer: &Answer) {
    assert_eq!(
        answer.header("content-security-policy"),
        CONTENT_SECURITY_POLICY
    );
    assert_eq!(answer.header("x-content-type-options"), "nosniff");
    assert_eq!(answer.header("x-frame-options"), "DENY");
    for (at, _) in answer.body.match_indices("<script") {
        let tag = &answer.body[at..answer.body[at..].find('>').unwrap() + at];
        assert!(
            tag.starts_with("<script src=\"/console/assets/console."),
            "a script that is not the console's: {tag}"
        );
    }
    for hostile in [
        "<img",
        "onerror=\"",
        "href=\"javascript:",
        "<a href=\"javascript",
    ] {
        assert!(
            !answer.body.contains(hostile),
            "{hostile} in {}",
            answer.body
        );
    }
    assert!(!answer.body.contains(&format!("<script>{PWN}")));
}

/// The suite every store runs.
async fn suite(store: impl ConsoleStore + 'static, filled: Filled) {
    let app = app(store);
    let none = Auth::None;
    let ro = Auth::Bearer(READ_ONLY);
    let admin = Auth::Bearer(ADMIN);

    // without credentials: 401 everywhere but the login page and the assets
    for path in GETS {
        let answer = get(&app, path, &none).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "GET {path}");
        assert!(answer.header("www-authenticate").starts_with("Bearer"));
        assert!(
            answer.body.contains("/console/login"),
            "{path}: {}",
            answer.body
        );
        let wrong = get(&app, path, &Auth::Bearer("not-a-token-at-all-000000")).await;
        assert_eq!(
            wrong.status,
            StatusCode::UNAUTHORIZED,
            "GET {path} with a wrong token"
        );
    }
    for path in POSTS {
        let answer = post(&app, path, &none, &[]).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "POST {path}");
    }
    let login = get(&app, "/console/login", &none).await;
    assert_eq!(login.status, StatusCode::OK);
    assert_safe_page(&login);
    let css = login
        .body
        .split("href=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    let asset = get(&app, &css, &none).await;
    assert_eq!(asset.status, StatusCode::OK);
    assert!(asset.header("content-type").starts_with("text/css"));
    assert!(asset.header("cache-control").contains("immutable"));
    assert_eq!(
        get(&app, "/console/assets/evil.js", &none).await.status,
        StatusCode::NOT_FOUND
    );

    // the overview: counts per provider, the chart, the sinks
    let overview = get(&app, "/console/overview", &ro).await;
    assert_eq!(overview.status, StatusCode::OK, "{}", overview.body);
    assert_safe_page(&overview);
    assert!(
        overview
            .body
            .contains(&format!("id=\"total-dead\">{}<", filled.dead)),
        "{}",
        overview.body
    );
    assert!(overview.body.contains("<svg class=\"chart\""));
    assert!(overview.body.contains(">ledger-http<"));
    assert!(
        overview
            .body
            .contains("href=\"/console/deliveries?state=dead&amp;provider=github\"")
    );
    assert_eq!(get(&app, "/console", &ro).await.status, StatusCode::OK);

    // deliveries: filters, escaping, pages
    let all = get(&app, "/console/deliveries", &ro).await;
    assert_eq!(all.status, StatusCode::OK);
    assert_safe_page(&all);
    assert_eq!(
        all.body.matches("class=\"row-link\"").count() as u64,
        filled.total
    );
    assert!(
        !all.body.contains("id=\"replay-matching\""),
        "a read-only user sees no action"
    );
    let dead = get(&app, "/console/deliveries?state=dead", &ro).await;
    assert_eq!(
        dead.body.matches("class=\"row-link\"").count() as u64,
        filled.dead
    );
    assert_eq!(
        dead.body.matches("data-state=\"dead\"").count() as u64,
        filled.dead
    );
    let github_dead = get(&app, "/console/deliveries?state=dead&provider=github", &ro).await;
    assert_eq!(
        github_dead.body.matches("class=\"row-link\"").count() as u64,
        filled.github_dead
    );
    let by_event = get(&app, "/console/deliveries?event_type=issues", &ro).await;
    assert_eq!(by_event.body.matches("class=\"row-link\"").count(), 1);
    let by_id = get(&app, "/console/deliveries?delivery_id=gh-ok", &ro).await;
    assert_eq!(by_id.body.matches("class=\"row-link\"").count(), 1);
    let by_body = get(&app, "/console/deliveries?body=onerror", &ro).await;
    assert_eq!(by_body.body.matches("class=\"row-link\"").count(), 1);
    assert_safe_page(&by_body);
    assert!(by_body.body.contains("newest 10,000 deliveries"));
    let future = get(&app, "/console/deliveries?since=2999-01-01T00%3A00", &ro).await;
    assert!(future.body.contains("id=\"no-rows\""));
    let past = get(&app, "/console/deliveries?until=2000-01-01T00%3A00", &ro).await;
    assert!(past.body.contains("id=\"no-rows\""));
    let bad = get(&app, "/console/deliveries?state=zombie", &ro).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_safe_page(&bad);
    let bad_time = get(&app, "/console/deliveries?since=%3Cscript%3E", &ro).await;
    assert_eq!(bad_time.status, StatusCode::BAD_REQUEST);

    // keyset pages of 3: every row once, newest first
    let mut seen = Vec::new();
    let mut path = "/console/deliveries?limit=3".to_string();
    loop {
        let page = get(&app, &path, &ro).await;
        let ids: Vec<i64> = page
            .body
            .split("class=\"row-link\" href=\"/console/deliveries/")
            .skip(1)
            .map(|s| s.split('"').next().unwrap().parse().unwrap())
            .collect();
        assert!(ids.len() <= 3);
        seen.extend(ids);
        let Some(older) = page.body.split("id=\"older\" href=\"").nth(1) else {
            break;
        };
        path = older.split('"').next().unwrap().replace("&amp;", "&");
        assert!(path.contains("limit=3"), "{path}");
    }
    assert_eq!(seen.len() as u64, filled.total);
    assert!(seen.windows(2).all(|w| w[0] > w[1]), "{seen:?}");

    // a delivery: masked headers, escaped hostile content, the staged messages
    let row_link = |body: &str, text: &str| -> String {
        // the id of the row whose delivery id cell holds `text`
        let at = body
            .find(text)
            .unwrap_or_else(|| panic!("{text} not in page"));
        let before = &body[..at];
        let start = before.rfind("href=\"/console/deliveries/").unwrap() + "href=\"".len();
        before[start..].split('"').next().unwrap().to_string()
    };
    let stripe_path = row_link(&all.body, ">evt_ok<");
    let stripe = get(&app, &stripe_path, &ro).await;
    assert_eq!(stripe.status, StatusCode::OK);
    assert_safe_page(&stripe);
    assert!(!stripe.body.contains("sk_live_supersecret"));
    assert!(stripe.body.contains("masked (26 bytes)"));
    assert!(
        stripe.body.contains("123456789012345678901234567890"),
        "JSON numbers are shown as sent"
    );
    assert!(
        stripe
            .body
            .contains("\n  &quot;type&quot;: &quot;invoice.paid&quot;"),
        "JSON is indented"
    );
    assert_eq!(
        stripe.body.matches("<tr data-state=").count() as u64,
        filled.messages
    );
    assert!(stripe.body.contains(">ledger-http<"));
    assert!(!stripe.body.contains("id=\"replay-one\""));

    let hostile_path = row_link(&all.body, "hostile-script");
    let hostile = get(&app, &hostile_path, &admin).await;
    assert_safe_page(&hostile);
    assert!(
        hostile
            .body
            .contains("&lt;script&gt;window.__pwned=1&lt;/script&gt;")
    );
    assert!(
        hostile.body.contains("masked (27 bytes)"),
        "x-link is masked as configured"
    );
    assert!(hostile.body.contains("id=\"last-error\""));
    assert!(hostile.body.contains("caused by: &lt;script&gt;"));
    assert!(hostile.body.contains("id=\"replay-one\""));
    let hex = get(&app, &format!("{hostile_path}?view=hex"), &ro).await;
    assert!(hex.body.contains("00000000  66 61 69 6c"), "{}", hex.body);
    let raw = get(&app, &format!("{hostile_path}/body"), &ro).await;
    assert_eq!(raw.header("content-type"), "application/octet-stream");
    assert!(raw.header("content-disposition").starts_with("attachment"));
    assert!(raw.body.starts_with("fail <script>"));

    let gitlab = get(&app, &row_link(&all.body, "gh-dead-1"), &ro).await;
    assert!(!gitlab.body.contains("glpat-supersecret"));

    let broken_path = row_link(
        &all.body,
        &HOSTILE_ID
            .replace('"', "&quot;")
            .replace('<', "&lt;")
            .replace('>', "&gt;"),
    );
    let broken = get(&app, &broken_path, &ro).await;
    assert_safe_page(&broken);
    assert!(
        broken.body.contains("66 61 69 6c 20 ff fe 3c"),
        "broken UTF-8 is shown in hex"
    );
    assert!(broken.body.contains("caf\u{fffd} &lt;b&gt;"));

    let huge = get(&app, &row_link(&all.body, "hostile-huge"), &ro).await;
    assert_safe_page(&huge);
    assert!(huge.body.contains("1048576 bytes"));
    assert!(huge.body.contains("Only the beginning is shown"));
    assert!(huge.body.len() < 400 * 1024, "{} bytes", huge.body.len());

    // a dedupe key, pasted from a page, opens its delivery
    let lookup = get(
        &app,
        "/console/deliveries/lookup?key=console-test%2Fstripe%2Fevt_ok",
        &ro,
    )
    .await;
    assert_eq!(lookup.status, StatusCode::SEE_OTHER);
    assert_eq!(lookup.header("location"), stripe_path);
    let by_id = get(&app, "/console/deliveries/lookup?key=gh-ok", &ro).await;
    assert_eq!(
        by_id.header("location"),
        "/console/deliveries?delivery_id=gh-ok"
    );
    let unknown = get(
        &app,
        "/console/deliveries/lookup?key=console-test%2Fstripe%2Fevt_nope",
        &ro,
    )
    .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let wrong_scope = get(
        &app,
        "/console/deliveries/lookup?key=other%2Fstripe%2Fevt_ok",
        &ro,
    )
    .await;
    assert_eq!(wrong_scope.status, StatusCode::NOT_FOUND);

    let missing = get(&app, "/console/deliveries/999999", &ro).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let not_a_number = get(&app, "/console/deliveries/%3Cscript%3E", &ro).await;
    assert_eq!(not_a_number.status, StatusCode::NOT_FOUND);
    assert_safe_page(&not_a_number);

    // the outbox: list, filter, a message with its header masked
    let outbox = get(&app, "/console/outbox", &ro).await;
    assert_eq!(outbox.status, StatusCode::OK);
    assert_safe_page(&outbox);
    assert_eq!(
        outbox.body.matches("<tr data-state=").count() as u64,
        filled.messages
    );
    let dead_messages = get(&app, "/console/outbox?state=dead", &ro).await;
    assert_eq!(
        dead_messages
            .body
            .matches("<tr data-state=\"dead\"")
            .count() as u64,
        filled.dead_messages
    );
    let email = get(&app, "/console/outbox?sink=email", &ro).await;
    assert_eq!(email.body.matches("<tr data-state=").count(), 2);
    let message_path = outbox
        .body
        .split("href=\"/console/outbox/")
        .nth(1)
        .map(|s| format!("/console/outbox/{}", s.split('"').next().unwrap()))
        .unwrap();
    let message = get(&app, &message_path, &ro).await;
    assert_eq!(message.status, StatusCode::OK, "{message_path}");
    assert_safe_page(&message);
    assert!(!message.body.contains("ledger-secret"));
    assert_eq!(
        get(&app, "/console/outbox/nope", &ro).await.status,
        StatusCode::NOT_FOUND
    );

    // the JSON views for scripts
    let api = get(&app, "/console/api/overview", &ro).await;
    assert_eq!(api.header("content-type"), "application/json");
    let api: serde_json::Value = serde_json::from_str(&api.body).unwrap();
    let dead: u64 = api["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["dead"].as_u64().unwrap())
        .sum();
    assert_eq!(dead, filled.dead);
    assert_eq!(api["sinks"].as_array().unwrap().len(), 2);
    let page: serde_json::Value = serde_json::from_str(
        &get(&app, "/console/api/deliveries?state=dead&limit=2", &ro)
            .await
            .body,
    )
    .unwrap();
    assert_eq!(page["deliveries"].as_array().unwrap().len(), 2);
    let next = page["next_before"].as_i64().unwrap();
    let rest: serde_json::Value = serde_json::from_str(
        &get(
            &app,
            &format!("/console/api/deliveries?state=dead&before={next}&limit=10"),
            &ro,
        )
        .await
        .body,
    )
    .unwrap();
    assert_eq!(
        rest["deliveries"].as_array().unwrap().len() as u64,
        filled.dead - 2
    );
    assert!(rest["next_before"].is_null());
    let api_path = stripe_path.replace("/console/deliveries/", "/console/api/deliveries/");
    let one: serde_json::Value =
        serde_json::from_str(&get(&app, &api_path, &ro).await.body).unwrap();
    assert_eq!(one["delivery_id"], "evt_ok");
    assert_eq!(one["body_encoding"], "utf-8");
    assert_eq!(
        one["headers"][1],
        serde_json::json!(["authorization", null])
    );
    assert_eq!(
        one["outbox"].as_array().unwrap().len() as u64,
        filled.messages
    );
    let broken_api = broken_path.replace("/console/deliveries/", "/console/api/deliveries/");
    let broken_one: serde_json::Value =
        serde_json::from_str(&get(&app, &broken_api, &ro).await.body).unwrap();
    assert_eq!(broken_one["body_encoding"], "base64");
    assert_eq!(
        get(&app, "/console/api/deliveries/999999", &ro)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get(&app, "/console/api/deliveries?state=zombie", &ro)
            .await
            .status,
        StatusCode::BAD_REQUEST
    );

    // a read-only token can do nothing
    assert_eq!(
        get(&app, "/console/deliveries/confirm?action=replay", &ro)
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        get(&app, "/console/outbox/confirm", &ro).await.status,
        StatusCode::FORBIDDEN
    );
    for path in POSTS.iter().filter(|p| !p.ends_with("logout")) {
        let answer = post(&app, path, &ro, &[("expected", "1")]).await;
        assert_eq!(
            answer.status,
            StatusCode::FORBIDDEN,
            "POST {path} read-only"
        );
    }

    // replay one dead letter
    let one = post(&app, &format!("{hostile_path}/replay"), &admin, &[]).await;
    assert_eq!(one.status, StatusCode::OK, "{}", one.body);
    assert_eq!(one.body, r#"{"ok":true,"replayed":1}"#);
    let again = post(&app, &format!("{hostile_path}/replay"), &admin, &[]).await;
    assert_eq!(
        again.body, r#"{"ok":true,"replayed":0}"#,
        "a pending row is not replayed"
    );
    let dead_left = filled.dead - 1;

    // replay what a filter selects: count first, then the confirmation names it
    let confirm = get(
        &app,
        "/console/deliveries/confirm?action=replay&provider=github",
        &admin,
    )
    .await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert_safe_page(&confirm);
    assert!(
        confirm
            .body
            .contains(&format!("data-count=\"{}\"", filled.github_dead))
    );
    assert!(
        confirm
            .body
            .contains(&format!("Replay {} dead letters", filled.github_dead))
    );
    assert_eq!(confirm.field("provider"), "github");
    let stale = post(
        &app,
        "/console/deliveries/replay",
        &admin,
        &[("provider", "github"), ("expected", "7")],
    )
    .await;
    assert_eq!(stale.status, StatusCode::CONFLICT);
    assert!(stale.body.contains("\"count\":2"), "{}", stale.body);
    let missing_count = post(
        &app,
        "/console/deliveries/replay",
        &admin,
        &[("provider", "github")],
    )
    .await;
    assert_eq!(missing_count.status, StatusCode::BAD_REQUEST);
    let replayed = post(
        &app,
        "/console/deliveries/replay",
        &admin,
        &[
            ("provider", "github"),
            ("expected", &filled.github_dead.to_string()),
        ],
    )
    .await;
    assert_eq!(replayed.status, StatusCode::OK, "{}", replayed.body);
    assert_eq!(
        replayed.body,
        format!("{{\"ok\":true,\"replayed\":{}}}", filled.github_dead)
    );
    let dead_left = dead_left - filled.github_dead;
    let overview = get(&app, "/console/overview", &ro).await;
    assert!(
        overview
            .body
            .contains(&format!("id=\"total-dead\">{dead_left}<")),
        "{}",
        overview.body
    );
    let nothing = get(
        &app,
        "/console/deliveries/confirm?action=replay&state=processed",
        &admin,
    )
    .await;
    assert!(nothing.body.contains("data-count=\"0\""));

    // delete the rest of the dead letters
    let purge = get(
        &app,
        "/console/deliveries/confirm?action=purge&state=dead",
        &admin,
    )
    .await;
    assert!(
        purge
            .body
            .contains(&format!("Delete {dead_left} dead letters"))
    );
    let purged = post(
        &app,
        "/console/deliveries/purge",
        &admin,
        &[("state", "dead"), ("expected", &dead_left.to_string())],
    )
    .await;
    assert_eq!(
        purged.body,
        format!("{{\"ok\":true,\"purged\":{dead_left}}}")
    );
    let after = get(&app, "/console/deliveries", &ro).await;
    assert_eq!(
        after.body.matches("class=\"row-link\"").count() as u64,
        filled.total - dead_left
    );
    assert_eq!(
        get(&app, "/console/deliveries/bogus/replay", &ro)
            .await
            .status,
        StatusCode::METHOD_NOT_ALLOWED
    );

    // retry dead outbox messages
    let confirm = get(&app, "/console/outbox/confirm?sink=ledger-http", &admin).await;
    assert!(
        confirm.body.contains("Retry 1 dead message"),
        "{}",
        confirm.body
    );
    let retried = post(
        &app,
        "/console/outbox/replay",
        &admin,
        &[("sink", "ledger-http"), ("expected", "1")],
    )
    .await;
    assert_eq!(retried.body, r#"{"ok":true,"replayed":1}"#);
    let one_message = post(&app, &format!("{message_path}/replay"), &admin, &[]).await;
    assert_eq!(one_message.status, StatusCode::OK);
    assert!(one_message.body.starts_with("{\"ok\":true"));

    // a browser: sign in, act with the session's CSRF token, sign out
    let wrong = post(
        &app,
        "/console/login",
        &none,
        &[("token", "wrong-token-0000000000")],
    )
    .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.body.contains("id=\"login-error\""));
    let cross = post_from(
        &app,
        "/console/login",
        &none,
        &[("token", ADMIN)],
        Some("http://evil.test"),
    )
    .await;
    assert_eq!(cross.status, StatusCode::FORBIDDEN);
    let signed_in = post(
        &app,
        "/console/login",
        &none,
        &[("token", ADMIN), ("name", "<b>alice</b>")],
    )
    .await;
    assert_eq!(signed_in.status, StatusCode::SEE_OTHER);
    assert_eq!(signed_in.header("location"), "/console/overview");
    let set_cookie = signed_in.header("set-cookie").to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/console", "Max-Age="] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    assert!(!set_cookie.contains("Secure"), "plain http: no Secure");
    let cookie = Auth::Cookie(set_cookie.split(';').next().unwrap().to_string());
    let page = get(&app, "/console/deliveries", &cookie).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("&lt;b&gt;alice&lt;/b&gt;"));
    let csrf = page.field("csrf");
    let confirm = get(&app, "/console/deliveries/confirm?action=replay", &cookie).await;
    assert!(
        confirm.body.contains("data-count=\"0\""),
        "every dead letter is gone"
    );
    let no_csrf = post(
        &app,
        "/console/deliveries/replay",
        &cookie,
        &[("expected", "0")],
    )
    .await;
    assert_eq!(no_csrf.status, StatusCode::FORBIDDEN);
    let bad_csrf = post(
        &app,
        "/console/deliveries/replay",
        &cookie,
        &[("expected", "0"), ("csrf", "AAAA")],
    )
    .await;
    assert_eq!(bad_csrf.status, StatusCode::FORBIDDEN);
    let cross_site = post_from(
        &app,
        "/console/deliveries/replay",
        &cookie,
        &[("expected", "0"), ("csrf", &csrf)],
        Some("http://evil.test"),
    )
    .await;
    assert_eq!(cross_site.status, StatusCode::FORBIDDEN);
    let ok = post(
        &app,
        "/console/deliveries/replay",
        &cookie,
        &[("expected", "0"), ("csrf", &csrf)],
    )
    .await;
    assert_eq!(ok.status, StatusCode::SEE_OTHER, "{}", ok.body);
    assert_eq!(
        ok.header("location"),
        "/console/deliveries?notice=replayed&n=0"
    );
    let changed = post(
        &app,
        "/console/outbox/replay",
        &cookie,
        &[("expected", "5"), ("csrf", &csrf)],
    )
    .await;
    assert_eq!(changed.status, StatusCode::CONFLICT);
    assert!(changed.body.contains("id=\"changed\""));
    let out = post(&app, "/console/logout", &cookie, &[("csrf", &csrf)]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(out.header("set-cookie").contains("Max-Age=0"));

    // a read-only session: pages yes, actions no
    let ro_login = post(&app, "/console/login", &none, &[("token", READ_ONLY)]).await;
    let ro_cookie = Auth::Cookie(
        ro_login
            .header("set-cookie")
            .split(';')
            .next()
            .unwrap()
            .to_string(),
    );
    let ro_page = get(&app, "/console/overview", &ro_cookie).await;
    assert!(
        ro_page
            .body
            .contains("operator <span class=\"role\">read-only</span>")
    );
    let ro_csrf = ro_page.field("csrf");
    let refused = post(
        &app,
        "/console/deliveries/replay",
        &ro_cookie,
        &[("expected", "0"), ("csrf", &ro_csrf)],
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_role_and_action_on_sqlite() {
    let (_dir, store) = sqlite().await;
    let filled = fill(&store).await;
    suite(store, filled).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_role_and_action_on_postgres() {
    let Some((_schema, store)) = postgres().await else {
        return;
    };
    let filled = fill(&store).await;
    suite(store, filled).await;
}

/// Under an external auth layer: its user is trusted, and without one every page
/// answers 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_auth_layer_names_the_user() {
    async fn layer(mut req: Request, next: Next) -> axum::response::Response {
        let role = match req.headers().get("x-test-user").map(|v| v.as_bytes()) {
            Some(b"admin") => Some(Role::Admin),
            Some(b"viewer") => Some(Role::ReadOnly),
            _ => None,
        };
        if let Some(role) = role {
            req.extensions_mut()
                .insert(ConsoleUser::new(format!("sso-{}", role.as_str()), role));
        }
        next.run(req).await
    }
    let (_dir, store) = sqlite().await;
    fill(&store).await;
    let console = Console::new(store, ConsoleAuth::external().unwrap())
        .router()
        .layer(middleware::from_fn(layer));
    let app = Router::new().nest("/console", console);
    let request = |user: Option<&str>, method: &str, path: &str| {
        let mut builder = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "console.test");
        if let Some(user) = user {
            builder = builder.header("x-test-user", user);
        }
        builder.body(axum::body::Body::empty()).unwrap()
    };
    let anonymous = common::send(&app, request(None, "GET", "/console/overview")).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    assert!(!anonymous.body.contains("/console/login"));
    assert_eq!(
        common::send(&app, request(None, "GET", "/console/login"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let viewer = common::send(&app, request(Some("viewer"), "GET", "/console/deliveries")).await;
    assert_eq!(viewer.status, StatusCode::OK);
    assert!(viewer.body.contains("sso-read-only"));
    let admin = common::send(
        &app,
        request(Some("admin"), "GET", "/console/deliveries?state=dead"),
    )
    .await;
    let csrf = admin.field("csrf");
    let form = format!("state=dead&expected=5&csrf={csrf}");
    let post = axum::http::Request::post("/console/deliveries/replay")
        .header("host", "console.test")
        .header("origin", "http://console.test")
        .header("x-test-user", "admin")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(axum::body::Body::from(form.clone()))
        .unwrap();
    let replayed = common::send(&app, post).await;
    assert_eq!(replayed.status, StatusCode::SEE_OTHER, "{}", replayed.body);
    assert_eq!(
        replayed.header("location"),
        "/console/deliveries?state=dead&notice=replayed&n=5"
    );
    // a bearer token means nothing here, and the viewer's CSRF token is its own
    let bearer = axum::http::Request::post("/console/deliveries/replay")
        .header("host", "console.test")
        .header("authorization", format!("Bearer {ADMIN}"))
        .body(axum::body::Body::from(form))
        .unwrap();
    assert_eq!(
        common::send(&app, bearer).await.status,
        StatusCode::UNAUTHORIZED
    );
}

/// Served at the root, links have no prefix; with a base path, they have that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_follow_where_the_console_is_mounted() {
    let (_dir, store) = sqlite().await;
    let root = Console::new(store.clone(), auth()).router();
    let page = get(&root, "/deliveries", &Auth::Bearer(READ_ONLY)).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("href=\"/overview\""));
    assert!(page.body.contains("<script src=\"/assets/console."));
    let proxied = Router::new().nest(
        "/console",
        Console::new(store, auth())
            .with_base_path("/ops/console/")
            .router(),
    );
    let page = get(&proxied, "/console/overview", &Auth::Bearer(READ_ONLY)).await;
    assert!(page.body.contains("href=\"/ops/console/deliveries\""));
    let login = post(&proxied, "/console/login", &Auth::None, &[("token", ADMIN)]).await;
    assert_eq!(login.header("location"), "/ops/console/overview");
    assert!(login.header("set-cookie").contains("Path=/ops/console;"));
}
