//! The sections of the edge benchmark run on each store, as methods of [`Ctx`]:
//! every row of one store (the edge beside `Inbox::receive`, then with the Redis
//! cache beside the bare handler), group commit against per-request commit, and the
//! edge beside a worker draining the same store.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox_axum::Webhook;
use hookbox_bench::BoxErr;
use hookbox_bench::table::thousands;
use hookbox_core::{Inbox, InboxAdmin, Provider as _};
use hookbox_redis_cache::{CacheOptions, CacheStats, Cached};
use hookbox_standard::Standard;

use crate::phase::{CONNECTIONS, Feed, WORKER_CONNECTIONS, paired, single};
use crate::report::{Kind, Via};
use crate::server::{PATH, Prepared, bare_router, serve};
use crate::{Ctx, DUPLICATES, SECRET, WORKER_IDLE, WORKER_PACE};

impl Ctx {
    /// Every row of one store: the edge without the cache beside `Inbox::receive`
    /// without HTTP, then with the Redis cache beside the bare handler.
    pub(crate) fn store_section<S>(&self, name: &'static str, store: S) -> Result<(), BoxErr>
    where
        S: Inbox + Clone + 'static,
    {
        let direct = Arc::new(store.clone());
        let sign = |n| Ok(self.sign_fresh(n));
        let sign_verified = |n| self.verified_fresh(n);
        let plain = Via::Edge { cache: false };
        let server = serve(
            &self.server_rt,
            Webhook::inbox(Standard::new(SECRET)?, store.clone()).into_router(PATH),
        )?;
        for conns in CONNECTIONS {
            // the fresh-path target: the edge over HTTP against the store alone, on the
            // same runtime, in alternating rounds
            let mut receive = self.receive_side(&direct, conns, Feed::Fresh(&sign_verified));
            let mut http = self.http_side(&server, conns, Feed::Fresh(&sign));
            let (alone, edge) = paired(&mut receive, &mut http, &self.timing)?;
            self.table
                .row(name, Via::Receive, Kind::Fresh, conns, &alone);
            self.table.row(name, plain, Kind::Fresh, conns, &edge);
        }
        // the same few deliveries, stored once, then sent again
        let duplicates = self.sign_fresh(DUPLICATES);
        self.store_once(&server, &duplicates)?;
        for conns in CONNECTIONS {
            let mut http = self.http_side(&server, conns, Feed::Cycle(duplicates.clone()));
            let tally = single(&mut http, &self.timing)?;
            self.table.row(name, plain, Kind::Duplicate, conns, &tally);
        }
        drop(server);

        let Some(redis) = &self.redis else {
            println!(
                "{:<26} (skipped: Redis unreachable)",
                format!("{name} + redis")
            );
            return Ok(());
        };
        // a per-run prefix and a short TTL: the keys are deleted at the end, and
        // expire on their own if the run is killed
        let options = CacheOptions::default()
            .with_prefix(redis.prefix.clone())
            .with_ttl(Duration::from_secs(600));
        // the TTL ceiling is the store's own retention
        let cached = Arc::new(Cached::new(store, redis.manager.clone(), options)?);
        // the edge takes its store by value: an `Arc` of the cache is one, and the
        // bench keeps the other to read the cache's counters
        let server = serve(
            &self.server_rt,
            Webhook::inbox(Standard::new(SECRET)?, Arc::clone(&cached)).into_router(PATH),
        )?;
        let via = Via::Edge { cache: true };
        let before = cached.cache_stats();
        for conns in CONNECTIONS {
            let mut http = self.http_side(&server, conns, Feed::Fresh(&sign));
            let tally = single(&mut http, &self.timing)?;
            self.table.row(name, via, Kind::Fresh, conns, &tally);
        }
        self.cache_line("fresh", &cached, &before);

        // stored once through the cache, which remembers them in Redis after the
        // commit (a spawned write, done well within the warm-up)
        let duplicates = self.sign_fresh(DUPLICATES);
        self.store_once(&server, &duplicates)?;
        let bare = serve(
            &self.server_rt,
            bare_router(self.provider.options().body_limit()),
        )?;
        let before = cached.cache_stats();
        for conns in CONNECTIONS {
            // the duplicate-path target: against the bare handler, in alternating rounds
            let mut edge = self.http_side(&server, conns, Feed::Cycle(duplicates.clone()));
            let mut ceiling = self.http_side(&bare, conns, Feed::Cycle(duplicates.clone()));
            let (edge, ceiling) = paired(&mut edge, &mut ceiling, &self.timing)?;
            self.table.row(name, via, Kind::Duplicate, conns, &edge);
            self.table
                .row(name, Via::Bare, Kind::Ceiling, conns, &ceiling);
        }
        self.cache_line("duplicate", &cached, &before);
        Ok(())
    }

    /// Group commit against per-request commit: two stores of one backend, the edge
    /// over HTTP on each, fresh deliveries then duplicates, in alternating rounds per
    /// concurrency. `stats` reads the group store's writer between the cells.
    pub(crate) fn commit_section<G, P>(
        &self,
        names: (&'static str, &'static str),
        group: G,
        per_request: P,
        stats: impl Fn(&G) -> Option<hookbox_core::GroupCommitStats>,
    ) -> Result<(), BoxErr>
    where
        G: Inbox + Clone + 'static,
        P: Inbox + Clone + 'static,
    {
        let sign = |n| Ok(self.sign_fresh(n));
        let plain = Via::Edge { cache: false };
        let grouped = serve(
            &self.server_rt,
            Webhook::inbox(Standard::new(SECRET)?, group.clone()).into_router(PATH),
        )?;
        let single_commit = serve(
            &self.server_rt,
            Webhook::inbox(Standard::new(SECRET)?, per_request).into_router(PATH),
        )?;
        let record = |kind, conns, feeds: (Feed<'_, Prepared>, Feed<'_, Prepared>)| {
            let before = stats(&group).unwrap_or_default();
            let mut a = self.http_side(&grouped, conns, feeds.0);
            let mut b = self.http_side(&single_commit, conns, feeds.1);
            let (a, b) = paired(&mut a, &mut b, &self.timing)?;
            let after = stats(&group).unwrap_or_default();
            self.table.set_mean_batch(after.mean_batch_since(&before));
            self.table.row(names.0, plain, kind, conns, &a);
            self.table.set_mean_batch(None);
            self.table.row(names.1, plain, kind, conns, &b);
            Ok::<_, BoxErr>(())
        };
        for conns in CONNECTIONS {
            record(Kind::Fresh, conns, (Feed::Fresh(&sign), Feed::Fresh(&sign)))?;
        }
        let duplicates = self.sign_fresh(DUPLICATES);
        self.store_once(&grouped, &duplicates)?;
        self.store_once(&single_commit, &duplicates)?;
        for conns in CONNECTIONS {
            let feeds = (
                Feed::Cycle(duplicates.clone()),
                Feed::Cycle(duplicates.clone()),
            );
            record(Kind::Duplicate, conns, feeds)?;
        }
        Ok(())
    }

    /// The edge while a worker drains the same store: fresh deliveries at 64
    /// connections, first at an offered [`WORKER_PACE`] per second, then as fast as
    /// answered, with `run_worker` running `handler` on the receiver's runtime, so its
    /// transactions (lease, then the handler and the mark) share the write path with
    /// the edge's inserts. After each row, what the worker drained meanwhile.
    pub(crate) fn worker_section<S, H>(
        &self,
        name: &'static str,
        store: S,
        handler: H,
    ) -> Result<(), BoxErr>
    where
        S: Inbox + InboxAdmin + Clone + Send + Sync + 'static,
        H: hookbox_core::Handler<S::Conn> + 'static,
    {
        let server = serve(
            &self.server_rt,
            Webhook::inbox(Standard::new(SECRET)?, store.clone()).into_router(PATH),
        )?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let worker_store = store.clone();
        let worker = self.server_rt.spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            hookbox_core::run_worker(&worker_store, handler, WORKER_IDLE, shutdown).await
        });
        let sign = |n| Ok(self.sign_fresh(n));
        for pace in [Some(WORKER_PACE), None] {
            let before = self.server_rt.block_on(store.stats())?;
            let started = Instant::now();
            let mut http =
                self.paced_http_side(&server, WORKER_CONNECTIONS, Feed::Fresh(&sign), pace);
            let tally = single(&mut http, &self.timing)?;
            let elapsed = started.elapsed().as_secs_f64();
            let after = self.server_rt.block_on(store.stats())?;
            let via = Via::EdgeWithWorker {
                offered: pace.map(|rate| rate as u32),
            };
            self.table
                .row(name, via, Kind::Fresh, WORKER_CONNECTIONS, &tally);
            let drained = after.processed.saturating_sub(before.processed);
            println!(
                "{:<26} the worker meanwhile: {}/s processed, {} pending when the cell ended",
                "",
                thousands(drained as f64 / elapsed),
                after.pending,
            );
        }
        // the backlog the cells left, drained by the worker alone
        let before = self.server_rt.block_on(store.stats())?;
        let started = Instant::now();
        std::thread::sleep(self.timing.cell);
        let elapsed = started.elapsed().as_secs_f64();
        let after = self.server_rt.block_on(store.stats())?;
        println!(
            "{:<26} the worker alone, no requests: {}/s processed, {} pending after {elapsed:.1} s",
            "",
            thousands(after.processed.saturating_sub(before.processed) as f64 / elapsed),
            after.pending,
        );
        let _ = stop.send(());
        let report = self.server_rt.block_on(worker)??;
        if report.failed > 0 {
            return Err(format!("the worker beside the edge failed {} rows", report.failed).into());
        }
        Ok(())
    }

    /// Prints what the cache did during the cells since `before`.
    fn cache_line<S>(&self, cells: &str, cached: &Cached<S>, before: &CacheStats) {
        let after = cached.cache_stats();
        println!(
            "{:<26} redis, {cells} cells: {} hits, {} misses, {} lookups failed or over the \
             {} ms timeout (the database answered); {} keys written, {} writes failed",
            "",
            after.hits - before.hits,
            after.misses - before.misses,
            after.lookup_failures - before.lookup_failures,
            cached.options().timeout().as_millis(),
            after.writes - before.writes,
            after.write_failures - before.write_failures,
        );
    }
}
