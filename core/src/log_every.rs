//! [`LogEvery`]: at most one log line per interval for an event that repeats while
//! an outage lasts.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Lets one log line through per interval for an event that may repeat many times a
/// second (a store or a broker that is down) and counts the ones it held back, so an
/// outage leaves a line every interval with how often it struck rather than a line
/// per poll or per request.
///
/// Shared by reference (`&self`, and `const`-constructible for a `static`): the edge
/// keeps one for the whole process, the worker and the relay one per loop. All three
/// use it for transient store errors, every [`LogEvery::STORE_ERRORS`].
///
/// ```
/// use std::time::{Duration, Instant};
/// use hookbox_core::LogEvery;
///
/// let store_errors = LogEvery::new(Duration::from_secs(10));
/// let start = Instant::now();
/// assert_eq!(store_errors.due_at(start), Some(0)); // the first one is logged
/// assert_eq!(store_errors.due_at(start + Duration::from_secs(1)), None); // held back
/// assert_eq!(store_errors.due_at(start + Duration::from_secs(9)), None);
/// // ten seconds on: logged, with the two held back since
/// assert_eq!(store_errors.due_at(start + Duration::from_secs(10)), Some(2));
/// ```
#[derive(Debug)]
pub struct LogEvery {
    interval: Duration,
    last: Mutex<Option<Instant>>,
    held_back: AtomicU64,
}

impl LogEvery {
    /// The interval the edge, the worker and the relay log transient store errors at.
    pub const STORE_ERRORS: Duration = Duration::from_secs(10);

    /// At most one line per `interval`.
    pub const fn new(interval: Duration) -> Self {
        Self {
            interval,
            last: Mutex::new(None),
            held_back: AtomicU64::new(0),
        }
    }

    /// The interval between two lines.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// [`LogEvery::due_at`] now.
    pub fn due(&self) -> Option<u64> {
        self.due_at(Instant::now())
    }

    /// Counts one event at `now`. Returns `Some(n)` when a line is due (the first
    /// event, or the first one `interval` after the last line), `n` being how many
    /// events were held back since the last line; `None`, counting this one as held
    /// back, when the caller should stay quiet.
    pub fn due_at(&self, now: Instant) -> Option<u64> {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.is_some_and(|at| now.saturating_duration_since(at) < self.interval) {
            self.held_back.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *last = Some(now);
        Some(self.held_back.swap(0, Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_count_held_back() {
        let limit = LogEvery::new(Duration::from_secs(10));
        let start = Instant::now();
        assert_eq!(limit.due_at(start), Some(0));
        assert_eq!(limit.due_at(start + Duration::from_secs(1)), None);
        assert_eq!(limit.due_at(start + Duration::from_secs(9)), None);
        assert_eq!(limit.due_at(start + Duration::from_secs(10)), Some(2));
        assert_eq!(limit.due_at(start + Duration::from_secs(11)), None);
        assert_eq!(limit.due_at(start + Duration::from_secs(25)), Some(1));
    }
}
