//! The sim's one error type is `io::Error` (writing the tables is I/O too): a failed
//! step says what it was doing and carries its cause's whole chain in the message.

use std::error::Error;
use std::io;

use hookbox_core::error_chain;

/// An I/O error for the step `context` that failed with `err` (and its causes, the
/// driver's message at the bottom).
pub(crate) fn failed(context: &str, err: &(dyn Error + 'static)) -> io::Error {
    io::Error::other(format!("{context}: {}", error_chain(err)))
}
