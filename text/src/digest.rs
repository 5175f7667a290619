//! Content hashes of the files a tokenizer was loaded from: SHA-256 over exactly the bytes
//! that were parsed, shortened to the first 8 bytes as 16 lowercase hex digits (the same
//! shortening as the replica's checkpoint ids).

use sha2::{Digest, Sha256};
use std::io::Read;

/// 16 lowercase hex digits: the first 8 bytes of a SHA-256.
pub(crate) fn short_hex(hasher: Sha256) -> String {
    hasher
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A reader that hashes every byte read through it.
pub(crate) struct Hashed<R> {
    inner: R,
    hasher: Sha256,
}

impl<R> Hashed<R> {
    pub(crate) fn new(inner: R) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
        }
    }

    /// The reader underneath.
    pub(crate) fn inner(&self) -> &R {
        &self.inner
    }

    /// The short hex hash of everything read so far.
    pub(crate) fn hex(self) -> String {
        short_hex(self.hasher)
    }
}

impl<R: Read> Read for Hashed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// A reader that counts the bytes read through it.
pub(crate) struct Counted<R> {
    inner: R,
    bytes: u64,
}

impl<R> Counted<R> {
    pub(crate) fn new(inner: R) -> Self {
        Self { inner, bytes: 0 }
    }

    /// Bytes read so far.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_and_counted_see_exactly_the_bytes_read() {
        let data = b"hello world";
        let mut r = Hashed::new(Counted::new(&data[..]));
        let mut buf = [0u8; 5];
        r.read_exact(&mut buf).expect("read");
        assert_eq!(r.inner().bytes(), 5);
        let mut whole = Sha256::new();
        whole.update(b"hello");
        assert_eq!(r.hex(), short_hex(whole));
        assert_eq!(
            short_hex(Sha256::new()),
            "e3b0c44298fc1c14",
            "SHA-256 of nothing"
        );
    }
}
