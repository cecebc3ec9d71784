//! The run-metadata lines the script prints after `seed:` (runtime, SQLite version,
//! machine, run date): the only lines that differ from the published output.

use hookbox_sqlite::diesel::prelude::*;
use hookbox_sqlite::diesel::sql_types::Text;
use hookbox_sqlite::diesel::{self, QueryableByName, SqliteConnection};

/// The run-metadata lines the script prints after `seed:`; the comparison with the
/// published output ignores them.
#[derive(Debug, Clone)]
pub struct RunMeta {
    /// The runtime (the script prints `node: v24.20.0`).
    pub runtime: String,
    /// The SQLite library version.
    pub sqlite: String,
    /// The machine (the script prints CPU model, platform, arch).
    pub machine: String,
    /// The run date, `YYYY-MM-DD` (UTC).
    pub run_date: String,
}

impl RunMeta {
    /// Detects the metadata of this run: the crate version, SQLite's
    /// `sqlite_version()`, OS and architecture, today's UTC date.
    pub fn detect() -> Self {
        #[derive(QueryableByName)]
        struct V {
            #[diesel(sql_type = Text)]
            v: String,
        }
        let sqlite = SqliteConnection::establish(":memory:")
            .ok()
            .and_then(|mut c| {
                diesel::sql_query("SELECT sqlite_version() v")
                    .get_result::<V>(&mut c)
                    .ok()
            })
            .map_or_else(|| "unknown".to_string(), |v| v.v);
        let days = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() / 86400) as i64;
        let (y, m, d) = civil_from_days(days);
        Self {
            runtime: format!("hookbox-sim {} (Rust)", env!("CARGO_PKG_VERSION")),
            sqlite,
            machine: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            run_date: format!("{y:04}-{m:02}-{d:02}"),
        }
    }
}

/// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}
