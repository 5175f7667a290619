//! Between the engine's pages and the wire's KV block records: encoding an exported
//! block, and checking a received one against what this replica expects.

use crate::engine::KvLayout;
use crate::server::worker::{ExportedBlock, ImportBlock};
use router_policy::{BlockHash, TokenId};
use warmpath_protocol::kv_block::{KvBlockRecord, KvDtype, KvRecordLayout};

/// The record layout of this replica's pool.
pub fn record_layout(layout: KvLayout) -> KvRecordLayout {
    KvRecordLayout {
        n_layers: layout.n_layers as u32,
        kv_dim: layout.kv_dim as u32,
        block_size: layout.block_size.0,
        dtype: KvDtype::F32,
    }
}

/// An exported block's record bytes.
pub fn encode(layout: KvRecordLayout, b: ExportedBlock) -> Vec<u8> {
    let mut payload = Vec::with_capacity(b.values.len() * 4);
    for v in &b.values {
        payload.extend_from_slice(&v.to_le_bytes());
    }
    KvBlockRecord {
        layout,
        hash: b.hash,
        parent: b.parent,
        tokens: b.tokens,
        payload,
    }
    .encode()
}

/// Why a received record is not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Bad magic, version, checksum or lengths.
    Corrupt,
    /// Another layout, another chain (checkpoint, salt or prompt), or other tokens.
    Mismatch,
}

impl Refusal {
    /// The `reason` label of the transfer counter.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Corrupt => "corrupt",
            Refusal::Mismatch => "mismatch",
        }
    }
}

/// What block `index` of the prompt must be.
#[derive(Debug)]
pub struct Expected<'a> {
    /// This replica's record layout.
    pub layout: KvRecordLayout,
    /// The prompt's chain hashes under this replica's checkpoint and the tenant's salt.
    pub hashes: &'a [BlockHash],
    /// The prompt.
    pub prompt: &'a [TokenId],
}

impl Expected<'_> {
    /// Checks record `bytes` as block `index` and turns it into a block to import.
    pub fn check(&self, index: usize, bytes: &[u8]) -> Result<ImportBlock, Refusal> {
        let rec = KvBlockRecord::decode(bytes).map_err(|_| Refusal::Corrupt)?;
        let bs = self.layout.block_size as usize;
        let parent = index.checked_sub(1).map(|p| self.hashes[p]);
        let same = rec.layout == self.layout
            && self.hashes.get(index) == Some(&rec.hash)
            && rec.parent == parent
            && self.prompt.get(index * bs..(index + 1) * bs) == Some(&rec.tokens[..]);
        if !same {
            return Err(Refusal::Mismatch);
        }
        let values = rec
            .payload
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(ImportBlock {
            hash: rec.hash,
            parent: rec.parent,
            values,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use router_policy::{block_hashes, BlockSize, CacheSalt, HashNamespace};

    fn layout() -> KvLayout {
        KvLayout {
            block_size: BlockSize(2),
            n_layers: 1,
            kv_dim: 2,
        }
    }

    fn hashes(ck: &str, salt: Option<&str>, prompt: &[TokenId]) -> Vec<BlockHash> {
        let ns = HashNamespace::new(router_policy::CheckpointId::new(ck))
            .with_salt(salt.map(CacheSalt::new));
        block_hashes(ns.root_seed(), prompt, BlockSize(2))
    }

    fn exported(h: &[BlockHash], prompt: &[TokenId], i: usize) -> ExportedBlock {
        ExportedBlock {
            index: i,
            hash: h[i],
            parent: i.checked_sub(1).map(|p| h[p]),
            tokens: prompt[i * 2..i * 2 + 2].to_vec(),
            values: vec![0.5, -1.0, 2.0, 3.25, 4.0, 5.0, 6.0, 7.0],
        }
    }

    #[test]
    fn a_record_round_trips_and_foreign_ones_are_refused() {
        let prompt: Vec<TokenId> = (1..=6).map(TokenId).collect();
        let mine = hashes("m@1", Some("t1"), &prompt);
        let lay = record_layout(layout());
        let want = Expected {
            layout: lay,
            hashes: &mine,
            prompt: &prompt,
        };
        let bytes = encode(lay, exported(&mine, &prompt, 1));
        let got = want.check(1, &bytes).expect("own record");
        assert_eq!(got.values, vec![0.5, -1.0, 2.0, 3.25, 4.0, 5.0, 6.0, 7.0]);
        assert_eq!(got.parent, Some(mine[0]));
        // Out of place in the chain.
        assert_eq!(want.check(2, &bytes).unwrap_err(), Refusal::Mismatch);
        // Another checkpoint, another tenant.
        for other in [
            hashes("m@2", Some("t1"), &prompt),
            hashes("m@1", Some("t2"), &prompt),
        ] {
            let bytes = encode(lay, exported(&other, &prompt, 1));
            assert_eq!(want.check(1, &bytes).unwrap_err(), Refusal::Mismatch);
        }
        // Another layout.
        let wide = KvRecordLayout {
            kv_dim: 1,
            n_layers: 2,
            ..lay
        };
        let bytes = encode(wide, exported(&mine, &prompt, 1));
        assert_eq!(want.check(1, &bytes).unwrap_err(), Refusal::Mismatch);
        // A flipped payload byte.
        let mut bytes = encode(lay, exported(&mine, &prompt, 1));
        let n = bytes.len();
        bytes[n - 12] ^= 1;
        assert_eq!(want.check(1, &bytes).unwrap_err(), Refusal::Corrupt);
    }
}
