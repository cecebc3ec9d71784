#![no_main]
//! Fuzzes hookbox-core's body-key reader against its reference, `serde_json`
//! (`core/tests/common/first_wins.rs`, shared with core's own tests): for any body
//! that `serde_json` reads as a JSON object, the reader must return the same fields
//! (the first copy of a repeated key, strings decoded, numbers as written); a JSON
//! body that is not an object must be refused; any other body may be refused or read
//! up to where the scan stops, but never panics.

use hookbox_core::support::{BodyKeys, BodyValue};
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/common/first_wins.rs"]
mod first_wins;

use first_wins::{PATHS, ReadValue, assert_agrees};

const KEYS: BodyKeys = BodyKeys::new(PATHS);

fuzz_target!(|body: &[u8]| {
    let read = KEYS.read(body).map_err(|err| err.to_string()).map(|fields| {
        (0..PATHS.len())
            .map(|i| {
                fields.get(i).map(|value| match value {
                    BodyValue::Text(text) => ReadValue::Text(text.to_string()),
                    BodyValue::Number(text) => ReadValue::Number((*text).to_string()),
                })
            })
            .collect()
    });
    assert_agrees(body, read);
});
