//! Real processes: three worker processes draining one inbox, and a child that is
//! SIGKILLed with its claim uncommitted, twenty times (see
//! `hookbox_diesel_shared::testing::processes`).
#![allow(missing_docs)]

mod common;

use common::Mysql;
use hookbox_diesel_shared::testing::processes;

#[test]
fn three_worker_processes_drain_one_inbox() {
    processes::three_worker_processes_drain_one_inbox::<Mysql>("child_worker");
}

/// A worker process of `three_worker_processes_drain_one_inbox`.
#[test]
fn child_worker() {
    processes::child_worker::<Mysql>();
}

#[test]
fn sigkill_before_commit_loses_nothing_and_doubles_nothing() {
    processes::sigkill_before_commit_loses_nothing_and_doubles_nothing::<Mysql>("crash_child");
}

/// The process `sigkill_before_commit_loses_nothing_and_doubles_nothing` kills.
#[test]
fn crash_child() {
    processes::crash_child::<Mysql>();
}
