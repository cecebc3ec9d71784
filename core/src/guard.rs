//! One handler run inside a batch, guarded against panics and overruns (feature
//! `worker`): what a store calls between a row's savepoint and its release.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::task::Poll;
use std::time::Duration;

use crate::Delivery;
use crate::handler::HandlerError;
use crate::inbox::ErasedHandler;

/// How one guarded handler run ended.
#[derive(Debug)]
pub enum GuardedRun {
    /// The handler returned `Ok`: release the row's savepoint and mark it processed.
    Succeeded,
    /// The handler returned an error: roll back to the row's savepoint and record
    /// the failure; the connection is fine.
    Failed(HandlerError),
    /// The handler's future was dropped half-way (it panicked or outran its
    /// timeout). The connection may be mid-statement or inside transactions the
    /// handler opened: the store must not commit on it. It rolls the whole batch
    /// back (closing the connection) and records this failure against the row alone.
    Abandoned(Abandoned),
}

/// Why a handler was abandoned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Abandoned {
    /// The handler ran longer than the batch's row timeout.
    #[error("the handler ran longer than its timeout of {0:?}; its writes were rolled back")]
    TimedOut(Duration),
    /// The handler panicked.
    #[error("the handler panicked: {0}; its writes were rolled back")]
    Panicked(String),
}

/// Runs `handler` on `conn` for `delivery`, for at most `timeout`, catching a panic.
///
/// A panic is caught where the handler's future is polled, so the worker task
/// survives it; the future is never polled again after it panicked.
pub async fn run_guarded<C>(
    handler: &ErasedHandler<'_, C>,
    conn: &mut C,
    delivery: &Delivery,
    timeout: Duration,
) -> GuardedRun {
    let mut future = handler(conn, delivery);
    let caught = std::future::poll_fn(|cx| {
        match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(result)) => Poll::Ready(Ok(result)),
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    });
    match tokio::time::timeout(timeout, caught).await {
        Ok(Ok(Ok(()))) => GuardedRun::Succeeded,
        Ok(Ok(Err(err))) => GuardedRun::Failed(err),
        Ok(Err(message)) => GuardedRun::Abandoned(Abandoned::Panicked(message)),
        Err(_elapsed) => GuardedRun::Abandoned(Abandoned::TimedOut(timeout)),
    }
}

/// The text a panic carried (`panic!("…")` gives a `&str` or a `String`).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::BoxFuture;
    use crate::{DedupeKey, KeptHeaders, VerifiedDelivery};
    use bytes::Bytes;
    use time::OffsetDateTime;

    fn delivery() -> Delivery {
        let verified = VerifiedDelivery::new(
            DedupeKey::new("src", "test", "evt_1"),
            Bytes::from_static(b"{}"),
            KeptHeaders::default(),
        );
        Delivery::received_now(verified, OffsetDateTime::now_utc())
    }

    fn boxed<'c>(
        f: impl Future<Output = Result<(), HandlerError>> + Send + 'c,
    ) -> BoxFuture<'c, Result<(), HandlerError>> {
        Box::pin(f)
    }

    #[tokio::test]
    async fn a_panicking_handler_is_abandoned_and_the_task_survives() {
        let handler: &ErasedHandler<'_, u32> = &|conn, _| {
            boxed(async move {
                *conn += 1;
                panic!("poison row");
            })
        };
        let mut conn = 0;
        let run = run_guarded(handler, &mut conn, &delivery(), Duration::from_secs(5)).await;
        let GuardedRun::Abandoned(Abandoned::Panicked(message)) = run else {
            panic!("expected a caught panic, got {run:?}");
        };
        assert_eq!(message, "poison row");
        assert_eq!(conn, 1);
    }

    #[tokio::test]
    async fn a_slow_handler_is_abandoned_at_its_timeout() {
        let handler: &ErasedHandler<'_, u32> = &|_, _| {
            boxed(async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(())
            })
        };
        let run = run_guarded(handler, &mut 0, &delivery(), Duration::from_millis(20)).await;
        assert!(matches!(
            run,
            GuardedRun::Abandoned(Abandoned::TimedOut(t)) if t == Duration::from_millis(20)
        ));
    }

    #[tokio::test]
    async fn errors_and_successes_pass_through() {
        let fails: &ErasedHandler<'_, u32> =
            &|_, _| boxed(async { Err(HandlerError::new("declined")) });
        let run = run_guarded(fails, &mut 0, &delivery(), Duration::from_secs(5)).await;
        assert!(matches!(run, GuardedRun::Failed(err) if err.to_string() == "declined"));
        let works: &ErasedHandler<'_, u32> = &|_, _| boxed(async { Ok(()) });
        let run = run_guarded(works, &mut 0, &delivery(), Duration::from_secs(5)).await;
        assert!(matches!(run, GuardedRun::Succeeded));
    }
}
