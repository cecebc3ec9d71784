//! The crash test on a file: the process dies after the dedupe insert and before the
//! side effect (the connection closes and a new one opens), once with the key
//! committed on its own and once with key and side effect in one transaction.

use std::collections::VecDeque;
use std::io;
use std::path::PathBuf;

use hookbox_sqlite::diesel::QueryResult;
use hookbox_sqlite::diesel::connection::SimpleConnection as _;

use super::db;
use crate::error::failed;
use crate::seed::{N_ACCOUNTS, keyed};
use crate::table::CrashRow;

/// Runs the crash test of one design (`split`: the key commits on its own) on a
/// file in a fresh temporary directory, removed afterwards.
pub(super) fn crash_test(split: bool) -> io::Result<CrashRow> {
    let dir = temp_dir("whsim-")?;
    let file = dir.join("crash.db");
    let result = match file.to_str() {
        Some(file) => crash_run(split, file).map_err(|e| failed("the crash test", &e)),
        None => Err(io::Error::other("the temporary path is not UTF-8")),
    };
    std::fs::remove_dir_all(&dir)?;
    result
}

/// A new directory under the system's temporary directory, named by `prefix`, this
/// process and a counter.
fn temp_dir(prefix: &str) -> io::Result<PathBuf> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!(
        "{prefix}{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The script's `crashTest(split)` on the SQLite file `file`.
fn crash_run(split: bool, file: &str) -> QueryResult<CrashRow> {
    let mut db = db::fresh_db(file)?;
    const N: i64 = 2000;
    const P_CRASH: f64 = 0.01;
    let mut crashes = 0;
    let mut queue: VecDeque<(String, i32, u32)> = (0..N)
        .map(|i| (format!("evt_c{i:05}"), (i % N_ACCOUNTS as i64) as i32, 1))
        .collect();
    while let Some((id, acct, n)) = queue.pop_front() {
        let crash = keyed(&[&"crash", &id, &n]) < P_CRASH;
        let new = if split {
            // the dedupe row commits on its own; a key already there is acked
            !db::sql_seen(&mut db, &id)? && db::sql_mark(&mut db, &id)? == 1
        } else {
            db.batch_execute("BEGIN IMMEDIATE")?;
            let new = db::sql_claim(&mut db, &id)? == 1;
            if !new {
                db.batch_execute("COMMIT")?;
            }
            new
        };
        if !new {
            continue;
        }
        if crash {
            crashes += 1;
            // the process dies: the connection closes (discarding an open
            // transaction, so the atomic design's key with it), a new one opens
            drop(db);
            db = db::fresh_db(file)?;
            queue.push_back((id, acct, n + 1));
            continue;
        }
        db::sql_credit(&mut db, 100, acct)?;
        db::sql_applied(&mut db, &id)?;
        if !split {
            db.batch_execute("COMMIT")?;
        }
    }
    let applied = db::count(&mut db, "SELECT count(DISTINCT event_id) n FROM applied")?;
    let keys = db::count(&mut db, "SELECT count(*) n FROM processed_events")?;
    let ledger = db::ledger(&mut db)?;
    drop(db);
    Ok(CrashRow {
        n: N,
        crashes,
        keys,
        applied,
        lost: N - applied,
        ledger,
        expected: N * 100,
    })
}
