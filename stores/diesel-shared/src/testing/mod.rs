//! Test support for the diesel stores: the rule for finding a server, and checks
//! both stores run against one, generic over a [`Backend`].
//!
//! Enabled by the `testing` feature; meant for dev-dependencies (and the stores' own
//! `testing` features) only.
//!
//! A store's test suite implements [`Backend`] once (in its `tests/common`) and calls
//! each check from a `#[test]` of its own:
//!
//! ```text
//! #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
//! async fn copies_racing_over_pooled_connections_apply_each_event_once() {
//!     concurrency::copies_racing_over_pooled_connections_apply_each_event_once::<common::Pg>().await;
//! }
//! ```
// a skipped test says so on the test's output; a failed step panics, as in a test
#![allow(clippy::print_stdout, clippy::unwrap_used)]

pub mod concurrency;
pub mod group_commit;
pub mod processes;

use std::time::Duration;

use diesel_async::AsyncConnection;
use hookbox_core::{BoxFuture, GroupCommitStats, IdempotencyStore, Inbox, InboxAdmin, Store};

/// The variable that makes a missing server fail a test instead of skipping it.
pub const REQUIRE_VAR: &str = "HOOKBOX_REQUIRE_SERVICES";

/// Long enough for any wait in these tests, short enough that a hang fails.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// Returns the server's URL from the variable `var`, or `None` when the test must
/// skip: the variable is unset or empty, or the server does not accept a connection
/// of type `C`. With `HOOKBOX_REQUIRE_SERVICES=1` (as CI sets it) both panic instead,
/// so a missing server fails the run rather than passing it by skipping.
///
/// # Panics
/// Under `HOOKBOX_REQUIRE_SERVICES=1`, when there is no reachable server.
pub async fn service_url<C: AsyncConnection>(var: &str) -> Option<String> {
    let required = std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1");
    let Some(url) = std::env::var(var).ok().filter(|url| !url.is_empty()) else {
        assert!(!required, "{var} not set and {REQUIRE_VAR}=1");
        println!("skipped: {var} not set");
        return None;
    };
    if let Err(err) = C::establish(&url).await {
        assert!(!required, "{var} unreachable and {REQUIRE_VAR}=1: {err}");
        println!("skipped: {var} unreachable: {err}");
        return None;
    }
    Some(url)
}

/// A store under test on a real server, with the ledger its side effects write to.
///
/// The ledger is two tables in the store's own schema or database: `ledger
/// (account PRIMARY KEY, balance BIGINT NOT NULL DEFAULT 0, plan TEXT)` and
/// `applications (event NOT NULL, at …)`, one row per applied event.
pub trait Backend: Sized + 'static {
    /// The connection side effects and handlers run on.
    type Conn: Send + 'static;
    /// The store, cloned into each task.
    type Store: IdempotencyStore<Conn = Self::Conn> + Inbox + InboxAdmin + Clone + 'static;
    /// A fresh schema or database with the ledger tables, dropped (with everything
    /// in it) when the value is.
    type Scope: Send + 'static;

    /// The variable a parent process names the child's schema or database in
    /// (`HOOKBOX_TEST_CHILD_SCHEMA`).
    const CHILD_VAR: &'static str;
    /// A query returning the sum of all ledger balances as one BIGINT column `n`
    /// (0 on an empty ledger), in the backend's dialect.
    const SUM_BALANCES: &'static str;

    /// Returns the server's URL, or `None` when the test must skip (see
    /// [`service_url`]).
    fn url() -> BoxFuture<'static, Option<String>>;

    /// Creates a fresh schema or database with the ledger tables on the server at
    /// `url`.
    fn scope(url: &str) -> BoxFuture<'_, Self::Scope>;

    /// Returns the name of `scope`, as [`Backend::store`] takes it.
    fn scope_name(scope: &Self::Scope) -> &str;

    /// Connects a store to the schema or database `name` on the server at `url` with
    /// `settings` (the store's defaults for what they leave unset) and migrates it.
    fn store<'a>(url: &'a str, name: &'a str, settings: Settings) -> BoxFuture<'a, Self::Store>;

    /// Returns how many group-commit writer tasks `store` runs, as configured.
    fn group_commit_writers(store: &Self::Store) -> usize;

    /// Returns `store`'s group-commit statistics; `None` without group commit.
    fn group_commit_stats(store: &Self::Store) -> Option<GroupCommitStats>;

    /// Makes every statement that inserts into `store`'s inbox sleep before it
    /// inserts (a trigger), long enough for [`Backend::kill_inbox_inserts`] to find
    /// it running.
    fn slow_inbox_inserts(store: &Self::Store) -> BoxFuture<'_, ()>;

    /// Removes what [`Backend::slow_inbox_inserts`] added.
    fn fast_inbox_inserts(store: &Self::Store) -> BoxFuture<'_, ()>;

    /// Kills the server connections running an insert into the inbox, as a crashed
    /// or restarted server would; returns how many.
    fn kill_inbox_inserts(store: &Self::Store) -> BoxFuture<'_, usize>;

    /// The side effect: records that `event` was applied and credits `amount` to
    /// `account` (creating it at zero first), both on `conn`.
    fn apply<'c>(
        conn: &'c mut Self::Conn,
        event: &'c str,
        account: &'c str,
        amount: i64,
    ) -> BoxFuture<'c, Result<(), <Self::Store as Store>::Error>>;

    /// Runs a `SELECT … AS n` returning one BIGINT, on a pooled connection.
    fn count<'a>(store: &'a Self::Store, sql: &'a str) -> BoxFuture<'a, i64>;

    /// Runs statements on a pooled connection.
    fn exec<'a>(store: &'a Self::Store, sql: &'a str) -> BoxFuture<'a, ()>;
}

/// The store options the checks set; `None` leaves the store's default.
#[derive(Debug, Clone, Copy, Default)]
pub struct Settings {
    /// The pool's size.
    pub max_connections: Option<usize>,
    /// How many group-commit writer tasks run.
    pub group_commit_writers: Option<usize>,
}

impl Settings {
    /// The store's defaults throughout.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the pool's size.
    pub fn with_max_connections(mut self, n: usize) -> Self {
        self.max_connections = Some(n);
        self
    }

    /// Sets how many group-commit writer tasks run.
    pub fn with_group_commit_writers(mut self, n: usize) -> Self {
        self.group_commit_writers = Some(n);
        self
    }
}

/// A migrated store on a fresh schema or database of its own; the store's pool
/// closes before the scope is dropped (fields drop in order).
pub struct Fixture<B: Backend> {
    /// The store.
    pub store: B::Store,
    /// Its schema or database.
    pub scope: B::Scope,
}

/// A [`Fixture`] with `settings`, or `None` when the test must skip (see
/// [`Backend::url`]).
pub async fn fixture<B: Backend>(settings: Settings) -> Option<Fixture<B>> {
    let url = B::url().await?;
    let scope = B::scope(&url).await;
    let store = B::store(&url, B::scope_name(&scope), settings).await;
    Some(Fixture { store, scope })
}

/// What the race tests check at the end.
#[derive(Debug, PartialEq, Eq)]
pub struct Tally {
    /// Rows in `applications`.
    pub applications: i64,
    /// Distinct events in `applications`.
    pub distinct: i64,
    /// The sum of all balances.
    pub ledger: i64,
}

/// Reads the [`Tally`] of `store`'s ledger.
pub async fn tally<B: Backend>(store: &B::Store) -> Tally {
    Tally {
        applications: B::count(store, "SELECT count(*) AS n FROM applications").await,
        distinct: B::count(store, "SELECT count(DISTINCT event) AS n FROM applications").await,
        ledger: B::count(store, B::SUM_BALANCES).await,
    }
}

/// The [`Tally`] of `n` events each applied once.
pub fn exact_tally(n: usize) -> Tally {
    Tally {
        applications: n as i64,
        distinct: n as i64,
        ledger: expected_total(n),
    }
}

/// The amount event `i` credits: distinct per event, so a double apply or a loss
/// shows in the total.
pub fn amount(i: usize) -> i64 {
    i as i64 + 1
}

/// The account event `i` credits (ten accounts, so transactions contend but do not
/// all queue on one row).
pub fn account(i: usize) -> String {
    format!("acct_{}", i % 10)
}

/// The expected ledger total for events `0..n`.
pub fn expected_total(n: usize) -> i64 {
    (0..n).map(amount).sum()
}
