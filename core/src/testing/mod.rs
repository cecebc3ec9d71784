//! The conformance suite every store runs (feature `testing`).
//!
//! A store crate implements [`Harness`] for its own test setup (a fresh schema or
//! file per test, plus a small ledger table the side effects write to), declares in
//! [`Harness::CAPABILITIES`] how it differs where stores may differ, and runs the
//! whole suite with one line:
//!
//! ```text
//! hookbox_core::conformance_tests!(MyHarness);
//! ```
//!
//! That is one `#[tokio::test]` per check. The checks are the exactly-once
//! properties (first claim wins, one winner among concurrent claims, a failed side
//! effect releases the claim, nothing visible before commit, retention refused below
//! a provider's minimum, …) plus the guarantees of [`IdempotencyStore`], [`VersionGuard`],
//! [`Inbox`], [`OutboxStore`], [`Purge`], [`InboxAdmin`] and [`OutboxAdmin`]; every check runs for every backend, and a capability changes what a
//! check expects (a leased row comes back when its lease expires, a row locked by a
//! transaction at once), never whether it runs. The one check a harness may leave
//! out is checklist 6, which needs a provider crate to sign with
//! ([`Harness::rotation`]). Each `check_*` function can also be called on its own.
//!
//! The checks call the store the way user code does: side effects are async
//! closures, `async |conn| { …; Ok(value) }`, and handlers are async closures or
//! `async fn`s taking `(&mut Conn, &Delivery)` (see [`credit_handler`]), all
//! returning [`HandlerError`](crate::HandlerError) on failure.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod admin;
mod batch;
mod claims;
mod fixtures;
mod inbox;
mod outbox;
mod worker;

use std::time::Duration;

use bytes::Bytes;
use time::OffsetDateTime;

use crate::{
    BoxFuture, Claim, DedupeKey, IdempotencyStore, Inbox, InboxAdmin, OutboxAdmin, OutboxStore,
    Provider, Purge, RetentionPolicy, RetryPolicy, Signer, StoreError, VerifiedDelivery,
    VersionGuard,
};

pub use admin::{
    check_admin_filters_select_and_page_rows, check_admin_matching_verbs_touch_dead_letters_only,
    check_admin_outbox_filters_and_counts_per_sink,
    check_admin_overview_counts_per_provider_and_minute,
};
pub use batch::{
    check_batch_failed_commit_applies_nothing,
    check_batch_failing_handler_costs_its_neighbours_nothing,
    check_batch_outliving_its_lease_applies_each_row_once,
    check_batch_panicking_handler_fails_its_row_only, check_batch_row_timeout_fails_the_slow_row,
    check_batch_time_budget_bounds_a_batch, check_per_row_mode_takes_one_row,
    check_version_guard_holds_under_concurrent_batches,
};
pub use claims::{
    check_claim_inside_callers_transaction, check_concurrent_copies_apply_once,
    check_day_old_replay_is_still_caught, check_failing_side_effect_releases_the_claim,
    check_keys_are_scoped_by_source_and_provider, check_purge_keeps_keys_for_the_provider_minimum,
    check_purge_uses_the_default_for_providers_without_a_rule, check_same_event_twice_applies_once,
    check_shuffled_updates_end_on_the_latest_version, check_side_effect_is_invisible_until_commit,
    check_stuck_copy_fails_transiently, check_timestamp_guard_reports_ties_as_unknown,
    check_version_guard_is_strict_and_per_object, check_version_rolls_back_with_the_transaction,
};
pub use fixtures::{
    DeliveryFacts, credit_handler, credit_once, delivery, delivery_with_facts, drain, key,
};
pub use inbox::{
    check_group_commit_refused_row_fails_only_its_caller,
    check_group_commit_stores_each_key_once_across_a_burst,
    check_inbox_keeps_correlation_id_and_signed_at, check_inbox_keeps_non_utf8_header_values,
    check_inbox_keeps_raw_bytes_and_headers, check_inbox_receive_dedupes,
    check_list_filters_and_orders_rows, check_one_handler_serves_both_modes,
    check_rotated_copies_are_one_event, check_tenant_keys_read_back_exactly,
};
pub use outbox::{
    check_outbox_dead_letter_is_kept_and_retried_on_request,
    check_outbox_expired_lease_goes_to_another_relay, check_outbox_messages_read_back_exactly,
    check_outbox_ordering_key_holds_order_across_a_failure,
    check_outbox_purge_keeps_unsent_and_dead, check_outbox_retried_handler_stages_the_same_ids,
    check_outbox_settle_many_records_each_outcome,
    check_outbox_stage_rolls_back_with_the_side_effect,
};
pub use worker::{
    check_attempts_count_failures_only, check_concurrent_workers_apply_each_row_once,
    check_last_error_keeps_the_cause_chain, check_poison_event_dead_letters_while_others_flow,
    check_replay_matching_replays_dead_letters_only,
    check_worker_killed_mid_transaction_applies_once,
};

/// How the suite wants a store configured for one check.
#[derive(Debug, Clone)]
pub struct SuiteConfig {
    /// Retention for purge checks.
    pub retention: RetentionPolicy,
    /// Retry policy for worker checks (the suite uses a zero backoff base so failed
    /// rows are due again at once).
    pub retry: RetryPolicy,
    /// How long a worker's claim on an inbox row lasts before another worker may
    /// take the row (stores that lease rows; others ignore it).
    pub lease: Duration,
    /// The longest a statement waits for a lock another transaction holds (a
    /// database's `lock_timeout`, SQLite's busy timeout).
    pub lock_timeout: Duration,
}

impl SuiteConfig {
    /// The default configuration with rows dead after `attempts` failed attempts.
    pub fn with_max_attempts(attempts: u32) -> Self {
        let default = Self::default();
        Self {
            retry: RetryPolicy {
                max_attempts: attempts,
                ..default.retry
            },
            ..default
        }
    }
}

impl Default for SuiteConfig {
    fn default() -> Self {
        Self {
            retention: RetentionPolicy::default(),
            retry: RetryPolicy {
                max_attempts: 5,
                base: Duration::ZERO,
                cap: Duration::ZERO,
            },
            lease: Duration::from_secs(1),
            // the stores' own default: long enough for every check under load
            lock_timeout: Duration::from_secs(5),
        }
    }
}

/// Where stores may differ, declared once per backend in
/// [`Harness::CAPABILITIES`]; the checks expect what the declaration says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// How an inbox row comes back after the worker that took it died mid-row.
    pub reclaim: Reclaim,
}

/// How an inbox row taken by a worker that died (its future dropped, its process
/// killed) becomes due again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reclaim {
    /// At once: the row was locked by the worker's transaction, which the database
    /// rolls back when the connection closes (PostgreSQL's `FOR UPDATE SKIP
    /// LOCKED`). The interrupted attempt leaves no trace.
    AtOnce,
    /// When the worker's lease ([`SuiteConfig::lease`]) expires, and not before
    /// (SQLite has no row locks). The interrupted attempt is counted and recorded in
    /// `last_error`, so a row that keeps killing its worker still dead-letters.
    WhenLeaseExpires,
}

/// What checklist 6 (secret rotation) needs from a provider crate, which core
/// cannot depend on: a verifier that accepts both secrets of a rotation, and a
/// signer for each ([`Harness::rotation`]).
pub struct Rotation {
    verifier: Box<dyn Provider>,
    old: Box<dyn Signer>,
    new: Box<dyn Signer>,
}

impl Rotation {
    /// Two secrets in the `whsec_<base64>` form Standard Webhooks and Svix take:
    /// the one being retired, then its successor.
    pub const SECRETS: [&'static str; 2] = [
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
    ];

    /// A rotation for a provider that takes [`Rotation::SECRETS`] as they are: its
    /// verifier built from both, a signer from each; `None` when either refuses
    /// them.
    ///
    /// ```text
    /// Rotation::from_secrets(Standard::new, StandardSigner::new)
    /// ```
    pub fn from_secrets<P, S, E, F>(
        verifier: impl FnOnce([&'static str; 2]) -> Result<P, E>,
        signer: impl Fn(&'static str) -> Result<S, F>,
    ) -> Option<Self>
    where
        P: Provider + 'static,
        S: Signer + 'static,
    {
        let [old, new] = Self::SECRETS;
        Some(Self::new(
            verifier([old, new]).ok()?,
            signer(old).ok()?,
            signer(new).ok()?,
        ))
    }

    /// A rotation from `verifier` (accepting both secrets) and a signer per secret.
    pub fn new(
        verifier: impl Provider + 'static,
        old: impl Signer + 'static,
        new: impl Signer + 'static,
    ) -> Self {
        Self {
            verifier: Box::new(verifier),
            old: Box::new(old),
            new: Box::new(new),
        }
    }

    /// Signs one delivery with each secret, as a sender does while it rotates, and
    /// verifies both copies.
    pub fn copies(&self, id: &str, body: &'static [u8]) -> (VerifiedDelivery, VerifiedDelivery) {
        let now = OffsetDateTime::now_utc();
        let verify = |signer: &dyn Signer| {
            let headers = signer.sign(id, now.unix_timestamp(), body).to_header_map();
            self.verifier
                .verify(&headers, Bytes::from_static(body), now)
                .expect("a copy signed with either secret verifies")
        };
        (verify(&*self.old), verify(&*self.new))
    }
}

impl std::fmt::Debug for Rotation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rotation")
            .field("provider", &self.verifier.name())
            .finish_non_exhaustive()
    }
}

/// A store under test, with a ledger its side effects write to.
///
/// The ledger is one table `(account TEXT PRIMARY KEY, balance BIGINT NOT NULL
/// DEFAULT 0, plan TEXT)` in the same database as the store, so that side effects
/// commit or roll back with the claim.
pub trait Harness: Send + Sync + Sized + 'static {
    /// The connection side effects run on.
    type Conn: Send;
    /// The store's error.
    type Error: StoreError;
    /// The store: every store trait over one connection type, with its retention
    /// and its operator's views.
    type Store: IdempotencyStore<Conn = Self::Conn, Error = Self::Error>
        + VersionGuard
        + Inbox
        + OutboxStore
        + Purge
        + InboxAdmin
        + OutboxAdmin
        + 'static;

    /// Where this backend differs from others the suite allows for.
    const CAPABILITIES: Capabilities;

    /// Returns `false` when the backend's server is not there and the checks should
    /// pass without running (the harness prints why, and fails instead where the
    /// environment requires the server). Default: always there.
    fn available() -> BoxFuture<'static, bool> {
        Box::pin(async { true })
    }

    /// The provider and signers checklist 6 signs with; `None` skips that one check
    /// (printing so), for a harness whose crate has no provider to build deliveries
    /// with. Default: `None`.
    fn rotation() -> Option<Rotation> {
        None
    }

    /// Builds a fresh, isolated store (its own schema or file) with `config`, with
    /// migrations applied and an empty ledger.
    fn setup(config: SuiteConfig) -> BoxFuture<'static, Self>;

    /// Returns the store.
    fn store(&self) -> &Self::Store;

    /// The side effect: adds `amount` to `account` on `conn` (inside the claim's
    /// transaction), creating the account at zero first if needed.
    fn credit<'c>(
        conn: &'c mut Self::Conn,
        account: &'c str,
        amount: i64,
    ) -> BoxFuture<'c, Result<(), Self::Error>>;

    /// The side effect: sets `account`'s plan on `conn`.
    fn set_plan<'c>(
        conn: &'c mut Self::Conn,
        account: &'c str,
        plan: &'c str,
    ) -> BoxFuture<'c, Result<(), Self::Error>>;

    /// Reads a balance on a separate connection (committed state only); 0 when the
    /// account does not exist.
    fn balance<'a>(&'a self, account: &'a str) -> BoxFuture<'a, Result<i64, Self::Error>>;

    /// Reads a plan on a separate connection.
    fn plan<'a>(&'a self, account: &'a str) -> BoxFuture<'a, Result<Option<String>, Self::Error>>;

    /// Makes the database refuse the inbox row of `delivery_id` (a trigger that
    /// raises on its insert), as a row too large or breaking a constraint would be:
    /// the group-commit checks show that one refused row fails its caller only.
    fn refuse_inbox_row<'a>(&'a self, delivery_id: &'a str) -> BoxFuture<'a, ()>;

    /// Makes the commit of every transaction that credited `account` fail (a
    /// deferred constraint, checked at commit): the batch checks show that a failed
    /// commit applies no row of its batch.
    fn fail_commits_crediting<'a>(&'a self, account: &'a str) -> BoxFuture<'a, ()>;

    /// The caller-owned form: begins a transaction itself, calls
    /// [`IdempotencyStore::claim`] inside it, credits `amount` to `account` when the
    /// claim is new, and commits.
    fn claim_in_own_transaction<'a>(
        &'a self,
        key: &'a DedupeKey,
        account: &'a str,
        amount: i64,
    ) -> BoxFuture<'a, Result<Claim, Self::Error>>;
}

/// Generates one `#[tokio::test]` per check of the suite for a [`Harness`] type
/// (in a module `conformance_suite`); each returns at once when
/// [`Harness::available`] says the backend is not there.
///
/// ```text
/// hookbox_core::conformance_tests!(MyHarness);
/// ```
#[macro_export]
macro_rules! conformance_tests {
    (@each $harness:ty; $($name:ident => $check:ident($($arg:expr),*);)*) => {
        mod conformance_suite {
            use super::*;

            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    if !<$harness as $crate::testing::Harness>::available().await {
                        return;
                    }
                    $crate::testing::$check::<$harness>($($arg),*).await;
                }
            )*
        }
    };
    ($harness:ty) => {
        $crate::conformance_tests!(@each $harness;
            same_event_twice_applies_once => check_same_event_twice_applies_once();
            keys_are_scoped_by_source_and_provider => check_keys_are_scoped_by_source_and_provider();
            concurrent_copies_apply_once => check_concurrent_copies_apply_once(16);
            claim_inside_callers_transaction => check_claim_inside_callers_transaction();
            failing_side_effect_releases_the_claim => check_failing_side_effect_releases_the_claim();
            side_effect_is_invisible_until_commit => check_side_effect_is_invisible_until_commit();
            stuck_copy_fails_transiently => check_stuck_copy_fails_transiently();
            shuffled_updates_end_on_the_latest_version => check_shuffled_updates_end_on_the_latest_version();
            timestamp_guard_reports_ties_as_unknown => check_timestamp_guard_reports_ties_as_unknown();
            version_guard_is_strict_and_per_object => check_version_guard_is_strict_and_per_object();
            version_rolls_back_with_the_transaction => check_version_rolls_back_with_the_transaction();
            day_old_replay_is_still_caught => check_day_old_replay_is_still_caught();
            purge_keeps_keys_for_the_provider_minimum => check_purge_keeps_keys_for_the_provider_minimum();
            purge_uses_the_default_for_providers_without_a_rule => check_purge_uses_the_default_for_providers_without_a_rule();
            rotated_copies_are_one_event => check_rotated_copies_are_one_event();
            inbox_receive_dedupes => check_inbox_receive_dedupes(16);
            inbox_keeps_raw_bytes_and_headers => check_inbox_keeps_raw_bytes_and_headers();
            inbox_keeps_non_utf8_header_values => check_inbox_keeps_non_utf8_header_values();
            inbox_keeps_correlation_id_and_signed_at => check_inbox_keeps_correlation_id_and_signed_at();
            tenant_keys_read_back_exactly => check_tenant_keys_read_back_exactly();
            list_filters_and_orders_rows => check_list_filters_and_orders_rows();
            admin_filters_select_and_page_rows => check_admin_filters_select_and_page_rows();
            admin_overview_counts_per_provider_and_minute => check_admin_overview_counts_per_provider_and_minute();
            admin_matching_verbs_touch_dead_letters_only => check_admin_matching_verbs_touch_dead_letters_only();
            admin_outbox_filters_and_counts_per_sink => check_admin_outbox_filters_and_counts_per_sink();
            one_handler_serves_both_modes => check_one_handler_serves_both_modes();
            poison_event_dead_letters_while_others_flow => check_poison_event_dead_letters_while_others_flow();
            replay_matching_replays_dead_letters_only => check_replay_matching_replays_dead_letters_only();
            attempts_count_failures_only => check_attempts_count_failures_only();
            last_error_keeps_the_cause_chain => check_last_error_keeps_the_cause_chain();
            worker_killed_mid_transaction_applies_once => check_worker_killed_mid_transaction_applies_once();
            concurrent_workers_apply_each_row_once => check_concurrent_workers_apply_each_row_once(200, 4);
            batch_failing_handler_costs_its_neighbours_nothing => check_batch_failing_handler_costs_its_neighbours_nothing();
            batch_panicking_handler_fails_its_row_only => check_batch_panicking_handler_fails_its_row_only();
            batch_row_timeout_fails_the_slow_row => check_batch_row_timeout_fails_the_slow_row();
            batch_time_budget_bounds_a_batch => check_batch_time_budget_bounds_a_batch();
            batch_failed_commit_applies_nothing => check_batch_failed_commit_applies_nothing();
            batch_outliving_its_lease_applies_each_row_once => check_batch_outliving_its_lease_applies_each_row_once();
            version_guard_holds_under_concurrent_batches => check_version_guard_holds_under_concurrent_batches();
            per_row_mode_takes_one_row => check_per_row_mode_takes_one_row();
            group_commit_stores_each_key_once_across_a_burst => check_group_commit_stores_each_key_once_across_a_burst(8, 4);
            group_commit_refused_row_fails_only_its_caller => check_group_commit_refused_row_fails_only_its_caller(16);
            outbox_stage_rolls_back_with_the_side_effect => check_outbox_stage_rolls_back_with_the_side_effect();
            outbox_retried_handler_stages_the_same_ids => check_outbox_retried_handler_stages_the_same_ids();
            outbox_expired_lease_goes_to_another_relay => check_outbox_expired_lease_goes_to_another_relay();
            outbox_ordering_key_holds_order_across_a_failure => check_outbox_ordering_key_holds_order_across_a_failure();
            outbox_dead_letter_is_kept_and_retried_on_request => check_outbox_dead_letter_is_kept_and_retried_on_request();
            outbox_purge_keeps_unsent_and_dead => check_outbox_purge_keeps_unsent_and_dead();
            outbox_messages_read_back_exactly => check_outbox_messages_read_back_exactly();
            outbox_settle_many_records_each_outcome => check_outbox_settle_many_records_each_outcome();
        );
    };
}
