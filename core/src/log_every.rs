//! [`LogEvery`]: at most one log line per interval for an event that repeats while
//! an outage lasts.

use std::time::{Duration, Instant};

/// Admits one log line per interval for an event that may repeat many times a
/// second (a store or a broker that is down), and counts the events in between, so
/// an outage leaves a line every interval with how often it struck rather than a
/// line per poll.
///
/// The worker and the relay use it for transient store errors (every
/// [`LogEvery::STORE_ERRORS`]).
///
/// ```
/// use std::time::Duration;
/// use hookbox_core::LogEvery;
///
/// let mut store_errors = LogEvery::new(Duration::from_secs(10));
/// assert_eq!(store_errors.admit(), Some(1)); // the first one is logged
/// assert_eq!(store_errors.admit(), None); // within the interval: counted only
/// assert_eq!(store_errors.admit(), None);
/// // ten seconds later, `admit` returns Some(3): this one and the two in between
/// ```
#[derive(Debug, Clone)]
pub struct LogEvery {
    every: Duration,
    last: Option<Instant>,
    since_last: u64,
}

impl LogEvery {
    /// The interval the worker and the relay log transient store errors at.
    pub const STORE_ERRORS: Duration = Duration::from_secs(10);

    /// At most one line per `every`.
    pub fn new(every: Duration) -> Self {
        Self {
            every,
            last: None,
            since_last: 0,
        }
    }

    /// Counts one event. Returns `Some(n)` when a line is due (the first event, or
    /// the first one `every` after the last line), `n` being the events since the
    /// last line including this one; `None` when the caller should stay quiet.
    pub fn admit(&mut self) -> Option<u64> {
        self.since_last += 1;
        if self.last.is_some_and(|last| last.elapsed() < self.every) {
            return None;
        }
        self.last = Some(Instant::now());
        Some(std::mem::take(&mut self.since_last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_count_in_between() {
        let mut log = LogEvery::new(Duration::from_millis(50));
        assert_eq!(log.admit(), Some(1));
        assert_eq!(log.admit(), None);
        assert_eq!(log.admit(), None);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(log.admit(), Some(3));
        assert_eq!(log.admit(), None);
    }
}
