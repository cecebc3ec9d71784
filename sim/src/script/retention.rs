//! The retention test: how many duplicate applies get past a dedupe store whose keys
//! expire, for three retry schedules and four TTLs (no database: the store is a
//! per-event expiry time).

use std::fmt::Display;

use crate::seed::{N_EVENTS, keyed};

/// A row's figure: extra applies, or the schedule's last retry time.
pub(super) enum Cell {
    Num(i64),
    Text(String),
}

impl Display for Cell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cell::Num(n) => write!(f, "{n}"),
            Cell::Text(s) => f.write_str(s),
        }
    }
}

/// Each schedule's rows: per TTL the applies beyond one per event, then the time of
/// its last retry.
pub(super) fn retention() -> Vec<(&'static str, &'static str, Cell)> {
    const H: i64 = 3600;
    const D: i64 = 86400;
    let cum = |delays: &[i64]| {
        let mut t = 0;
        delays
            .iter()
            .map(|d| {
                t += d;
                t
            })
            .collect::<Vec<i64>>()
    };
    let schedules: [(&str, Vec<i64>); 3] = [
        (
            "Svix published schedule",
            cum(&[0, 5, 300, 1800, 2 * H, 5 * H, 10 * H, 10 * H]),
        ),
        (
            "Standard Webhooks example",
            cum(&[
                0,
                5,
                300,
                1800,
                2 * H,
                5 * H,
                10 * H,
                14 * H,
                20 * H,
                24 * H,
            ]),
        ),
        (
            "3-day window, illustrative intervals",
            vec![
                0, 60, 360, 2160, 5760, 12960, 27360, 56160, 113760, 172800, 259200,
            ],
        ),
    ];
    let ttls: [(&str, i64); 4] = [
        ("5 min", 300),
        ("24 h", D),
        ("7 days", 7 * D),
        ("30 days", 30 * D),
    ];
    const P_LOST: f64 = 0.05;
    const P_UNREACHABLE: f64 = 0.5;
    const P_MANUAL: f64 = 0.005;
    let mut rows = Vec::new();
    for (sname, offsets) in &schedules {
        let manual = sname.starts_with("3-day");
        for (tname, ttl) in ttls {
            let mut applies: i64 = 0;
            for i in 0..N_EVENTS {
                let mut expires: f64 = -1.0;
                let mut done = false;
                let mut visit = |t: f64, n: &dyn Display| {
                    if t >= expires {
                        applies += 1;
                        expires = t + ttl as f64;
                    }
                    keyed(&[&"ret", sname, &i, &n, &"lost"]) >= P_LOST
                };
                let mut n = 0;
                while n < offsets.len() && !done {
                    if n > 0 && keyed(&[&"ret", sname, &i, &n, &"down"]) < P_UNREACHABLE {
                        n += 1;
                        continue;
                    }
                    done = visit(offsets[n] as f64, &n);
                    n += 1;
                }
                if manual && keyed(&[&"ret", sname, &i, &"manual"]) < P_MANUAL {
                    let t = D as f64 + keyed(&[&"ret", sname, &i, &"manualAt"]) * 14.0 * D as f64;
                    visit(t, &"manual");
                }
            }
            rows.push((*sname, tname, Cell::Num(applies - N_EVENTS as i64)));
        }
        rows.push((
            *sname,
            "last retry at",
            Cell::Text(fmt_hms(offsets[offsets.len() - 1])),
        ));
    }
    rows
}

fn fmt_hms(sec: i64) -> String {
    let h = sec / 3600;
    let m = (sec % 3600) / 60;
    let s = sec % 60;
    format!("{h}:{m:02}:{s:02}")
}
