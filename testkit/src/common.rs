//! A leaf module the others share: the [`DEADLINE`] of every wait, and [`unique`]
//! ids.

use std::time::Duration;

/// How long any wait lasts before the test fails: generous, because CI machines are
/// slow and a deadline is only there so a broken example fails instead of hanging.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Returns a name no other test (in this run or an earlier one) uses, for delivery
/// and event ids: a Redis cache shared between runs must never see a repeated id.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}_{:016x}{:08x}",
        fastrand::u64(..),
        std::process::id()
    )
}
