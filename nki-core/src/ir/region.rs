//! Tile regions: what an instruction operand names of an on-chip tile. A region is partitions
//! `p0..p0+np` and, in each, a run of free elements: the contiguous run `f0..f0+nf` (the common
//! case, no [`TilePattern`]), or a strided walk NKI spells with step slices, `tensor.ap(...)` and
//! broadcast views (a [`TilePattern`]: free dims of any step, 0 included, and a partition step
//! of 0 for the partition broadcast a DMA can read).

use serde::Serialize;

use super::TileId;

/// One free dimension of a strided region: `count` elements, `step` elements apart (0 repeats
/// one element: a broadcast).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct FreeDim {
    /// Elements between consecutive indices.
    pub step: usize,
    /// Number of indices.
    pub count: usize,
}

/// How a strided region walks its tile (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct TilePattern {
    /// Partitions between consecutive rows of the region: 1 (partitions `p0..p0+np`), or 0
    /// (partition `p0` read `np` times: a partition broadcast, which only a DMA source may be).
    pub partition_step: usize,
    /// The free dims, outermost first: element `[i1, i2, ...]` of a row is free element
    /// `f0 + Σ ik·dims[k].step` of its partition. The counts' product is the region's `nf`.
    pub free: Vec<FreeDim>,
}

/// A region of a tile: `np` rows starting at partition `p0`, each `nf` free elements starting
/// at free element `f0`: contiguous when `pattern` is `None`, else walked as it says.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct TileRegion {
    /// The tile.
    pub tile: TileId,
    /// First partition.
    pub p0: usize,
    /// Partition count (rows of the region).
    pub np: usize,
    /// First free element.
    pub f0: usize,
    /// Free element count per row.
    pub nf: usize,
    /// The strided walk, when the region is not the rectangle `[p0..p0+np, f0..f0+nf]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Box<TilePattern>>,
}

impl TileRegion {
    /// The rectangle `[p0..p0+np, f0..f0+nf]` of `tile`.
    pub fn rect(tile: TileId, p0: usize, np: usize, f0: usize, nf: usize) -> TileRegion {
        TileRegion {
            tile,
            p0,
            np,
            f0,
            nf,
            pattern: None,
        }
    }

    /// Rows `p0..`, each walking `free` from free element `f0`, `partition_step` partitions
    /// apart (1, or 0 for a partition broadcast). A walk that is one contiguous run of
    /// consecutive partitions is the plain rectangle (no pattern), so equal regions compare
    /// equal however they were spelled.
    pub fn strided(
        tile: TileId,
        (p0, np, partition_step): (usize, usize, usize),
        f0: usize,
        free: Vec<FreeDim>,
    ) -> TileRegion {
        let nf = free
            .iter()
            .try_fold(1usize, |n, d| n.checked_mul(d.count))
            .unwrap_or(usize::MAX);
        let pattern = TilePattern {
            partition_step: if np <= 1 { 1 } else { partition_step },
            free,
        };
        let plain = pattern.partition_step == 1 && pattern.is_dense();
        TileRegion {
            tile,
            p0,
            np,
            f0,
            nf,
            pattern: (!plain).then(|| Box::new(pattern)),
        }
    }

    /// Whether the region is the plain rectangle `[p0..p0+np, f0..f0+nf]`.
    pub fn is_rect(&self) -> bool {
        self.pattern.is_none()
    }

    /// Rows between consecutive rows of the region: 1, or 0 for a partition broadcast.
    pub fn partition_step(&self) -> usize {
        self.pattern.as_ref().map_or(1, |p| p.partition_step)
    }

    /// The tile partitions the region touches, half-open.
    pub fn partition_span(&self) -> (usize, usize) {
        let rows = if self.partition_step() == 0 {
            self.np.min(1)
        } else {
            self.np
        };
        (self.p0, self.p0.saturating_add(rows))
    }

    /// The free elements the region touches in each partition, half-open (the lowest to one
    /// past the highest; a strided region skips some in between).
    pub fn free_span(&self) -> (usize, usize) {
        match &self.pattern {
            None => (self.f0, self.f0.saturating_add(self.nf)),
            Some(_) if self.nf == 0 => (self.f0, self.f0),
            Some(p) => {
                let reach = p.free.iter().fold(0usize, |acc, d| {
                    acc.saturating_add(d.step.saturating_mul(d.count.saturating_sub(1)))
                });
                (self.f0, self.f0.saturating_add(reach).saturating_add(1))
            }
        }
    }

    /// Whether the region lies inside a `[partitions, free]` tile (ends computed without
    /// overflow).
    pub fn within(&self, partitions: usize, free: usize) -> bool {
        let (p1, f1) = (self.partition_span().1, self.free_span().1);
        p1 <= partitions && f1 <= free && self.nf != usize::MAX
    }

    /// The free offsets of one row, in order: `f0..f0+nf` for a rectangle, the pattern's walk
    /// otherwise.
    pub fn free_offsets(&self) -> Vec<usize> {
        match &self.pattern {
            None => (self.f0..self.f0 + self.nf).collect(),
            Some(p) => {
                let mut out = Vec::with_capacity(self.nf);
                out.push(self.f0);
                for d in &p.free {
                    let prev = std::mem::take(&mut out);
                    for base in prev {
                        out.extend((0..d.count).map(|i| base + i * d.step));
                    }
                }
                out
            }
        }
    }

    /// The tile partition of row `r`.
    pub fn partition_of(&self, r: usize) -> usize {
        self.p0 + r * self.partition_step()
    }
}

impl TilePattern {
    /// Whether the free dims walk one contiguous run in order (each dim's step the product of
    /// the counts inside it; dims of count 1 step anywhere).
    pub fn is_dense(&self) -> bool {
        let mut inner = 1usize;
        for d in self.free.iter().rev() {
            if d.count != 1 && d.step != inner {
                return false;
            }
            inner = inner.saturating_mul(d.count);
        }
        true
    }
}

/// How many of `data`'s last free dims, as its access pattern walks them, make up each of
/// `groups` equal groups of its free elements (a grouped `tensor_reduce` reduces over them): 1
/// for a plain rectangle split into groups, `None` when no run of trailing dims fits.
pub fn reduced_free_dims(data: &TileRegion, groups: usize) -> Option<usize> {
    let group = data.nf.checked_div(groups)?;
    let Some(pattern) = &data.pattern else {
        return Some(1);
    };
    let mut size = 1usize;
    for (k, dim) in pattern.free.iter().rev().enumerate() {
        size = size.checked_mul(dim.count)?;
        if size == group {
            return Some(k + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dims(pairs: &[(usize, usize)]) -> Vec<FreeDim> {
        pairs
            .iter()
            .map(|&(step, count)| FreeDim { step, count })
            .collect()
    }

    /// A dense walk of consecutive partitions is the rectangle; anything else keeps its pattern
    /// and walks the elements NKI's access-pattern semantics give.
    #[test]
    fn strided_regions_walk_their_pattern() {
        let t = TileId(0);
        let dense = TileRegion::strided(t, (2, 4, 1), 8, dims(&[(6, 3), (1, 6)]));
        assert_eq!(dense, TileRegion::rect(t, 2, 4, 8, 18));
        let even = TileRegion::strided(t, (0, 4, 1), 1, dims(&[(2, 5)]));
        assert_eq!(even.nf, 5);
        assert_eq!(even.free_offsets(), vec![1, 3, 5, 7, 9]);
        assert_eq!(even.free_span(), (1, 10));
        assert!(even.within(4, 10) && !even.within(4, 9));
        // A 2x2 pooling window over a 4x4 plane: the walk of NKI's avgpool example.
        let pool = TileRegion::strided(t, (0, 1, 1), 0, dims(&[(8, 2), (2, 2), (4, 2), (1, 2)]));
        assert_eq!(
            pool.free_offsets(),
            vec![0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15]
        );
        let broadcast = TileRegion::strided(t, (3, 128, 0), 0, dims(&[(1, 16)]));
        assert_eq!(broadcast.partition_span(), (3, 4));
        assert_eq!(broadcast.partition_of(100), 3);
        assert!(broadcast.within(4, 16));
        let free_broadcast = TileRegion::strided(t, (0, 2, 1), 4, dims(&[(0, 3), (1, 2)]));
        assert_eq!(free_broadcast.free_offsets(), vec![4, 5, 4, 5, 4, 5]);
        assert_eq!(free_broadcast.free_span(), (4, 6));
    }
}
