//! `rediss://` against a private `redis-server` started for each test with TLS only
//! (`--port 0 --tls-port …`), with a CA and a certificate for `localhost` made by
//! the `openssl` CLI for the test; killed and its directory removed when the test
//! ends. The shared Redis is not touched. Each test skips (prints "skipped: …")
//! without `redis-server` or `openssl`, unless `HOOKBOX_REQUIRE_SERVICES=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Fixture, exists, ping, skip, wait_until};
use hookbox_core::{DedupeKey, Processed, RetentionPolicy};
use hookbox_redis_cache::{CacheOptions, connect, connect_with_root_ca};
use hookbox_testkit::tls::TestCertificates;

fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// Generous: these tests are about what TLS lets through, not about speed.
fn patient() -> CacheOptions {
    CacheOptions::default().with_timeout(Duration::from_secs(2))
}

fn key(id: &str) -> DedupeKey {
    DedupeKey::new("tls-tests", "standard", id)
}

/// A private `redis-server` listening with TLS only, on 127.0.0.1 and a free port,
/// with its certificates in a temp dir; killed and removed when dropped.
struct TlsRedis {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    certs: Option<TestCertificates>,
}

impl TlsRedis {
    /// Starts one, or skips.
    async fn start() -> Option<Self> {
        if !runs("redis-server", "--version") {
            return skip("the redis-server binary is not installed");
        }
        if !runs("openssl", "version") {
            return skip("the openssl CLI is not installed");
        }
        let dir = std::env::temp_dir().join(format!(
            "hookbox-redis-tls-{}-{:016x}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = Self {
            child: None,
            port,
            dir,
            certs: None,
        };
        // a CA, a server certificate it signed for `localhost` only (not 127.0.0.1),
        // and a second CA that signed nothing
        let certs = TestCertificates::generate(&server.dir, &["DNS:localhost"]);
        let log = std::fs::File::create(server.dir.join("redis.log")).unwrap();
        let child = Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .arg("--tls-cert-file")
            .arg(&certs.server_cert)
            .arg("--tls-key-file")
            .arg(&certs.server_key)
            .arg("--tls-ca-cert-file")
            .arg(&certs.ca)
            .args(["--tls-auth-clients", "no"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&server.dir)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("redis-server starts");
        server.certs = Some(certs);
        server.child = Some(child);
        let redis = connect_with_root_ca(&server.url("localhost"), server.ca()).unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !ping(&redis).await {
            let exited = server
                .child
                .as_mut()
                .and_then(|child| child.try_wait().ok().flatten());
            if exited.is_some() {
                let log = std::fs::read_to_string(server.dir.join("redis.log")).unwrap_or_default();
                return skip(&format!(
                    "redis-server exited at start (built without TLS?): {log}"
                ));
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the private TLS redis-server never answered"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Some(server)
    }

    /// The certificates made at start.
    fn certs(&self) -> &TestCertificates {
        self.certs.as_ref().expect("made at start")
    }

    fn url(&self, host: &str) -> String {
        format!("rediss://{host}:{}/", self.port)
    }

    /// The CA that signed the server's certificate.
    fn ca(&self) -> Vec<u8> {
        read(&self.certs().ca)
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Over `rediss://` with the server's CA, the cache works as over plain text: the
/// applied key is cached, and the retry is answered from Redis with the database
/// out of the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_rediss_with_the_right_ca_answers_duplicates_from_the_cache() {
    let Some(server) = TlsRedis::start().await else {
        return;
    };
    let redis = connect_with_root_ca(&server.url("localhost"), server.ca()).unwrap();
    let f = Fixture::new(redis.clone(), patient(), RetentionPolicy::default()).await;
    let k = key("evt_tls_hit");
    assert_eq!(f.credit_once(&k, "acct", 100).await, Processed::Applied(()));
    let cached = f.store.processed_key(&k);
    wait_until(
        "the applied key is cached over TLS",
        Duration::from_secs(10),
        || exists(&redis, &cached),
    )
    .await;

    // any call that reaches the database now fails: a duplicate answered must come
    // from Redis
    common::execute(
        f.store.inner(),
        "ALTER TABLE hookbox_processed_keys RENAME TO hookbox_processed_keys_away",
    )
    .await;
    let hits = f.store.cache_stats().hits;
    assert_eq!(f.credit_once(&k, "acct", 100).await, Processed::Duplicate);
    assert_eq!(f.store.cache_stats().hits, hits + 1);
    assert_eq!(common::balance(f.store.inner(), "acct").await.unwrap(), 100);
}

/// What a wrong CA, a host name not in the certificate, or the compiled-in roots
/// (which do not know the test CA) get: `connect` succeeds (it does not connect), and
/// the cache never trusts the server: every lookup fails and falls through, every
/// delivery is decided by the database, none fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_rediss_refused_certificates_fall_through_to_the_database() {
    let Some(server) = TlsRedis::start().await else {
        return;
    };
    let cases = [
        (
            "another CA",
            connect_with_root_ca(&server.url("localhost"), read(&server.certs().other_ca)),
            "UnknownIssuer",
        ),
        (
            "a host name not in the certificate",
            connect_with_root_ca(&server.url("127.0.0.1"), server.ca()),
            "certificate not valid for name \"127.0.0.1\"",
        ),
        (
            "the compiled-in roots",
            connect(&server.url("localhost")),
            "UnknownIssuer",
        ),
    ];
    // a refused connection costs the manager's retries (about 0.6 s a call), so
    // the cache calls are bounded tighter here than in the other tests
    let options = CacheOptions::default().with_timeout(Duration::from_millis(250));
    for (what, redis, reason) in cases {
        let redis = redis.unwrap_or_else(|err| panic!("{what}: {err}"));
        let mut conn = redis.clone();
        let refused = tokio::time::timeout(
            Duration::from_secs(5),
            hookbox_redis_cache::redis::cmd("PING").query_async::<String>(&mut conn),
        )
        .await
        .expect("an answer within 5 s")
        .expect_err("the server must not be trusted");
        assert!(refused.to_string().contains(reason), "{what}: {refused}");
        let f = Fixture::new(redis, options.clone(), RetentionPolicy::default()).await;
        let k = key("evt_tls_refused");
        assert_eq!(
            f.credit_once(&k, "acct", 100).await,
            Processed::Applied(()),
            "{what}"
        );
        // the duplicate is the database's answer
        assert_eq!(
            f.credit_once(&k, "acct", 100).await,
            Processed::Duplicate,
            "{what}"
        );
        assert_eq!(common::balance(f.store.inner(), "acct").await.unwrap(), 100);
        let stats = f.store.cache_stats();
        assert_eq!(stats.hits, 0, "{what}: {stats:?}");
        assert!(stats.lookup_failures >= 2, "{what}: {stats:?}");
        wait_until(
            "the cache writes after the commits fail",
            Duration::from_secs(10),
            || async { f.store.cache_stats().write_failures >= 2 },
        )
        .await;
        assert_eq!(f.store.cache_stats().writes, 0, "{what}");
    }
}

/// A plain-text client against the TLS-only port gets no answer it trusts either:
/// the cache falls through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_plain_text_against_a_tls_port_falls_through() {
    let Some(server) = TlsRedis::start().await else {
        return;
    };
    let redis = connect(&format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    let options = CacheOptions::default().with_timeout(Duration::from_millis(250));
    let f = Fixture::new(redis, options, RetentionPolicy::default()).await;
    let k = key("evt_tls_plain");
    assert_eq!(f.credit_once(&k, "acct", 1).await, Processed::Applied(()));
    assert_eq!(f.credit_once(&k, "acct", 1).await, Processed::Duplicate);
    let stats = f.store.cache_stats();
    assert_eq!(stats.hits, 0, "{stats:?}");
    assert!(stats.lookup_failures >= 2, "{stats:?}");
}
