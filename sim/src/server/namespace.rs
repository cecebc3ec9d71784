//! A run's schemas (databases on MySQL): one fresh namespace per handler and crash
//! design with the script's tables and hookbox's, all dropped at the end.

use std::io;
use std::marker::PhantomData;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::backend::Backend;

/// The namespaces of one run, all named `<prefix>_<suffix>`; [`Schemas::drop_all`]
/// drops them, and dropping the value drops any that are left (a panic mid-run).
pub(super) struct Schemas<B: Backend> {
    url: String,
    prefix: String,
    created: Mutex<Vec<String>>,
    backend: PhantomData<B>,
}

/// A namespace of the run: its name and the server it lives on.
pub(super) struct Schema<B: Backend> {
    pub(super) name: String,
    pub(super) url: String,
    backend: PhantomData<B>,
}

impl<B: Backend> Schemas<B> {
    pub(super) fn new(url: &str) -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static RUNS: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        Self {
            url: url.to_string(),
            prefix: format!(
                "hookbox_sim_{:x}_{nanos:08x}_{}",
                std::process::id(),
                RUNS.fetch_add(1, Ordering::Relaxed)
            ),
            created: Mutex::new(Vec::new()),
            backend: PhantomData,
        }
    }

    /// The common start of every namespace name of this run.
    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Creates `<prefix>_<suffix>` with the script's tables (500 accounts) and
    /// hookbox's own (`migrate`).
    pub(super) async fn create(&self, suffix: &str) -> io::Result<Schema<B>> {
        let name = format!("{}_{suffix}", self.prefix);
        // recorded first: a namespace half created is dropped too
        lock(&self.created).push(name.clone());
        B::create(&self.url, &name).await?;
        let schema = Schema {
            name,
            url: self.url.clone(),
            backend: PhantomData,
        };
        B::migrate(&schema.store(1).await?).await?;
        Ok(schema)
    }

    /// Drops every namespace this run created; returns how long that took.
    pub(super) async fn drop_all(&self) -> io::Result<Duration> {
        let t0 = Instant::now();
        let names = std::mem::take(&mut *lock(&self.created));
        for name in names {
            B::drop(&self.url, &name).await?;
        }
        Ok(t0.elapsed())
    }
}

impl<B: Backend> Drop for Schemas<B> {
    fn drop(&mut self) {
        if lock(&self.created).is_empty() {
            return;
        }
        // a panic unwound past `drop_all`: drop what is left from a thread with a
        // runtime of its own (this one may be inside, or be, the run's runtime)
        let schemas = Schemas::<B> {
            url: self.url.clone(),
            prefix: self.prefix.clone(),
            created: Mutex::new(std::mem::take(&mut *lock(&self.created))),
            backend: PhantomData,
        };
        let _ = std::thread::spawn(move || {
            if let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                let _ = runtime.block_on(schemas.drop_all());
            }
        })
        .join();
    }
}

/// Locks `m`, also after a panic poisoned it (the list stays valid).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<B: Backend> Schema<B> {
    /// A store on this namespace with a pool of `connections`.
    pub(super) async fn store(&self, connections: usize) -> io::Result<B::Store> {
        B::store(&self.url, &self.name, connections).await
    }
}
