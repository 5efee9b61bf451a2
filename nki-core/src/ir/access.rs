//! HBM access patterns: what a DMA side names of a tensor in device memory, its reach, and
//! the runtime offset NKI's `scalar_offset=` / `vector_offset=` add.

use serde::Serialize;

use super::{HbmId, RegisterId, TileRegion};
use crate::affine::AffineExpr;

/// An access pattern into an HBM tensor: row `p` (a tile partition) starts at flat element
/// `offset + p·p_stride`, and its `nf` elements are `f_stride` apart, or, when `free_dims` is
/// set, walk those dims (NKI's multi-dimensional `tensor.ap` patterns that no single stride
/// covers). Covers row and column slices, broadcasts (stride 0), reshapes and transposed views
/// without copies; `dynamic` adds a runtime offset.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct HbmAccess {
    /// The tensor.
    pub tensor: HbmId,
    /// Flat element offset of `(0, 0)`.
    pub offset: AffineExpr,
    /// Rows (maps to tile partitions).
    pub np: usize,
    /// Elements per row (maps to the tile free dim).
    pub nf: usize,
    /// Elements between consecutive rows.
    pub p_stride: i64,
    /// Elements between consecutive columns (0 when `free_dims` describes the walk).
    pub f_stride: i64,
    /// The row's walk when it has several free dims: `(stride, count)` per dim, outermost
    /// first, the counts' product `nf`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_dims: Option<Box<[(i64, usize)]>>,
    /// A runtime offset read from a tile when the DMA runs (NKI's `scalar_offset=` /
    /// `vector_offset=`), `None` for a static access.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<Box<DynamicOffset>>,
}

/// A runtime offset of an HBM access (NKI's `tensor.ap(..., scalar_offset=, vector_offset=,
/// indirect_dim=)`): index values an SBUF tile holds when the DMA runs, each an integer, times
/// `scale` elements (the stride of the indirect dim of the view the pattern was taken on).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DynamicOffset {
    /// `scalar_offset=`: one index (the `(1, 1)` region's element) moves the whole access.
    Scalar {
        /// The index element.
        index: TileRegion,
        /// Elements per index step.
        scale: i64,
    },
    /// `scalar_offset=` with a `VirtualRegister` (a `nl.dynamic_range` index, a loaded
    /// register): the register's value when the DMA runs moves the whole access.
    Register {
        /// The register.
        reg: RegisterId,
        /// Elements per index step.
        scale: i64,
    },
    /// `vector_offset=`: row `r` of the access starts at `offset + index[r]·scale` (partition
    /// `r` of the `(rows, 1)` region); the pattern's row step is not used, as the NKI docs say.
    Vector {
        /// One index per row.
        index: TileRegion,
        /// Elements per index step.
        scale: i64,
    },
}

impl DynamicOffset {
    /// The tile region holding the indices (none for a register).
    pub fn index(&self) -> Option<&TileRegion> {
        match self {
            DynamicOffset::Scalar { index, .. } | DynamicOffset::Vector { index, .. } => {
                Some(index)
            }
            DynamicOffset::Register { .. } => None,
        }
    }
}

impl HbmAccess {
    /// The row's free dims as `(stride, count)`: `free_dims`, or the one `(f_stride, nf)`
    /// (borrowed: the simulator's bounds checks walk it on every DMA).
    pub fn free_walk(&self) -> impl Iterator<Item = (i64, usize)> + Clone + '_ {
        let (dims, one) = match &self.free_dims {
            Some(dims) => (&dims[..], None),
            None => (&[][..], Some((self.f_stride, self.nf))),
        };
        dims.iter().copied().chain(one)
    }

    /// The flat offsets of one row's elements from the row's first, in order.
    pub fn row_offsets(&self) -> Vec<i64> {
        let mut out = vec![0i64];
        for (stride, count) in self.free_walk() {
            out = out
                .iter()
                .flat_map(|&base| (0..count as i64).map(move |i| base + i * stride))
                .collect();
        }
        out
    }

    /// How far the pattern reaches below and above its `(0, 0)` element, in flat elements
    /// (negative strides reach below). A reach past `i64`'s range saturates, so bounds checks
    /// built on it reject the pattern instead of wrapping around into range.
    pub fn extent(&self) -> (i64, i64) {
        let (mut below, mut above) = (0i64, 0i64);
        for (stride, n) in std::iter::once((self.p_stride, self.np)).chain(self.free_walk()) {
            let steps = i64::try_from(n.saturating_sub(1)).unwrap_or(i64::MAX);
            let span = stride.saturating_mul(steps);
            if span > 0 {
                above = above.saturating_add(span);
            } else {
                below = below.saturating_add(span);
            }
        }
        (below, above)
    }
}

impl HbmAccess {
    /// The lowest and highest flat element the pattern touches over every iteration of the
    /// loops (`trips`, indexed by loop variable; a variable without a trip count is taken as
    /// spanning nothing), exactly.
    pub fn reach(&self, trips: &[usize]) -> (i128, i128) {
        let (mut lo, mut hi) = (
            i128::from(self.offset.constant),
            i128::from(self.offset.constant),
        );
        for (k, n) in self.steps(trips) {
            let reach = i128::from(k) * n.saturating_sub(1) as i128;
            if reach > 0 {
                hi += reach;
            } else {
                lo += reach;
            }
        }
        (lo, hi)
    }

    /// Every `(step, count)` the pattern moves by: each loop term's coefficient with its trip
    /// count (1 for a variable `trips` does not cover), then the row and column strides.
    fn steps<'s>(&'s self, trips: &'s [usize]) -> impl Iterator<Item = (i64, usize)> + 's {
        let terms = self
            .offset
            .terms
            .iter()
            .map(|&(v, k)| (k, trips.get(v.0 as usize).copied().unwrap_or(1)));
        terms
            .chain(std::iter::once((self.p_stride, self.np)))
            .chain(self.free_walk())
    }

    /// Whether the pattern's numbers are small enough for plain `i64` reasoning: the constant
    /// plus every coefficient and stride times its reach (at least one step each), all in
    /// absolute value, stays below 2^60, so sums and differences of any of its partial offsets
    /// cannot overflow. The simulator's analyses that let writes run concurrently only accept
    /// such patterns (a program that skipped validation may hold any numbers).
    pub fn is_modest(&self, trips: &[usize]) -> bool {
        let magnitude = self
            .steps(trips)
            .map(|(k, n)| i128::from(k).abs() * n.saturating_sub(1).max(1) as i128)
            .sum::<i128>()
            + i128::from(self.offset.constant).abs();
        magnitude < 1 << 60
    }
}
