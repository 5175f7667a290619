//! A message body gathered from the chunks Pingora hands over. Almost every request and
//! non-streaming response body arrives in one chunk; that chunk is kept by reference (a
//! `Bytes` clone is a reference-count bump), and only a second chunk starts a buffer the
//! pieces are copied into. Bounds stay with the callers, which answer differently (413 for
//! a request body, "unread" for a response body).

use bytes::Bytes;

/// A body received so far.
#[derive(Debug, Default)]
pub(crate) struct Gathered {
    /// The only chunk, while only one came.
    first: Option<Bytes>,
    /// Every chunk, copied, once a second one came.
    joined: Vec<u8>,
}

impl Gathered {
    /// Bytes received so far.
    pub(crate) fn len(&self) -> usize {
        self.first.as_ref().map_or(0, Bytes::len) + self.joined.len()
    }

    /// True before any byte came.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `chunk` (kept as it is when it is the first; a caller that still needs its own
    /// passes a clone). When it is the second, the buffer is sized once for at least
    /// `expected` bytes (a Content-Length, say) so later chunks do not grow it again.
    pub(crate) fn push(&mut self, chunk: Bytes, expected: impl FnOnce() -> usize) {
        if chunk.is_empty() {
            return;
        }
        match self.first.take() {
            None if self.joined.is_empty() => self.first = Some(chunk),
            earlier => {
                if let Some(earlier) = earlier {
                    self.joined
                        .reserve(expected().max(earlier.len() + chunk.len()));
                    self.joined.extend_from_slice(&earlier);
                }
                self.joined.extend_from_slice(&chunk);
            }
        }
    }

    /// The bytes received, contiguous.
    pub(crate) fn as_slice(&self) -> &[u8] {
        self.first.as_deref().unwrap_or(&self.joined)
    }

    /// The bytes received, as one `Bytes` (the chunk itself when only one came).
    pub(crate) fn into_bytes(self) -> Bytes {
        match self.first {
            Some(only) => only,
            None => self.joined.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_chunk_is_kept_by_reference_and_more_are_joined_in_order() {
        let a = Bytes::from_static(b"hello ");
        let mut g = Gathered::default();
        assert!(g.is_empty());
        g.push(a.clone(), || unreachable!("no buffer for a single chunk"));
        assert_eq!(
            g.as_slice().as_ptr(),
            a.as_ptr(),
            "the chunk itself, not a copy"
        );
        g.push(Bytes::new(), || 0);
        assert_eq!(g.len(), 6);
        let mut sized = 0;
        g.push(Bytes::from_static(b"wor"), || {
            sized += 1;
            64
        });
        g.push(Bytes::from_static(b"ld"), || {
            sized += 1;
            64
        });
        assert_eq!(sized, 1, "the buffer is sized once, at the second chunk");
        assert_eq!(g.as_slice(), b"hello world");
        assert_eq!(g.len(), 11);
        assert_eq!(&g.into_bytes()[..], b"hello world");
    }

    #[test]
    fn a_single_chunk_comes_back_as_itself() {
        let a = Bytes::from(vec![7u8; 100]);
        let mut g = Gathered::default();
        g.push(a.clone(), || 0);
        let b = g.into_bytes();
        assert_eq!(b.as_ptr(), a.as_ptr());
        assert!(Gathered::default().into_bytes().is_empty());
    }
}
