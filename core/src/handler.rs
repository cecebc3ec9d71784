//! What user code hands hookbox: side effects and handlers, written as async closures.
//!
//! Every place that runs your code takes the same shape, the one diesel-async 0.9
//! takes in `transaction`:
//!
//! - a **side effect** for [`process_once`](crate::IdempotencyStore::process_once):
//!   `async |conn| { …; Ok(value) }`;
//! - a **handler** for an inline endpoint or the inbox worker:
//!   `async |conn, delivery| { …; Ok(()) }`, or an `async fn(&mut Conn, &Delivery)`.
//!
//! Both return `Result<_, HandlerError>`, so `?` works on any error type and no
//! turbofish is needed. The connection is the store's, inside the transaction that
//! claims the key (or marks the inbox row processed): write with it and your writes
//! commit with the claim or not at all.
//!
//! The two traits below are implemented for every closure of those shapes; you never
//! implement them yourself. They exist because the future an async closure returns
//! cannot be named on stable Rust, and the worker and the HTTP edge need it to be
//! `Send` (diesel-async solves the same problem the same way).

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;

use crate::Delivery;

/// The error a side effect or a handler returns: any error, boxed.
///
/// `?` converts every `std::error::Error + Send + Sync` (and `String`, `&str`) into
/// it, which is why handlers need no error turbofish. It keeps the cause chain:
/// `{}` prints the error, `{:#}` the error and its causes joined by `: `.
///
/// It deliberately does not implement [`std::error::Error`] itself (as `anyhow::Error`
/// does not): that is what makes the blanket `From` possible. Use
/// [`HandlerError::as_error`] or [`HandlerError::into_inner`] where a `dyn Error` is
/// wanted.
pub struct HandlerError(Box<dyn StdError + Send + Sync>);

impl HandlerError {
    /// Wraps `error`.
    pub fn new(error: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        Self(error.into())
    }

    /// Returns the error as a `dyn Error`, for its `source()` chain.
    pub fn as_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.0
    }

    /// Returns the boxed error.
    pub fn into_inner(self) -> Box<dyn StdError + Send + Sync> {
        self.0
    }

    /// Returns the error as `T` when it is one, to match on your own error type.
    pub fn downcast_ref<T: StdError + 'static>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl<E: Into<Box<dyn StdError + Send + Sync>>> From<E> for HandlerError {
    fn from(error: E) -> Self {
        Self(error.into())
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            write_chain(f, self.as_error())
        } else {
            fmt::Display::fmt(&self.0, f)
        }
    }
}

impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// Writes `error` and each of its causes, joined by `: ` (the text a worker keeps in
/// `last_error` and an operator reads).
///
/// # Errors
/// The formatter failed.
pub fn write_chain(f: &mut impl fmt::Write, error: &(dyn StdError + 'static)) -> fmt::Result {
    write!(f, "{error}")?;
    let mut cause = error.source();
    while let Some(err) = cause {
        write!(f, ": {err}")?;
        cause = err.source();
    }
    Ok(())
}

/// Returns `error` and each of its causes, joined by `: `.
pub fn error_chain(error: &(dyn StdError + 'static)) -> String {
    let mut text = String::new();
    // writing into a String cannot fail
    let _ = write_chain(&mut text, error);
    text
}

/// Names the future of a one-argument async closure called once, so a bound can ask
/// for it to be `Send`. Implemented for every such closure; plumbing for
/// [`SideEffect`].
pub trait SideEffectFuture<C, T>: FnOnce(C) -> <Self as SideEffectFuture<C, T>>::Fut {
    /// The future the closure returns.
    type Fut: Future<Output = Result<T, HandlerError>>;
}

impl<F, C, T, Fut> SideEffectFuture<C, T> for F
where
    F: FnOnce(C) -> Fut,
    Fut: Future<Output = Result<T, HandlerError>>,
{
    type Fut = Fut;
}

/// A side effect for [`process_once`](crate::IdempotencyStore::process_once):
/// `async |conn| { …; Ok(value) }`, run once on the claim's connection inside its
/// transaction.
///
/// Implemented for every async closure (or `async fn`) of that shape whose future is
/// `Send`. It may borrow from its surroundings (the delivery, your state).
pub trait SideEffect<C, T>:
    for<'c> AsyncFnOnce(&'c mut C) -> Result<T, HandlerError>
    + for<'c> SideEffectFuture<&'c mut C, T, Fut: Send>
    + Send
{
}

impl<F, C, T> SideEffect<C, T> for F where
    F: for<'c> AsyncFnOnce(&'c mut C) -> Result<T, HandlerError>
        + for<'c> SideEffectFuture<&'c mut C, T, Fut: Send>
        + Send
{
}

/// Names the future of a two-argument async closure called once, so a bound can ask
/// for it to be `Send`. Implemented for every such closure; plumbing for [`Handler`].
pub trait HandlerFuture<C, D>: FnOnce(C, D) -> <Self as HandlerFuture<C, D>>::Fut {
    /// The future the closure returns.
    type Fut: Future<Output = Result<(), HandlerError>>;
}

impl<F, C, D, Fut> HandlerFuture<C, D> for F
where
    F: FnOnce(C, D) -> Fut,
    Fut: Future<Output = Result<(), HandlerError>>,
{
    type Fut = Fut;
}

/// A delivery handler: `async |conn, delivery| { …; Ok(()) }` or an
/// `async fn(&mut Conn, &Delivery) -> Result<(), HandlerError>`.
///
/// The same handler serves an inline endpoint (`Webhook::inline` in `hookbox-axum`)
/// and the inbox worker (`run_worker`, feature `worker`), since both hand it the
/// same [`Delivery`]: moving from one mode to the other is one line.
///
/// Implemented for every async closure or `async fn` of that shape that is `Clone`
/// (each call runs on a fresh clone, so a `move` closure may own its state: put what
/// is not `Clone` in an `Arc`). An error rolls back the handler's writes.
pub trait Handler<C>:
    for<'c, 'd> AsyncFnOnce(&'c mut C, &'d Delivery) -> Result<(), HandlerError>
    + for<'c, 'd> HandlerFuture<&'c mut C, &'d Delivery, Fut: Send>
    + Clone
    + Send
    + Sync
{
    /// Runs the handler once on `conn` for `delivery`.
    fn handle<'a>(
        &self,
        conn: &'a mut C,
        delivery: &'a Delivery,
    ) -> <Self as HandlerFuture<&'a mut C, &'a Delivery>>::Fut {
        (self.clone())(conn, delivery)
    }
}

impl<F, C> Handler<C> for F where
    F: for<'c, 'd> AsyncFnOnce(&'c mut C, &'d Delivery) -> Result<(), HandlerError>
        + for<'c, 'd> HandlerFuture<&'c mut C, &'d Delivery, Fut: Send>
        + Clone
        + Send
        + Sync
{
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn any_error_converts_and_the_chain_is_kept() {
        let err: HandlerError = Outer(std::io::Error::other("inner")).into();
        assert_eq!(err.to_string(), "outer");
        assert_eq!(format!("{err:#}"), "outer: inner");
        assert!(err.downcast_ref::<Outer>().is_some());
        let text: HandlerError = "no type".into();
        assert_eq!(format!("{text:#}"), "no type");
    }
}
