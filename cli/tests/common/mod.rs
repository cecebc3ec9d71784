//! What the CLI's test binaries share: a temporary directory, the Postgres server
//! the Postgres tests read, and the JSON lines the operator commands print. Each
//! test binary uses part of it.
#![allow(dead_code, clippy::unwrap_used, clippy::print_stdout)]

use std::path::PathBuf;
use std::process::Output;

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

// not every test binary talks to Postgres
#[allow(unused_imports)]
pub(crate) use hookbox_diesel_pg::testing::pg_url;

/// A command's exit code and its stdout read as one JSON value per line.
pub(crate) fn json_lines(output: Output) -> (i32, Vec<Value>) {
    let lines = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (output.status.code().unwrap(), lines)
}
