//! Eight bytes at a time, for the decoder's fast path.

/// Up to eight bytes as a little-endian number, for an eight-byte store.
#[inline]
pub(crate) fn pack(bytes: &[u8]) -> u64 {
    match bytes.first_chunk::<8>() {
        Some(first) => u64::from_le_bytes(*first),
        None => bytes
            .iter()
            .rev()
            .fold(0, |word, &byte| (word << 8) | u64::from(byte)),
    }
}

/// The eight bytes of `body` from `at`, zeros past its end (a zero is none of the
/// bytes searched for).
#[inline]
pub(crate) fn load(body: &[u8], at: usize) -> u64 {
    match body.get(at..at + 8) {
        Some(word) => u64::from_le_bytes(word.try_into().expect("8 bytes")),
        None => {
            let mut word = [0u8; 8];
            let rest = &body[at..];
            word[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(word)
        }
    }
}

const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// Sets the high bit of exactly the bytes of `word` equal to `byte` (no carry crosses
/// a byte: each byte's low seven bits plus 0x7f stay below 0x100).
#[inline]
pub(crate) fn bytes_equal(word: u64, byte: u8) -> u64 {
    let x = word ^ (0x0101_0101_0101_0101 * u64::from(byte));
    !(((x & LOW7) + LOW7) | x | LOW7)
}
