//! Text units: how a prompt is hashed when the gateway has no tokenizer for an engine
//! (`tokenizer: none`), defined once so every gateway of a fleet agrees.
//!
//! The prompt is rendered to bytes (a text prompt as its UTF-8; a chat as, per message,
//! the role, `0x1F`, the content, `0x1E`), and the bytes are packed four at a time into
//! pseudo-tokens (little-endian `u32`, the last one zero-padded). The pseudo-tokens then go
//! through the ordinary hashing contract ([`crate::hash`]): blocks of `block_size` units
//! (64 bytes at the default 16), chained, with the checkpoint and tenant salt in the seed.
//! Hashing a block of units is hashing its bytes, since a unit's little-endian encoding is
//! the four bytes it packs.
//!
//! What routing loses without tokens: block boundaries fall at byte offsets, not token
//! offsets, so two prompts that tokenize alike but differ in bytes (normalisation, another
//! chat template's whitespace) never share a block; the prompt length the policies and the
//! token limits see is an estimate (one unit per four bytes, close to the usual four
//! characters per token of English text); and no engine event can be matched against these
//! hashes, so only the approximate index (routing history) predicts the cache.

use crate::ids::TokenId;

/// Separates a message's role from its content.
pub const ROLE_END: u8 = 0x1F;
/// Ends a message.
pub const MESSAGE_END: u8 = 0x1E;

/// Packs `bytes` four per unit, little-endian, the last unit zero-padded.
pub fn pack(bytes: &[u8]) -> Vec<TokenId> {
    let chunks = bytes.chunks(4);
    let mut out = Vec::with_capacity(chunks.len());
    for c in chunks {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        out.push(TokenId(u32::from_le_bytes(w)));
    }
    out
}

/// Renders chat messages (`(role, content)` pairs) to the bytes [`pack`] takes.
pub fn render_chat<'a>(messages: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<u8> {
    let mut out = Vec::new();
    for (role, content) in messages {
        out.extend_from_slice(role.as_bytes());
        out.push(ROLE_END);
        out.extend_from_slice(content.as_bytes());
        out.push(MESSAGE_END);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::{block_hash, block_hashes, HashNamespace};
    use crate::ids::{BlockSize, CheckpointId};

    #[test]
    fn units_pack_bytes_little_endian_and_pad_the_tail() {
        assert_eq!(
            pack(b"abcde"),
            vec![
                TokenId(u32::from_le_bytes(*b"abcd")),
                TokenId(u32::from(b'e'))
            ]
        );
        assert!(pack(b"").is_empty());
    }

    #[test]
    fn a_block_of_units_hashes_as_its_bytes() {
        let bytes: Vec<u8> = (0..64u8).collect();
        let units = pack(&bytes);
        assert_eq!(units.len(), 16);
        let expected = xxhash_rust::xxh3::xxh3_64_with_seed(&bytes, 7);
        assert_eq!(block_hash(7, &units).0, expected);
    }

    #[test]
    fn chats_sharing_a_prefix_share_blocks_and_roles_matter() {
        let seed = HashNamespace::new(CheckpointId::new("pool/m")).root_seed();
        let sys = "You are a careful assistant. ".repeat(8);
        let a = pack(&render_chat([
            ("system", sys.as_str()),
            ("user", "first question"),
        ]));
        let b = pack(&render_chat([
            ("system", sys.as_str()),
            ("user", "another one"),
        ]));
        let c = pack(&render_chat([
            ("user", sys.as_str()),
            ("user", "first question"),
        ]));
        let (ha, hb, hc) = (
            block_hashes(seed, &a, BlockSize(16)),
            block_hashes(seed, &b, BlockSize(16)),
            block_hashes(seed, &c, BlockSize(16)),
        );
        assert!(ha.len() >= 3);
        assert_eq!(ha[..3], hb[..3]);
        assert_ne!(ha[0], hc[0], "the role is part of the rendered text");
    }

    /// Pins the rendering and packing: a change here changes every text-unit hash in a
    /// running fleet, like a change of the hashing contract.
    #[test]
    fn golden_text_units() {
        let bytes = render_chat([("user", "hi")]);
        assert_eq!(bytes, b"user\x1fhi\x1e");
        assert_eq!(
            pack(&bytes),
            vec![TokenId(0x7265_7375), TokenId(0x1E69_681F)]
        );
    }
}
