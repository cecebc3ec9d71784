//! Concurrent load: the loops a bench runs at once, on the current tokio runtime,
//! timed together.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::task::{JoinError, JoinHandle};

/// Loops started together and timed together: [`Loops::start`], a
/// [`spawn`](Loops::spawn) per loop, then [`join`](Loops::join).
///
/// A loop that runs for a fixed time checks a deadline of its own; the wall time
/// [`join`](Loops::join) returns is the divisor of a rate, so a loop that ends late
/// counts against it.
#[derive(Debug)]
pub struct Loops<T> {
    start: Instant,
    handles: Vec<JoinHandle<T>>,
}

impl<T: Send + 'static> Loops<T> {
    /// Notes the start time.
    pub fn start() -> Self {
        Self {
            start: Instant::now(),
            handles: Vec::new(),
        }
    }

    /// Starts one loop on the current runtime.
    pub fn spawn(&mut self, task: impl Future<Output = T> + Send + 'static) {
        self.handles.push(tokio::spawn(task));
    }

    /// Waits for every loop; returns what each returned, in the order started, and
    /// the wall time from the start until the last loop ended.
    pub async fn join(self) -> (Vec<Result<T, JoinError>>, Duration) {
        let mut results = Vec::with_capacity(self.handles.len());
        for handle in self.handles {
            results.push(handle.await);
        }
        (results, self.start.elapsed())
    }
}
