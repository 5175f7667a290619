//! Splitting a byte stream into lines, across any chunking: SSE responses on the data
//! plane, the KV event stream on the control plane.

/// Splits a byte stream into lines.
#[derive(Default)]
pub(crate) struct LineSplitter {
    pending: Vec<u8>,
}

impl LineSplitter {
    /// Feeds bytes, returning the complete lines (without `\n`, `\r` trimmed).
    pub(crate) fn push(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(pos) = self.pending.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.pending.drain(..=pos).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            out.push(line);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lines_across_pushes() {
        let mut s = LineSplitter::default();
        assert!(s.push(b"ab").is_empty());
        assert_eq!(s.push(b"c\r\nde\nf"), vec![b"abc".to_vec(), b"de".to_vec()]);
        assert_eq!(s.push(b"\n"), vec![b"f".to_vec()]);
    }
}
