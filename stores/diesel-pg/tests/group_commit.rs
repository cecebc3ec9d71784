//! Group commit on PostgreSQL when a batch's statement dies with its connection:
//! no caller of that batch is answered `Stored`, nothing of it is half-stored, and
//! the senders' retries are stored. (The conformance suite checks bursts and a
//! refused row on every backend.)
#![allow(missing_docs)]

mod common;

use common::Pg;
use hookbox_diesel_shared::testing::group_commit::{
    a_batch_whose_connection_dies_answers_no_caller_stored_and_stores_nothing_of_it as batch_killed,
    one_writer_stores_each_key_of_a_burst_once as one_writer,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_whose_connection_dies_answers_no_caller_stored_and_stores_nothing_of_it() {
    batch_killed::<Pg>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_writer_stores_each_key_of_a_burst_once() {
    one_writer::<Pg>().await;
}
