//! A staging buffer in front of the MAC: short pieces are gathered and hashed in one update.

use hmac::Mac;

use super::decode::{Part, unescape};
use super::word::{bytes_equal, pack};

/// How many bytes the stage gathers before a MAC update.
pub(crate) const STAGE: usize = 512;

/// A MAC fed through a stage: short pieces are copied and hashed in one update, long
/// ones are hashed where they are.
pub(crate) struct Staged<'m, M> {
    pub(crate) mac: &'m mut M,
    /// `STAGE` bytes and eight of slack for whole-word stores.
    pub(crate) stage: [u8; STAGE + 8],
    pub(crate) len: usize,
}

impl<M: Mac> Staged<'_, M> {
    #[inline]
    fn push(&mut self, bytes: &[u8]) {
        if bytes.len() > STAGE - self.len {
            self.flush();
            if bytes.len() >= STAGE {
                self.mac.update(bytes);
                return;
            }
        }
        if bytes.len() <= 16 {
            // whole eight-byte stores into the slack past `STAGE`: a short copy would be
            // a call to `memcpy`
            let (stage, mut len) = (&mut self.stage, self.len);
            for chunk in bytes.chunks(8) {
                stage[len..len + 8].copy_from_slice(&pack(chunk).to_le_bytes());
                len += chunk.len();
            }
            self.len = len;
        } else {
            self.stage[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
        }
    }

    /// Pushes `part` decoded, eight bytes at a time: `+` becomes a space in place (the
    /// length is kept), a `%` ends the word's run and is decoded on its own, and a run
    /// without escapes is found with a vectorized search and pushed whole.
    pub(crate) fn push_decoded(&mut self, part: Part<'_>) {
        if !part.encoded {
            self.push(part.raw);
            return;
        }
        // a local length, so the stage's writes never reload it
        let (mut rest, mut len) = (part.raw, self.len);
        while !rest.is_empty() {
            if len > STAGE - 8 {
                self.mac.update(&self.stage[..len]);
                len = 0;
            }
            let take = rest.len().min(8);
            let word = pack(&rest[..take]);
            let percents = bytes_equal(word, b'%');
            let pluses = bytes_equal(word, b'+');
            if percents | pluses == 0 && take == 8 {
                let run = memchr::memchr2(b'+', b'%', rest).unwrap_or(rest.len());
                self.len = len;
                self.push(&rest[..run]);
                len = self.len;
                rest = &rest[run..];
                continue;
            }
            let run = if percents == 0 {
                take
            } else {
                (percents.trailing_zeros() / 8) as usize
            };
            // the high bit of each `+` spread to its whole byte: 0x2b ^ 0x0b is a space
            let spaced = word ^ (((pluses >> 7) * 0xff) & 0x0b0b_0b0b_0b0b_0b0b);
            self.stage[len..len + 8].copy_from_slice(&spaced.to_le_bytes());
            len += run;
            rest = &rest[run..];
            if run < take {
                let (byte, used) = unescape(rest);
                self.stage[len] = byte;
                len += 1;
                rest = &rest[used..];
            }
        }
        self.len = len;
    }

    pub(crate) fn flush(&mut self) {
        self.mac.update(&self.stage[..self.len]);
        self.len = 0;
    }
}
