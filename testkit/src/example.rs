//! A spawned example process ([`Example`]): its address, its output lines and log,
//! the requests sent to it, and stopping it.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hookbox_core::bytes::Bytes;
use hookbox_core::http::Request;
use hookbox_core::time::OffsetDateTime;
use hookbox_core::{SignedHeaders, Signer};
use http_body_util::Full;
use hyper_util::client::legacy::Client;

use crate::common::DEADLINE;
use crate::delivery::{Answer, Sender, exchange, signed_post};

/// A running example process, killed when dropped.
#[derive(Debug)]
pub struct Example {
    pub(crate) child: Child,
    pub(crate) lines: mpsc::Receiver<String>,
    pub(crate) url: Option<String>,
    pub(crate) log: PathBuf,
    pub(crate) client: Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
}

impl Example {
    /// Returns the base URL the example listens on (`http://127.0.0.1:<port>`).
    ///
    /// # Panics
    /// For a process started with [`Sandbox::spawn`](crate::Sandbox::spawn), which serves no HTTP.
    pub fn url(&self) -> &str {
        self.url.as_deref().expect("started with Sandbox::start")
    }

    /// Returns the process's stderr so far (its logs).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Signs `body` with `signer` as delivery `id`, timestamped now, and POSTs it to
    /// `path`.
    ///
    /// # Panics
    /// As [`Example::post`].
    pub async fn send(&self, path: &str, signer: &dyn Signer, id: &str, body: &[u8]) -> Answer {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        self.post(path, &signer.sign(id, now, body), body).await
    }

    /// POSTs `body` with `headers` to `path` and reads the answer.
    ///
    /// # Panics
    /// When the request cannot be built or no answer comes within [`DEADLINE`].
    pub async fn post(&self, path: &str, headers: &SignedHeaders, body: &[u8]) -> Answer {
        exchange(&self.client, signed_post(self.url(), path, headers, body))
            .await
            .unwrap_or_else(|err| panic!("POST {path}: {err}\n{}", self.log()))
    }

    /// Returns the next line the process prints on stdout after the address line
    /// (for example a second listener's address), waiting up to [`DEADLINE`].
    ///
    /// # Panics
    /// When no line comes in time.
    pub fn next_line(&self) -> String {
        self.lines
            .recv_timeout(DEADLINE)
            .unwrap_or_else(|_| panic!("no further line within {DEADLINE:?}\n{}", self.log()))
    }

    /// GETs an absolute `url` (a path on [`Example::url`] when it starts with `/`)
    /// and reads the answer.
    ///
    /// # Panics
    /// When no answer comes within [`DEADLINE`].
    pub async fn get(&self, url: &str) -> Answer {
        let url = if url.starts_with('/') {
            format!("{}{url}", self.url())
        } else {
            url.to_string()
        };
        let request = Request::get(&url)
            .body(Full::new(Bytes::new()))
            .expect("a valid request");
        exchange(&self.client, request)
            .await
            .unwrap_or_else(|err| panic!("GET {url}: {err}\n{}", self.log()))
    }

    /// Returns a sender for this example that tasks can share: it keeps the
    /// address and a client, not the process.
    pub fn sender(&self) -> Sender {
        Sender {
            url: self.url().to_string(),
            client: self.client.clone(),
        }
    }

    /// Sends the process SIGKILL (`kill -9 <pid>`): no destructor, no graceful
    /// shutdown, as a crash or an OOM kill stops it.
    ///
    /// # Panics
    /// When `kill` cannot be run.
    pub fn kill_now(&self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .unwrap_or_else(|err| panic!("cannot run kill: {err}"));
    }

    /// Sends the process SIGTERM (`kill -TERM <pid>`, what orchestrators send to stop
    /// a process) and waits for it to exit; returns its exit status.
    ///
    /// # Panics
    /// When `kill` cannot be run or fails, or the process is still running
    /// [`DEADLINE`] after the signal.
    pub async fn terminate(&mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        let kill = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap_or_else(|err| panic!("cannot run kill: {err}"));
        assert!(kill.success(), "kill -TERM {pid}: {kill}\n{}", self.log());
        self.exited().await
    }

    /// Waits for the process to exit on its own; returns its exit status.
    ///
    /// # Panics
    /// When it is still running after [`DEADLINE`].
    pub async fn exited(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status,
                Ok(None) => {}
                Err(err) => panic!("cannot wait for the process: {err}\n{}", self.log()),
            }
            assert!(
                started.elapsed() < DEADLINE,
                "still running after {DEADLINE:?}\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
