//! The inbox: acknowledge fast, process later.
//!
//! Providers time out fast (Shopify 5 s, GitHub 10 s). The durable path is: verify,
//! insert into an inbox table whose UNIQUE key is the dedupe key, answer 2xx, and let a
//! worker apply the side effect, marking the row processed in the same transaction.

mod admin;
mod filter;
mod row;
mod store;

pub use admin::InboxAdmin;
pub use filter::{
    BODY_SEARCH_WINDOW, DeliveryState, InboxFilter, InboxOverview, MinuteCounts, ProviderCounts,
};
pub use filter::{fill_minutes, minute_of};
pub use row::{InboxStats, Received, StoredDelivery, Worked};
pub use store::{ErasedHandler, Inbox};
