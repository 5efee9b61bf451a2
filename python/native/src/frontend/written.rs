//! Which elements of each tile the recorded instructions have written, for
//! `nc_matmul(accumulate=None)`: NKI 0.7 infers the flag per PSUM location, the first write
//! overwriting and later writes accumulating, so a matmul into columns no instruction wrote
//! yet overwrites them even when other columns of the same tile hold earlier results.

use nki_core::ir::TileRegion;
use std::collections::HashMap;

/// The written elements: one bit per free element, per `(tile, partition)` row.
#[derive(Default)]
pub(super) struct Written {
    rows: HashMap<(u32, usize), Vec<u64>>,
}

/// How much of a region the recorded instructions have written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Coverage {
    /// No element.
    Nothing,
    /// Every element.
    All,
    /// Some elements, of this many.
    Part { written: usize, of: usize },
}

impl Written {
    /// Marks every element of `region` written.
    pub(super) fn mark(&mut self, region: &TileRegion) {
        let offsets = (!region.is_rect()).then(|| region.free_offsets());
        for r in 0..region
            .partition_span()
            .1
            .saturating_sub(region.p0)
            .min(region.np)
        {
            let bits = self
                .rows
                .entry((region.tile.0, region.partition_of(r)))
                .or_default();
            match &offsets {
                None => set_range(bits, region.f0, region.f0 + region.nf),
                Some(offsets) => offsets.iter().for_each(|&f| set_range(bits, f, f + 1)),
            }
        }
    }

    /// How much of `region` is written.
    pub(super) fn coverage(&self, region: &TileRegion) -> Coverage {
        let offsets = if region.is_rect() {
            (region.f0..region.f0 + region.nf).collect()
        } else {
            region.free_offsets()
        };
        let rows = region
            .partition_span()
            .1
            .saturating_sub(region.p0)
            .min(region.np);
        let mut written = 0;
        for r in 0..rows {
            if let Some(bits) = self.rows.get(&(region.tile.0, region.partition_of(r))) {
                written += offsets.iter().filter(|&&f| is_set(bits, f)).count();
            }
        }
        let of = rows * offsets.len();
        match written {
            0 => Coverage::Nothing,
            w if w == of => Coverage::All,
            w => Coverage::Part { written: w, of },
        }
    }
}

fn set_range(bits: &mut Vec<u64>, start: usize, end: usize) {
    if end <= start {
        return;
    }
    let words = end.div_ceil(64);
    if bits.len() < words {
        bits.resize(words, 0);
    }
    for (w, word) in bits.iter_mut().enumerate().take(words).skip(start / 64) {
        let lo = start.max(w * 64) - w * 64;
        let hi = end.min((w + 1) * 64) - w * 64;
        let mask = if hi - lo == 64 {
            u64::MAX
        } else {
            ((1u64 << (hi - lo)) - 1) << lo
        };
        *word |= mask;
    }
}

fn is_set(bits: &[u64], f: usize) -> bool {
    bits.get(f / 64).is_some_and(|w| w >> (f % 64) & 1 == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nki_core::ir::TileId;

    #[test]
    fn coverage_is_per_element() {
        let mut w = Written::default();
        let t = TileId(3);
        w.mark(&TileRegion::rect(t, 0, 128, 0, 32));
        assert_eq!(
            w.coverage(&TileRegion::rect(t, 0, 128, 0, 32)),
            Coverage::All
        );
        assert_eq!(
            w.coverage(&TileRegion::rect(t, 0, 128, 32, 32)),
            Coverage::Nothing
        );
        assert_eq!(
            w.coverage(&TileRegion::rect(t, 0, 128, 16, 32)),
            Coverage::Part {
                written: 128 * 16,
                of: 128 * 32
            }
        );
        assert_eq!(
            w.coverage(&TileRegion::rect(TileId(4), 0, 1, 0, 1)),
            Coverage::Nothing
        );
        w.mark(&TileRegion::rect(t, 0, 64, 60, 100));
        assert_eq!(
            w.coverage(&TileRegion::rect(t, 0, 64, 60, 100)),
            Coverage::All
        );
        assert_eq!(
            w.coverage(&TileRegion::rect(t, 0, 64, 0, 160)),
            Coverage::Part {
                written: 64 * (32 + 100),
                of: 64 * 160
            }
        );
        assert_eq!(
            w.coverage(&TileRegion::rect(t, 64, 1, 100, 1)),
            Coverage::Nothing
        );
    }
}
