//! Helpers shared by the integration tests.

pub mod serde_event;
