//! Where a [`Conn`](crate::Conn)'s statements run: on tokio's blocking pool, or, inside
//! the worker's batch, on the task's own thread.
//!
//! diesel-async's `SyncConnectionWrapper` hands every statement to a blocking thread
//! and wakes the task when it is done: two thread switches per statement, which on
//! a small machine cost more than the statement. That is the right trade for the
//! edge (a statement may wait for SQLite's write lock) but not for the worker's
//! batch: there the write lock is already held (`BEGIN IMMEDIATE` succeeded), the
//! worker's connection has no busy handler, and each statement (a savepoint, the
//! handler's insert, its release) takes microseconds. So while the worker polls the
//! body of a batch, [`inline`] makes every statement of a `Conn` run where it is
//! called; the batch's `BEGIN` and `COMMIT` (which may checkpoint the WAL to disk)
//! still go to the blocking pool.

use std::cell::Cell;
use std::error::Error;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

use diesel_async::sync_connection_wrapper::SpawnBlocking;

/// The future type `SpawnBlocking` returns.
type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

thread_local! {
    /// `true` while this thread polls a future wrapped by [`inline`].
    static INLINE: Cell<bool> = const { Cell::new(false) };
}

/// How a [`Conn`](crate::Conn) runs its statements (the wrapper's runtime): on
/// tokio's blocking pool, except inside the worker's batch (module docs).
///
/// You never build one: the store's pool and [`connect`](crate::blocking) do.
pub struct StatementRunner {
    handle: Runtime,
}

enum Runtime {
    /// The runtime the connection was opened on.
    Handle(tokio::runtime::Handle),
    /// A connection opened outside any runtime gets a small one of its own.
    Owned(tokio::runtime::Runtime),
}

impl Runtime {
    fn handle(&self) -> &tokio::runtime::Handle {
        match self {
            Runtime::Handle(handle) => handle,
            Runtime::Owned(runtime) => runtime.handle(),
        }
    }
}

impl std::fmt::Debug for StatementRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatementRunner").finish_non_exhaustive()
    }
}

impl SpawnBlocking for StatementRunner {
    fn spawn_blocking<'a, R>(
        &mut self,
        task: impl FnOnce() -> R + Send + 'static,
    ) -> BoxFuture<'a, Result<R, Box<dyn Error + Send + Sync + 'static>>>
    where
        R: Send + 'static,
    {
        if INLINE.get() {
            // a panic is the statement's error, as a blocking task's panic would be
            let ran = catch_unwind(AssertUnwindSafe(task))
                .map_err(|_| Box::<dyn Error + Send + Sync>::from("a statement panicked"));
            return Box::pin(std::future::ready(ran));
        }
        let handle = self.handle.handle().clone();
        let future = handle.spawn_blocking(task);
        Box::pin(FinishOnDrop { handle, future })
    }

    fn get_runtime() -> Self {
        let handle = match tokio::runtime::Handle::try_current() {
            Ok(handle) => Runtime::Handle(handle),
            Err(_) => match tokio::runtime::Builder::new_current_thread().build() {
                Ok(runtime) => Runtime::Owned(runtime),
                // `get_runtime` cannot fail; without a runtime no statement can run
                Err(err) => panic!("no tokio runtime for the SQLite connection: {err}"),
            },
        };
        Self { handle }
    }
}

/// A statement on the blocking pool. Dropped before it finished (the caller's
/// future was cancelled), it waits for the statement: the connection is never
/// handed on while a statement still runs on it.
struct FinishOnDrop<R> {
    handle: tokio::runtime::Handle,
    future: tokio::task::JoinHandle<R>,
}

impl<R> Future for FinishOnDrop<R> {
    type Output = Result<R, Box<dyn Error + Send + Sync + 'static>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.future)
            .poll(cx)
            .map_err(|err| Box::new(err) as Box<dyn Error + Send + Sync>)
    }
}

impl<R> Drop for FinishOnDrop<R> {
    fn drop(&mut self) {
        if !self.future.is_finished() {
            let handle = self.handle.clone();
            let future = &mut self.future;
            tokio::task::block_in_place(|| {
                let _ = handle.block_on(future);
            });
        }
    }
}

/// Runs every statement of a [`Conn`](crate::Conn) made while `future` is polled on
/// the polling thread (module docs). For code that holds SQLite's write lock and
/// whose statements never wait for it.
pub(crate) fn inline<F: Future>(future: F) -> Inline<F> {
    Inline {
        future: Box::pin(future),
    }
}

/// The future [`inline`] returns.
pub(crate) struct Inline<F> {
    future: Pin<Box<F>>,
}

impl<F: Future> Future for Inline<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        /// Puts the flag back, also when the poll panics.
        struct Restore(bool);
        impl Drop for Restore {
            fn drop(&mut self) {
                INLINE.set(self.0);
            }
        }
        let _restore = Restore(INLINE.replace(true));
        self.future.as_mut().poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn statements_run_on_the_polling_thread_only_inside_inline() {
        let mut runner = StatementRunner::get_runtime();
        let caller = std::thread::current().id();
        let outside = runner
            .spawn_blocking(|| std::thread::current().id())
            .await
            .expect("ran");
        assert_ne!(outside, caller, "outside `inline`: the blocking pool");
        let inside = inline(async {
            let here = std::thread::current().id();
            let ran = runner
                .spawn_blocking(|| std::thread::current().id())
                .await
                .expect("ran");
            (here, ran)
        })
        .await;
        assert_eq!(inside.0, inside.1, "inside `inline`: the polling thread");
        assert!(!INLINE.get(), "the flag is put back after the poll");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panicking_inline_statement_is_an_error_not_a_panic() {
        let mut runner = StatementRunner::get_runtime();
        let ran = inline(async { runner.spawn_blocking(|| -> u8 { panic!("boom") }).await }).await;
        assert!(ran.is_err());
    }
}
