//! Between the engine's pages and the wire's KV block records: encoding an exported
//! block, and checking a received one against what this replica expects.

use super::block::{ExportedBlock, ImportBlock};
use half::f16;
use warmpath_core::{BlockHash, TokenId};
use warmpath_engine::KvLayout;
use warmpath_protocol::kv_block::{KvBlockRecord, KvDtype, KvRecordLayout};

/// The record layout of this replica's pool, as it goes on the wire: f16, the CPU pool's
/// own dtype, so a record is the page's bytes.
pub fn record_layout(layout: KvLayout) -> KvRecordLayout {
    KvRecordLayout {
        n_layers: layout.n_layers as u32,
        kv_dim: layout.kv_dim as u32,
        block_size: layout.block_size.0,
        dtype: KvDtype::F16,
    }
}

/// An exported block's record bytes, its values in `layout.dtype`.
pub fn encode(layout: KvRecordLayout, b: ExportedBlock) -> Vec<u8> {
    let mut payload = Vec::with_capacity(b.values.len() * layout.dtype.size());
    for &v in &b.values {
        match layout.dtype {
            KvDtype::F32 => payload.extend_from_slice(&v.to_f32().to_le_bytes()),
            KvDtype::F16 => payload.extend_from_slice(&v.to_le_bytes()),
        }
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
    /// Bad magic, version, checksum or lengths, or a value that is not finite (NaN or
    /// infinite, also an f32 value past f16's range): such a block, once cached, would poison
    /// every request that reuses the prefix.
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
        // Either dtype is taken: an f32 record (an older writer's) holds f16-rounded values,
        // so narrowing it to the pool's f16 is exact.
        let same = rec.layout.n_layers == self.layout.n_layers
            && rec.layout.kv_dim == self.layout.kv_dim
            && rec.layout.block_size == self.layout.block_size
            && self.hashes.get(index) == Some(&rec.hash)
            && rec.parent == parent
            && self.prompt.get(index * bs..(index + 1) * bs) == Some(&rec.tokens[..]);
        if !same {
            return Err(Refusal::Mismatch);
        }
        let values = match rec.layout.dtype {
            KvDtype::F32 => rec
                .payload
                .chunks_exact(4)
                .map(|c| f16::from_f32(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect(),
            KvDtype::F16 => rec
                .payload
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes([c[0], c[1]]))
                .collect(),
        };
        let values: Vec<f16> = values;
        if !values.iter().all(|v| v.is_finite()) {
            return Err(Refusal::Corrupt);
        }
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
    use warmpath_core::{block_hashes, BlockSize, CacheSalt, HashNamespace};

    fn layout() -> KvLayout {
        KvLayout {
            block_size: BlockSize(2),
            n_layers: 1,
            kv_dim: 2,
            dtype: KvDtype::F16,
        }
    }

    fn hashes(ck: &str, salt: Option<&str>, prompt: &[TokenId]) -> Vec<BlockHash> {
        let ns = HashNamespace::new(warmpath_core::CheckpointId::new(ck))
            .with_salt(salt.map(CacheSalt::new));
        block_hashes(ns.root_seed(), prompt, BlockSize(2))
    }

    fn exported(h: &[BlockHash], prompt: &[TokenId], i: usize) -> ExportedBlock {
        ExportedBlock {
            index: i,
            hash: h[i],
            parent: i.checked_sub(1).map(|p| h[p]),
            tokens: prompt[i * 2..i * 2 + 2].to_vec(),
            values: halves(&[0.5, -1.0, 2.0, 3.25, 4.0, 5.0, 6.0, 7.0]),
        }
    }

    fn halves(v: &[f32]) -> Vec<f16> {
        v.iter().map(|&x| f16::from_f32(x)).collect()
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
        assert_eq!(
            got.values,
            halves(&[0.5, -1.0, 2.0, 3.25, 4.0, 5.0, 6.0, 7.0])
        );
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

    #[test]
    fn a_record_with_a_value_that_is_not_finite_is_refused() {
        let prompt: Vec<TokenId> = (1..=6).map(TokenId).collect();
        let mine = hashes("m@1", None, &prompt);
        let lay = record_layout(layout());
        let want = Expected {
            layout: lay,
            hashes: &mine,
            prompt: &prompt,
        };
        let wide_lay = KvRecordLayout {
            dtype: KvDtype::F32,
            ..lay
        };
        for (l, v) in [
            (lay, f32::NAN),
            (lay, f32::INFINITY),
            (wide_lay, f32::NAN),
            // Finite in f32, infinite once narrowed to the pool's f16.
            (wide_lay, 1.0e6),
        ] {
            let mut b = exported(&mine, &prompt, 1);
            b.values[3] = f16::from_f32(v);
            let mut bytes = encode(l, b);
            if l.dtype == KvDtype::F32 {
                // The exact f32 (encode widens the f16), checksum recomputed.
                let mut rec = KvBlockRecord::decode(&bytes).unwrap();
                rec.payload[12..16].copy_from_slice(&v.to_le_bytes());
                bytes = rec.encode();
            }
            assert_eq!(
                want.check(1, &bytes).unwrap_err(),
                Refusal::Corrupt,
                "{v} in {:?}",
                l.dtype
            );
        }
    }

    #[test]
    fn records_go_out_in_f16_and_f32_ones_are_still_taken() {
        let prompt: Vec<TokenId> = (1..=6).map(TokenId).collect();
        let mine = hashes("m@1", None, &prompt);
        let lay = record_layout(layout());
        assert_eq!(lay.dtype, KvDtype::F16);
        let want = Expected {
            layout: lay,
            hashes: &mine,
            prompt: &prompt,
        };
        let half = encode(lay, exported(&mine, &prompt, 1));
        let wide_lay = KvRecordLayout {
            dtype: KvDtype::F32,
            ..lay
        };
        let full = encode(wide_lay, exported(&mine, &prompt, 1));
        // 8 values: 16 payload bytes in f16, 32 in f32, the rest the same.
        assert_eq!(full.len() - half.len(), 16);
        let values = halves(&[0.5, -1.0, 2.0, 3.25, 4.0, 5.0, 6.0, 7.0]);
        assert_eq!(want.check(1, &half).unwrap().values, values);
        assert_eq!(want.check(1, &full).unwrap().values, values);
        // The f16 payload is the values' IEEE half bits, little-endian.
        let payload = &half[half.len() - 8 - 16..half.len() - 8];
        assert_eq!(&payload[..4], &[0x00, 0x38, 0x00, 0xbc]);
    }
}
