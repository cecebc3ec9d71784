//! The crash test with real processes: `workers` worker processes take deliveries
//! from one queue; at the crash point (after the dedupe insert, before the side
//! effect) the parent draws the script's crash chance and either lets the worker go
//! on or SIGKILLs it, starts a fresh one in its place, and puts the retry at the back
//! of the queue, as the script's `queue.push`.

use std::collections::VecDeque;
use std::io;
use std::os::unix::process::ExitStatusExt as _;
use std::process::Stdio;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinSet;

use super::backend::{Backend, SimConn as _};
use super::namespace::Schema;
use super::options::SimOptions;
use super::worker::{CrashDesign, WORKER_SUBCOMMAND, WORKER_URL_ENV};
use crate::seed::{N_ACCOUNTS, keyed};
use crate::table::CrashRow;

/// The script's crash test size.
pub(super) const N_EVENTS: usize = 2000;
/// The script's crash chance per delivery, drawn as `keyed("crash", id, attempt)`.
pub(super) const P_CRASH: f64 = 0.01;

/// SIGKILL: what a killed worker's exit status must show.
const SIGKILL: i32 = 9;

/// How to start a worker process.
struct Spawner {
    exe: std::path::PathBuf,
    url: String,
    schema: String,
    design: CrashDesign,
}

/// A running worker process and its pipes.
struct Proc {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

/// One delivery of the crash test.
struct Delivery {
    id: String,
    acct: i32,
    attempt: u32,
}

/// How a delivery ended.
enum Outcome {
    /// The key was there: acknowledged without applying.
    Duplicate,
    /// The side effect ran (and, in the atomic design, committed with the key).
    Applied,
    /// The worker was SIGKILLed at the crash point.
    Killed,
}

impl Spawner {
    async fn spawn(&self) -> io::Result<Proc> {
        let mut child = Command::new(&self.exe)
            .arg(WORKER_SUBCOMMAND)
            .args(["--schema", &self.schema, "--design", self.design.as_str()])
            .env(WORKER_URL_ENV, &self.url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            // a failed run must not leave workers behind
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "starting the worker {} {WORKER_SUBCOMMAND}: {e}",
                        self.exe.display()
                    ),
                )
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(io::Error::other("the worker's pipes are missing"));
        };
        let mut proc = Proc {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
        };
        proc.expect("ready").await?;
        Ok(proc)
    }
}

impl Proc {
    async fn send(&mut self, line: &str) -> io::Result<()> {
        self.stdin.write_all(format!("{line}\n").as_bytes()).await?;
        self.stdin.flush().await
    }

    async fn read(&mut self) -> io::Result<String> {
        match self.lines.next_line().await? {
            Some(line) => match line.strip_prefix("error ") {
                Some(message) => Err(io::Error::other(format!("worker: {message}"))),
                None => Ok(line),
            },
            None => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "a worker exited unexpectedly",
            )),
        }
    }

    async fn expect(&mut self, want: &str) -> io::Result<()> {
        let line = self.read().await?;
        if line == want {
            Ok(())
        } else {
            Err(unexpected(&line))
        }
    }

    /// Sends the delivery; at the crash point either says go or kills the worker.
    async fn deliver(&mut self, d: &Delivery, crash: bool) -> io::Result<Outcome> {
        self.send(&format!("deliver {} {}", d.id, d.acct)).await?;
        match self.read().await?.as_str() {
            "dup" => Ok(Outcome::Duplicate),
            "point" if crash => {
                self.kill().await?;
                Ok(Outcome::Killed)
            }
            "point" => {
                self.send("go").await?;
                self.expect("ok").await?;
                Ok(Outcome::Applied)
            }
            other => Err(unexpected(other)),
        }
    }

    /// SIGKILLs the worker and checks that the signal is what ended it.
    async fn kill(&mut self) -> io::Result<()> {
        self.child.start_kill()?; // SIGKILL on Unix
        let status = self.child.wait().await?;
        if status.signal() == Some(SIGKILL) {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "a worker ended with {status} instead of SIGKILL"
            )))
        }
    }

    /// Closes the worker's input (its signal to exit) and checks its exit status.
    async fn finish(self) -> io::Result<()> {
        let Proc {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let status = child.wait().await?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!("a worker exited with {status}")))
        }
    }
}

fn unexpected(line: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unexpected line from a worker: {line:?}"),
    )
}

/// Runs the crash experiment for `design` over `n` events on `schema`.
pub(super) async fn run<B: Backend>(
    design: CrashDesign,
    n: usize,
    options: &SimOptions,
    schema: &Schema<B>,
) -> io::Result<CrashRow> {
    let spawner = Arc::new(Spawner {
        exe: options.worker_exe.clone(),
        url: options.url.clone(),
        schema: schema.name.clone(),
        design,
    });
    let mut starting = JoinSet::new();
    for _ in 0..options.workers {
        let spawner = Arc::clone(&spawner);
        starting.spawn(async move { spawner.spawn().await });
    }
    let mut idle = Vec::with_capacity(options.workers);
    while let Some(proc) = starting.join_next().await {
        idle.push(proc.map_err(io::Error::other)??);
    }

    let mut queue: VecDeque<Delivery> = (0..n)
        .map(|i| Delivery {
            id: format!("evt_c{i:05}"),
            acct: (i % N_ACCOUNTS) as i32,
            attempt: 1,
        })
        .collect();
    let mut crashes = 0i64;
    let mut running: JoinSet<(Proc, Delivery, io::Result<Outcome>)> = JoinSet::new();
    loop {
        while !idle.is_empty()
            && let Some(d) = queue.pop_front()
        {
            let Some(mut proc) = idle.pop() else { break };
            let crash = keyed(&[&"crash", &d.id, &d.attempt]) < P_CRASH;
            let spawner = Arc::clone(&spawner);
            running.spawn(async move {
                let outcome = match proc.deliver(&d, crash).await {
                    // a fresh worker takes the killed one's place
                    Ok(Outcome::Killed) => match spawner.spawn().await {
                        Ok(fresh) => {
                            proc = fresh;
                            Ok(Outcome::Killed)
                        }
                        Err(err) => Err(err),
                    },
                    other => other,
                };
                (proc, d, outcome)
            });
        }
        let Some(done) = running.join_next().await else {
            break;
        };
        let (proc, d, outcome) = done.map_err(io::Error::other)?;
        idle.push(proc);
        match outcome? {
            Outcome::Duplicate | Outcome::Applied => {}
            Outcome::Killed => {
                crashes += 1;
                queue.push_back(Delivery {
                    attempt: d.attempt + 1,
                    ..d
                });
            }
        }
    }
    for proc in idle {
        proc.finish().await?;
    }

    let store = schema.store(1).await?;
    let mut conn = B::connection(&store).await?;
    let applied = conn
        .count("SELECT count(DISTINCT event_id) AS n FROM applied")
        .await?;
    let keys = conn
        .count(match design {
            CrashDesign::Split => "SELECT count(*) AS n FROM processed_events",
            CrashDesign::Atomic => "SELECT count(*) AS n FROM hookbox_processed_keys",
        })
        .await?;
    let ledger = conn.ledger().await?;
    let n = n as i64;
    Ok(CrashRow {
        n,
        crashes,
        keys,
        applied,
        lost: n - applied,
        ledger,
        expected: n * 100,
    })
}
