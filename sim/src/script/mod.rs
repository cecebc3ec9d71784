//! The script's single-process run, what [`run`](crate::run) prints: the handlers on
//! in-memory SQLite, the traces, the retention test, the crash test on a file and the
//! sender's jitter, each section computed on its own thread and printed in the
//! script's order.

mod crash;
mod db;
mod handlers;
mod jitter;
mod retention;

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::time::{Duration, Instant};

use crash::crash_test;
use handlers::{HANDLERS, HandlerResult, run_handler};
use jitter::{JitterRow, jitter};
use retention::{Cell, retention};

use crate::meta::RunMeta;
use crate::seed::{
    Event, Kind, N_ACCOUNTS, N_EVENTS, P_ACK_LOST, P_CONCURRENT, P_DUPLICATE, P_SHUFFLE, SEED,
    SHUFFLE_WINDOW, Stream,
};
use crate::table::{
    CrashRow, crash_label, lpad, pad, write_crash_header, write_crash_row, write_handler_header,
    write_handler_row,
};

/// What one independent section of the run computed.
enum Section {
    Handler(HandlerResult),
    Retention(Vec<(&'static str, &'static str, Cell)>),
    Crash(CrashRow),
    Jitter(Vec<JitterRow>),
}

type Job<'a> = Box<dyn FnOnce() -> io::Result<Section> + Send + 'a>;

/// Runs `jobs` on as many threads as the machine has cores; returns each job's
/// result and elapsed time, in the order given. Jobs are started from the last one
/// back, so the crash tests, the longest (they wait on the file system), start
/// first and the short handler runs fill in around them.
fn run_parallel(jobs: Vec<Job<'_>>) -> Vec<(io::Result<Section>, Duration)> {
    use std::sync::{Mutex, PoisonError};
    let n = jobs.len();
    let threads = std::thread::available_parallelism()
        .map_or(1, |c| c.get())
        .clamp(1, n.max(1));
    let queue = Mutex::new(jobs.into_iter().enumerate().collect::<VecDeque<_>>());
    let done = Mutex::new(Vec::with_capacity(n));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let next = queue
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .pop_back();
                    let Some((i, job)) = next else { break };
                    let t0 = Instant::now();
                    let result = job();
                    let elapsed = t0.elapsed();
                    done.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((i, result, elapsed));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(PoisonError::into_inner);
    done.sort_by_key(|(i, _, _)| *i);
    done.into_iter().map(|(_, r, t)| (r, t)).collect()
}

/// Runs the whole simulation and prints what `webhook-sim.mjs` prints.
///
/// # Errors
/// Writing to `out` failed, or SQLite did.
pub fn run(out: &mut impl Write, meta: &RunMeta) -> io::Result<()> {
    run_timed(out, meta).map(|_| ())
}

/// [`run`], returning the elapsed time of each section (events and groups, each
/// handler, retention, each crash design, jitter), in order.
///
/// # Errors
/// Writing to `out` failed, or SQLite did.
pub fn run_timed(out: &mut impl Write, meta: &RunMeta) -> io::Result<Vec<(String, Duration)>> {
    let mut timings = Vec::new();
    let t0 = Instant::now();
    writeln!(out, "webhook-sim (simulation, synthetic data)")?;
    writeln!(out, "seed: {SEED}")?;
    writeln!(out, "runtime: {}", meta.runtime)?;
    writeln!(out, "sqlite: {}", meta.sqlite)?;
    writeln!(out, "machine: {}", meta.machine)?;
    writeln!(out, "run date: {}", meta.run_date)?;

    let stream = Stream::new(N_EVENTS);
    let (events, groups) = (&stream.events, &stream.groups);
    let ties = events.iter().filter(|e| e.tie).count();
    let n_credit = events.iter().filter(|e| e.kind == Kind::Credit).count();
    let n_plan = events.iter().filter(|e| e.kind == Kind::Plan).count();
    writeln!(
        out,
        "events: {} ({n_credit} credit, {n_plan} plan), accounts: {N_ACCOUNTS}, same-second plan pairs: {ties}",
        events.len()
    )?;
    writeln!(
        out,
        "chances per delivery: duplicate {P_DUPLICATE}, response lost after commit {P_ACK_LOST}, concurrent redelivery {P_CONCURRENT}, shuffled {P_SHUFFLE} (window {SHUFFLE_WINDOW})"
    )?;

    // Traced event: first credit event with a concurrent pair, else the credit event
    // with the most scheduled deliveries.
    let mut per_event: HashMap<usize, u32> = HashMap::new();
    for g in groups {
        *per_event.entry(g.event).or_insert(0) += g.copies;
    }
    let trace = match groups
        .iter()
        .find(|g| g.copies == 2 && events[g.event].kind == Kind::Credit)
    {
        Some(g) => &events[g.event],
        None => {
            let mut credits: Vec<&Event> =
                events.iter().filter(|e| e.kind == Kind::Credit).collect();
            credits.sort_by(|a, b| per_event[&b.idx].cmp(&per_event[&a.idx]));
            credits[0]
        }
    };

    // Traced tie: the first same-second pair whose newer update arrived first.
    let mut pos: HashMap<usize, usize> = HashMap::new();
    for (i, g) in groups.iter().enumerate() {
        pos.entry(g.event).or_insert(i);
    }
    let reversed: Vec<&Event> = events
        .iter()
        .filter(|e| e.tie && pos[&e.idx] < pos[&(e.idx - 1)])
        .collect();
    let tie_trace = reversed.first().map(|e| events[e.idx - 1].id.as_str());
    timings.push(("events and delivery stream".to_string(), t0.elapsed()));

    // every section below is independent of the others (its own database, its own
    // draws): compute them on all cores, then print in the script's order
    let mut jobs: Vec<(String, Job<'_>)> = Vec::new();
    for name in HANDLERS {
        let (stream, trace) = (&stream, &trace.id);
        jobs.push((
            format!("handler {name}"),
            Box::new(move || run_handler(name, stream, trace, tie_trace).map(Section::Handler)),
        ));
    }
    jobs.push((
        "retention".into(),
        Box::new(|| Ok(Section::Retention(retention()))),
    ));
    for (label, split) in [("crash split", true), ("crash atomic", false)] {
        jobs.push((
            label.into(),
            Box::new(move || crash_test(split).map(Section::Crash)),
        ));
    }
    jobs.push(("jitter".into(), Box::new(|| Ok(Section::Jitter(jitter())))));
    let mut results = Vec::new();
    let mut retention_rows = Vec::new();
    let mut crashes = Vec::new();
    let mut jitter_rows = Vec::new();
    let (labels, jobs): (Vec<String>, Vec<Job<'_>>) = jobs.into_iter().unzip();
    for (label, (section, elapsed)) in labels.into_iter().zip(run_parallel(jobs)) {
        timings.push((label, elapsed));
        match section? {
            Section::Handler(r) => results.push(r),
            Section::Retention(rows) => retention_rows = rows,
            Section::Crash(r) => crashes.push(r),
            Section::Jitter(rows) => jitter_rows = rows,
        }
    }

    writeln!(out, "\n== handlers (simulation)")?;
    write_handler_header(out)?;
    for r in &results {
        write_handler_row(out, &r.row)?;
    }

    writeln!(
        out,
        "\n== traced event {}: add {} credits to acct_{:04}",
        trace.id, trace.amount, trace.acct
    )?;
    for r in results.iter().take(3) {
        writeln!(out, "{}: applied {}x", r.row.name, r.traced_applied)?;
        for l in &r.log {
            writeln!(out, "  {l}")?;
        }
    }

    writeln!(
        out,
        "\n== same-second pairs delivered newer-first: {} of {ties}",
        reversed.len()
    )?;
    if let Some(e) = reversed.first() {
        let older = &events[e.idx - 1];
        writeln!(
            out,
            "example acct_{:04}: {} sets plan_v{}, {} sets plan_v{}, both created {}; arrival order {} then {}",
            e.acct, older.id, older.version, e.id, e.version, e.created, e.id, older.id
        )?;
        for r in &results {
            // `plan_v${r.tieAfter}`: JavaScript prints "undefined" when it was never set
            let after = r
                .tie_after
                .map_or_else(|| "undefined".to_string(), |v| v.to_string());
            writeln!(out, "  {}: plan_v{after} after both arrived", r.row.name)?;
        }
    }

    writeln!(
        out,
        "\n== retention: duplicate applies that got past the dedupe store (simulation)"
    )?;
    writeln!(
        out,
        "chances: response lost after processing 0.05 per attempt, later attempt unreachable 0.5, manual resend 0.005 (3-day row only, 1 to 15 days later)"
    )?;
    for (s, t, n) in retention_rows {
        writeln!(out, "{}{}{}", pad(s, 38), pad(t, 15), lpad(n, 8))?;
    }

    writeln!(
        out,
        "\n== crash after dedupe insert, before side effect (simulation, file-backed SQLite, chance 0.01 per delivery)"
    )?;
    write_crash_header(out)?;
    for (split, r) in [true, false].into_iter().zip(crashes) {
        write_crash_row(out, crash_label(split), &r)?;
    }

    writeln!(
        out,
        "\n== sender retries: 1,000 failed deliveries, receiver back at t=300 s (simulation)"
    )?;
    for r in jitter_rows {
        writeln!(
            out,
            "{} attempts {}, peak per second after recovery {}, last delivered at t={} s",
            pad(r.mode, 26),
            r.attempts,
            r.peak_after,
            r.last_ok
        )?;
    }
    Ok(timings)
}
