//! What the CLI's test binaries share: a temporary directory, the Postgres server
//! the Postgres tests read, and the JSON lines the operator commands print. Each
//! test binary uses part of it.
#![allow(dead_code, clippy::unwrap_used, clippy::print_stdout)]

use std::path::PathBuf;
use std::process::Output;

use hookbox_diesel_pg::diesel_async::{AsyncConnection as _, AsyncPgConnection};
use serde_json::Value;

/// A temp directory removed when dropped.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    /// Creates `<temp dir>/hookbox-cli-<name>-<pid>-<random>`.
    pub(crate) fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "hookbox-cli-{name}-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Returns the server's URL, or `None` when the test must skip: `HOOKBOX_PG_URL`
/// unset or unreachable. With `HOOKBOX_REQUIRE_SERVICES=1` both fail the test
/// instead.
pub(crate) async fn pg_url() -> Option<String> {
    let required = std::env::var("HOOKBOX_REQUIRE_SERVICES").is_ok_and(|v| v == "1");
    let Some(url) = std::env::var("HOOKBOX_PG_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        assert!(
            !required,
            "HOOKBOX_PG_URL not set and HOOKBOX_REQUIRE_SERVICES=1"
        );
        println!("skipped: HOOKBOX_PG_URL not set");
        return None;
    };
    if let Err(err) = AsyncPgConnection::establish(&url).await {
        assert!(!required, "HOOKBOX_PG_URL unreachable: {err}");
        println!("skipped: HOOKBOX_PG_URL unreachable: {err}");
        return None;
    }
    Some(url)
}

/// A command's exit code and its stdout read as one JSON value per line.
pub(crate) fn json_lines(output: Output) -> (i32, Vec<Value>) {
    let lines = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (output.status.code().unwrap(), lines)
}
