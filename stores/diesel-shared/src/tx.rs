//! What the stores' transactions and operator queries have in common, whatever the
//! database.

use diesel::result::Error as DieselError;
use hookbox_core::{AnyStoreError, BoxFuture, StoreError};

/// Boxes an operator query with its error as [`AnyStoreError`]: the shape
/// [`InboxAdmin`](hookbox_core::InboxAdmin) and
/// [`OutboxAdmin`](hookbox_core::OutboxAdmin) return.
pub fn boxed_any<'a, T, E: StoreError>(
    query: impl Future<Output = Result<T, E>> + Send + 'a,
) -> BoxFuture<'a, Result<T, AnyStoreError>> {
    Box::pin(async move { query.await.map_err(AnyStoreError::new) })
}

/// What ends a transaction that runs user code (a side effect or a handler): the
/// database's error, a statement the user code let fail while returning `Ok`, or the
/// user code's own error `E`.
#[derive(Debug)]
pub enum TxError<E> {
    /// The database failed; `?` after a diesel call makes one.
    Db(DieselError),
    /// The caller returned `Ok` after a statement failed (the store's failure watch
    /// saw it): committing would silently roll back.
    StatementFailed,
    /// The user code failed.
    User(E),
}

impl<E> From<DieselError> for TxError<E> {
    fn from(err: DieselError) -> Self {
        Self::Db(err)
    }
}
