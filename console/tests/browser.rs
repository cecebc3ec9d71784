//! A real browser against a running console: headless Chromium, driven over the W3C
//! WebDriver protocol by `chromedriver`, signs in, opens the overview, filters to
//! the dead letters, opens each (hostile ones among them), replays the filter's set
//! after confirming, and sees the counts change; a flag an injected script would
//! set stays unset on every page.
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (Debian's `chromium` and
//! `chromium-driver`; `CHROMIUM` and `CHROMEDRIVER` name others). Without them the
//! test prints `skipped: …` and passes, unless `HOOKBOX_REQUIRE_SERVICES=1`.
//!
//! A PNG screenshot of each page goes to `target/console-screenshots/`; with
//! `HOOKBOX_UPDATE_SCREENSHOTS=1` they are also copied to `docs/console/` for the
//! documentation.
// chromedriver runs in a process group of its own (Unix) so no browser outlives a run
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use axum::Router;
use base64::Engine as _;
use common::{ADMIN, READ_ONLY, fill, one_try};
use hookbox_console::{Console, ConsoleAuth};
use hookbox_core::bytes::Bytes;
use hookbox_sqlite::testing::TempDir;
use hookbox_sqlite::{SqliteOptions, SqliteStore};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

/// The W3C key under which an element reference is returned.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A `chromedriver` process, killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        // chromedriver's /shutdown quits the browsers of its sessions, also when a
        // failed assertion left a session open
        let addr = self.url.trim_start_matches("http://").to_string();
        if let Ok(mut stream) = std::net::TcpStream::connect(&addr) {
            use std::io::{Read as _, Write as _};
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = write!(
                stream,
                "GET /shutdown HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
            );
            let _ = stream.read_to_end(&mut Vec::new());
        }
        // and the process group it was started in (chromedriver and every browser
        // process it started) goes, so no browser outlives the test
        let group = format!("-{}", self.child.id());
        for signal in ["-TERM", "-KILL"] {
            let _ = Command::new("kill")
                .args([signal, "--", &group])
                .stderr(Stdio::null())
                .status();
            std::thread::sleep(Duration::from_millis(300));
        }
        let _ = self.child.wait();
    }
}

/// A minimal W3C WebDriver client: the handful of commands this test needs.
struct Session {
    http: Client<HttpConnector, Full<Bytes>>,
    base: String,
}

impl Session {
    async fn call(
        http: &Client<HttpConnector, Full<Bytes>>,
        method: &str,
        url: &str,
        body: Option<Value>,
    ) -> Value {
        let request = hyper::Request::builder()
            .method(method)
            .uri(url)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(
                body.map_or_else(String::new, |b| b.to_string()),
            )))
            .unwrap();
        let response = http
            .request(request)
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        assert!(status.is_success(), "{method} {url}: {status} {value}");
        value["value"].clone()
    }

    async fn start(driver: &Driver, chromium: &Path) -> Self {
        let http = Client::builder(TokioExecutor::new()).build_http();
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1366,900", "--hide-scrollbars", "--force-device-scale-factor=1"]
            }
        }}});
        let created = Self::call(
            &http,
            "POST",
            &format!("{}/session", driver.url),
            Some(capabilities),
        )
        .await;
        let id = created["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        Self {
            http,
            base: format!("{}/session/{id}", driver.url),
        }
    }

    async fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        Self::call(&self.http, method, &format!("{}{path}", self.base), body).await
    }

    async fn open(&self, url: &str) {
        self.cmd("POST", "/url", Some(json!({ "url": url }))).await;
    }

    async fn url(&self) -> String {
        self.cmd("GET", "/url", None)
            .await
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Waits until the address contains `part` (a click's navigation may still be
    /// under way when the click returns); returns it.
    async fn wait_url(&self, part: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let url = self.url().await;
            if url.contains(part) {
                // and the new document is loaded
                if self.script("return document.readyState;").await == "complete" {
                    return url;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the address stayed {url}, expected {part}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn find(&self, css: &str) -> String {
        let found = self
            .cmd(
                "POST",
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_string()
    }

    async fn click(&self, css: &str) {
        let element = self.find(css).await;
        self.cmd(
            "POST",
            &format!("/element/{element}/click"),
            Some(json!({})),
        )
        .await;
    }

    async fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        self.cmd(
            "POST",
            &format!("/element/{element}/value"),
            Some(json!({ "text": text })),
        )
        .await;
    }

    async fn text(&self, css: &str) -> String {
        let element = self.find(css).await;
        self.cmd("GET", &format!("/element/{element}/text"), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    async fn script(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": [] })),
        )
        .await
    }

    /// Asserts no injected script ran: the flag is unset and no element an
    /// injection would add exists.
    async fn assert_clean(&self, page: &str) {
        let pwned = self.script("return typeof window.__pwned;").await;
        assert_eq!(
            pwned, "undefined",
            "a script injected by a delivery ran on {page}"
        );
        let injected = self
            .script("return document.querySelectorAll('main img, main script, main iframe, main a[href^=\"javascript\"]').length;")
            .await;
        assert_eq!(injected, 0, "delivery markup became elements on {page}");
    }

    async fn screenshot(&self, dir: &Path, name: &str) {
        self.script("window.scrollTo(0, 0); return null;").await;
        let png = self.cmd("GET", "/screenshot", None).await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap())
            .unwrap();
        std::fs::write(dir.join(format!("{name}.png")), bytes).unwrap();
    }

    async fn close(self) {
        let _ = Self::call(&self.http, "DELETE", &self.base, None).await;
    }
}

fn required() -> bool {
    std::env::var("HOOKBOX_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

fn program(var: &str, default: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from);
    path.exists().then_some(path)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn start_driver(path: &Path) -> Driver {
    let port = free_port();
    let child = Command::new(path)
        .arg(format!("--port={port}"))
        // a process group of its own, which Drop ends with everything in it
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", path.display()));
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let http: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let uri = format!("{}/status", driver.url);
        if let Ok(response) = http.get(uri.parse().unwrap()).await
            && response.status().is_success()
        {
            return driver;
        }
        assert!(
            Instant::now() < deadline,
            "chromedriver did not answer on port {port}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `target/console-screenshots`, from this crate's directory.
fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    );
    let dir = target.join("console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_filters_opens_and_replays_dead_letters_and_runs_no_injected_script() {
    let (Some(chromium), Some(chromedriver)) = (
        program("CHROMIUM", "/usr/bin/chromium"),
        program("CHROMEDRIVER", "/usr/bin/chromedriver"),
    ) else {
        assert!(
            !required(),
            "chromium or chromedriver missing and HOOKBOX_REQUIRE_SERVICES=1 (apt-get install chromium chromium-driver)"
        );
        println!(
            "skipped: /usr/bin/chromium or /usr/bin/chromedriver missing (apt-get install chromium chromium-driver)"
        );
        return;
    };

    // a receiver's store with hostile deliveries among its dead letters, and the
    // console mounted in the application under /console
    let dir = TempDir::new();
    let store = SqliteStore::open(dir.db(), SqliteOptions::default().with_retry(one_try()))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let filled = fill(&store).await;
    let auth = ConsoleAuth::tokens(Some(READ_ONLY.into()), Some(ADMIN.into())).unwrap();
    let app = Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .nest("/console", Console::new(store, auth).router());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let console = format!("http://{addr}/console");

    let driver = start_driver(&chromedriver).await;
    let browser = Session::start(&driver, &chromium).await;
    let shots = screenshot_dir();

    // without a session: the 401 page, with a way to sign in
    browser.open(&format!("{console}/overview")).await;
    assert!(browser.text("main").await.contains("Sign in required"));

    // sign in with the admin token
    browser.open(&format!("{console}/login")).await;
    browser.assert_clean("login").await;
    browser.screenshot(&shots, "login").await;
    browser.type_into("input[name=token]", ADMIN).await;
    browser.type_into("input[name=name]", "alice").await;
    browser.click("#sign-in").await;
    assert_eq!(
        browser.wait_url("/overview").await,
        format!("{console}/overview")
    );
    let cookie_visible = browser.script("return document.cookie;").await;
    assert_eq!(cookie_visible, "", "the session cookie is HttpOnly");

    // the overview
    browser.assert_clean("overview").await;
    assert_eq!(browser.text("#total-dead").await, filled.dead.to_string());
    browser.screenshot(&shots, "overview").await;

    // filter to the dead letters with the form
    browser.click("nav a[href$='/deliveries']").await;
    browser.wait_url("/deliveries").await;
    browser.click("select[name=state] option[value=dead]").await;
    browser.click("#filters button[type=submit]").await;
    browser.wait_url("/deliveries?state=dead&").await;
    let rows = browser
        .script("return document.querySelectorAll('#deliveries tbody tr').length;")
        .await;
    assert_eq!(rows, json!(filled.dead));
    let states = browser
        .script("return Array.from(document.querySelectorAll('#deliveries tbody tr')).map(r => r.dataset.state);")
        .await;
    assert!(
        states.as_array().unwrap().iter().all(|s| s == "dead"),
        "{states}"
    );
    browser.assert_clean("dead letters").await;
    browser.screenshot(&shots, "dead-letters").await;

    // open every dead letter; the hostile script's one gets a screenshot
    let links = browser
        .script("return Array.from(document.querySelectorAll('#deliveries a.row-link')).map(a => a.href);")
        .await;
    for link in links.as_array().unwrap() {
        browser.open(link.as_str().unwrap()).await;
        browser.assert_clean(link.as_str().unwrap()).await;
        assert_eq!(browser.text("#state").await, "dead");
        let page = browser.text("main").await;
        assert!(!page.contains("sk_live_supersecret") && !page.contains("glpat-supersecret"));
        if page.contains("hostile-script") {
            assert!(
                page.contains("<script>window.__pwned=1</script>"),
                "shown as text"
            );
            // the script's optional wrap toggle works without touching markup
            browser.click("button[data-wrap=body]").await;
            browser.screenshot(&shots, "delivery").await;
        }
        if page.contains("1048576 bytes") {
            browser.screenshot(&shots, "delivery-1mib").await;
            let width = browser
                .script("return document.documentElement.scrollWidth <= window.innerWidth + 1;")
                .await;
            assert_eq!(width, true, "a 1 MiB line does not widen the page");
        }
    }

    // replay the filter's set: the count first, then the button that names it
    browser
        .open(&format!("{console}/deliveries?state=dead"))
        .await;
    browser.click("#replay-matching").await;
    browser.wait_url("/deliveries/confirm").await;
    assert_eq!(
        browser.text("#confirm").await,
        format!("Replay {} dead letters", filled.dead)
    );
    browser.assert_clean("confirm").await;
    browser.screenshot(&shots, "confirm").await;
    browser.click("#confirm").await;
    browser.wait_url("notice=replayed").await;
    assert!(
        browser
            .text("#notice")
            .await
            .contains(&format!("Replayed {} dead letters", filled.dead))
    );
    assert_eq!(
        browser
            .script("return document.querySelectorAll('#deliveries tbody tr').length;")
            .await,
        0
    );
    browser.screenshot(&shots, "replayed").await;

    // the counts changed
    browser.click("nav a[href$='/overview']").await;
    browser.wait_url("/overview").await;
    assert_eq!(browser.text("#total-dead").await, "0");
    browser.assert_clean("overview after").await;
    browser.screenshot(&shots, "overview-after").await;

    // the outbox, and signing out
    browser.click("nav a[href$='/outbox']").await;
    browser.wait_url("/outbox").await;
    browser.assert_clean("outbox").await;
    browser.screenshot(&shots, "outbox").await;
    browser.click("header form button").await;
    browser.wait_url("/console/login").await;
    browser.open(&format!("{console}/overview")).await;
    assert!(browser.text("main").await.contains("Sign in required"));

    browser.close().await;
    drop(driver);
    server.abort();
    println!("screenshots in {}", shots.display());
    if std::env::var("HOOKBOX_UPDATE_SCREENSHOTS").is_ok_and(|v| v == "1") {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/console");
        std::fs::create_dir_all(&docs).unwrap();
        for name in [
            "login",
            "overview",
            "dead-letters",
            "delivery",
            "confirm",
            "replayed",
            "overview-after",
            "outbox",
        ] {
            std::fs::copy(
                shots.join(format!("{name}.png")),
                docs.join(format!("{name}.png")),
            )
            .unwrap();
        }
        println!("copied to {}", docs.display());
    }
}
