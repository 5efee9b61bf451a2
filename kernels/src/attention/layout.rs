//! How the attention kernels cut a head's query or key rows into tiles, so that each DMA moves
//! enough bytes per partition.
//!
//! A 128-row tile of `[rows, Dh]` is 256 bytes per partition at `Dh = 128` in bf16, which the
//! DMA overview's throughput curve runs at about 11 % of the engines' rate (a transfer costs the
//! same fixed time up to about 2 KiB per partition). So the rows of a head are loaded and stored
//! in *blocks* of `128·n` rows, one transfer each, in which partition `p` holds the `n`
//! consecutive rows `p·n .. p·n + n` (one contiguous run of `n·Dh` elements in HBM). The tile of
//! such a block is `[128, n·Dh]`; its column group `i` (`cols(i·Dh, Dh)`), the block's *set*
//! `i`, holds rows `p·n + i`, and each set is a 128-row tile for the matmuls. Attention does
//! not care in which order queries, or keys (with their values), are taken, so a set is as good
//! a tile as 128 consecutive rows; only the causal mask looks at row numbers
//! ([`causal`]). Rows after the last whole block are tiled 128 consecutive rows at a time, as
//! before.
//!
//! Key sets are laid side by side in `kᵀ` (and the backward's accumulators): the key *slots*
//! `b·128n + j·128 .. + 128` hold block `b`'s set `j`, so a block's keys occupy its own slots in
//! another order, and the slots after the blocks are the keys themselves.

use super::*;

/// The most rows per partition a block takes: `[128, 8·Dh]`, 2 KiB per partition at
/// `Dh = 128` in bf16, about the most the DMA moves in its fixed time per transfer.
pub(super) const MOST_ROWS_PER_PARTITION: usize = 8;

/// The rows per partition of a causal problem's blocks: a query set attends every key of its
/// block, so larger blocks add work above the diagonal; at 4 (512 rows) the forward's 512-key
/// score pieces are those 128 consecutive query rows would take.
const CAUSAL_ROWS_PER_PARTITION: usize = 4;

/// The tiling of `len` rows of one head: `blocks` blocks of `128·n` rows, then 128-row tiles.
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    /// Rows.
    pub(super) len: usize,
    /// Rows per partition in a block (1: no blocks).
    pub(super) n: usize,
}

impl Layout {
    /// The tiling of `len` rows: blocks of 8 rows per partition from 1024 rows, of 4 from 512
    /// (a block spans whole 512-key score pieces of the forward), none below.
    pub(super) fn of(len: usize, most: usize) -> Layout {
        let n = [most, 4]
            .into_iter()
            .find(|&n| len >= n * PMAX)
            .unwrap_or(1);
        Layout { len, n }
    }

    /// The query and key tilings of an attention problem. A causal one needs the two alike
    /// ([`causal`] compares a query set with a key set of the same block), so with `S ≠ Sk`
    /// both are plain 128-row tiles.
    pub(super) fn pair(d: &Dims, causal: bool, most: usize) -> (Layout, Layout) {
        if causal && d.s != d.sk {
            let plain = |len| Layout { len, n: 1 };
            (plain(d.s), plain(d.sk))
        } else {
            let most = if causal {
                most.min(CAUSAL_ROWS_PER_PARTITION)
            } else {
                most
            };
            (Layout::of(d.s, most), Layout::of(d.sk, most))
        }
    }

    /// Rows in a block.
    pub(super) fn block_rows(&self) -> usize {
        self.n * PMAX
    }

    /// Whole blocks.
    pub(super) fn blocks(&self) -> usize {
        if self.n > 1 {
            self.len / self.block_rows()
        } else {
            0
        }
    }

    /// Rows in whole blocks; the 128-row tiles start here.
    pub(super) fn blocked(&self) -> usize {
        self.blocks() * self.block_rows()
    }

    /// Every transfer of the rows: `(first row, partitions, rows per partition)`, the blocks
    /// then the 128-row tiles (the last one ragged).
    pub(super) fn loads(&self) -> Vec<(usize, usize, usize)> {
        let blocks = (0..self.blocks()).map(|b| (b * self.block_rows(), PMAX, self.n));
        let tail = spans(self.len - self.blocked(), PMAX).map(|(o, w)| (self.blocked() + o, w, 1));
        blocks.chain(tail).collect()
    }

    /// Every 128-slot tile, in slot order: each block's sets, then the 128-row tiles.
    pub(super) fn tiles(&self) -> Vec<RowSet> {
        self.loads()
            .into_iter()
            .flat_map(|(start, parts, n)| (0..n).map(move |set| RowSet::new(start, parts, n, set)))
            .collect()
    }
}

/// One 128-row tile of a head's rows: partition `p` holds row `start + p·stride + set`.
#[derive(Clone, Copy, Debug)]
pub(super) struct RowSet {
    /// The first row of its transfer (block or 128-row tile).
    pub(super) start: usize,
    /// Partitions.
    pub(super) size: usize,
    /// Rows per partition of its transfer.
    pub(super) stride: usize,
    /// Which of them.
    pub(super) set: usize,
}

impl RowSet {
    /// Set `set` of the transfer of `parts` partitions of `n` rows from row `start`.
    pub(super) fn new(start: usize, parts: usize, n: usize, set: usize) -> RowSet {
        RowSet {
            start,
            size: parts,
            stride: n,
            set,
        }
    }

    /// The first slot of a key set: where it sits in `kᵀ`.
    pub(super) fn slot(&self) -> usize {
        self.start + self.set * self.size
    }

    /// Its first row.
    fn first(&self) -> usize {
        self.start + self.set
    }

    /// Its last row.
    fn last(&self) -> usize {
        self.start + (self.size - 1) * self.stride + self.set
    }

    /// The last key slot a query set attends under a causal mask: its last row for consecutive
    /// rows, its block's last slot for a set (every set of the block has a key before its last
    /// query).
    pub(super) fn last_causal_slot(&self) -> usize {
        if self.stride == 1 {
            self.last()
        } else {
            self.start + self.stride * PMAX - 1
        }
    }
}

/// What a causal mask leaves of a score tile of query set `q` against key set `k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Causal {
    /// Every key attended.
    All,
    /// Key column `f` attended by query partition `p` where `f ≤ p + offset`.
    Masked(isize),
    /// No key attended.
    None,
}

/// What a causal mask leaves of the scores of query set `q` against key set `k`, both of layouts
/// from [`Layout::pair`]: `k0 + f·s + j ≤ q0 + p·s + i` for sets of the same block (`s` rows per
/// partition) is `f ≤ p + ⌊(i − j) / s⌋`, i.e. `f ≤ p` for `j ≤ i` and `f < p` for `j > i`;
/// for 128 consecutive rows each it is `f ≤ p + q0 − k0`.
pub(super) fn causal(q: &RowSet, k: &RowSet) -> Causal {
    if k.first() > q.last() {
        return Causal::None;
    }
    if k.last() <= q.first() {
        return Causal::All;
    }
    assert!(
        q.stride == k.stride && (q.stride == 1 || q.start == k.start),
        "a causal mask between sets of different blocks: {q:?}, {k:?}"
    );
    let diff = q.first() as isize - k.first() as isize;
    Causal::Masked(diff.div_euclid(q.stride as isize))
}

/// `view` (`[rows, Dh]`) rows `row0 .. row0 + parts·n` as `[parts, n·Dh]`: partition `p` the `n`
/// consecutive rows from `row0 + p·n`, one contiguous run.
pub(super) fn block_view(view: &HbmView, row0: AffineExpr, parts: usize, n: usize) -> HbmView {
    let cols = view.shape()[1];
    view.clone()
        .rows(row0, parts * n)
        .reshape(&[parts, n * cols])
}

/// Loads [`block_view`] into a new `[parts, n·Dh]` tile.
pub(super) fn load_block(view: &HbmView, row0: AffineExpr, parts: usize, n: usize) -> Tile {
    let t = sbuf([parts, n * view.shape()[1]], view.dtype());
    dma_copy(&t, block_view(view, row0, parts, n));
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_then_tiles() {
        let l = Layout::of(1300, 8);
        assert_eq!(l.n, 8);
        assert_eq!(
            l.loads(),
            vec![(0, 128, 8), (1024, 128, 1), (1152, 128, 1), (1280, 20, 1)]
        );
        let slots: Vec<usize> = l.tiles().iter().map(RowSet::slot).collect();
        assert_eq!(slots, (0..1300).step_by(128).collect::<Vec<_>>());
        assert_eq!(Layout::of(600, 8).loads(), vec![(0, 128, 4), (512, 88, 1)]);
        assert_eq!(Layout::of(300, 8).blocks(), 0);
    }

    #[test]
    fn causal_sets() {
        let set = |i| RowSet::new(1024, 128, 8, i);
        assert_eq!(causal(&set(3), &set(3)), Causal::Masked(0));
        assert_eq!(causal(&set(3), &set(1)), Causal::Masked(0));
        assert_eq!(causal(&set(3), &set(5)), Causal::Masked(-1));
        assert_eq!(causal(&set(0), &RowSet::new(0, 128, 8, 7)), Causal::All);
        assert_eq!(causal(&set(7), &RowSet::new(2048, 128, 1, 0)), Causal::None);
        let tile = |s| RowSet::new(s, 128, 1, 0);
        assert_eq!(causal(&tile(256), &tile(256)), Causal::Masked(0));
        assert_eq!(causal(&tile(256), &tile(128)), Causal::All);
        assert_eq!(causal(&tile(256), &set(0)), Causal::None);
    }
}
