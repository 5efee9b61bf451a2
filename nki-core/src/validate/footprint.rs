//! Where accesses land, as runs of consecutive elements, and the search for two iterations of a
//! loop touching one element in ways that do not commute.
//!
//! A tile's element `(p, f)` is the flat index `p·free + f`; an HBM tensor's, its row-major
//! offset. Every access becomes exact runs `[lo, hi]` of elements (a contiguous row is one run, a
//! strided one a run per element), so two runs overlapping is two accesses sharing an element:
//! the search is exact, and bounded (see [`Budget`]).

use std::collections::BTreeMap;

use crate::ir::{BinOp, HbmAccess, TileRegion};

/// How an access uses the elements it touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Use {
    /// Reads them.
    Read,
    /// Overwrites them.
    Write,
    /// Folds a value into them with an associative, commutative reduction.
    Accumulate(Reduction),
}

/// An associative, commutative reduction into a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reduction {
    /// `nc_matmul(..., accumulate=True)` adding into PSUM.
    Matmul,
    /// `nc_matmul(..., accumulate=False)`: the overwrite that starts a PSUM accumulation (the
    /// NKI docs' pattern: the first call overwrites, the next ones accumulate). It commutes
    /// with [`Reduction::Matmul`], not with another overwrite.
    MatmulFirst,
    /// `tensor_tensor(dst, dst, x, op)` (or `x, dst`) with an associative, commutative `op`.
    Op(BinOp),
}

impl Use {
    /// Whether the iterations' order can change what these two uses see or leave.
    pub(super) fn conflicts(self, other: Use) -> bool {
        match (self, other) {
            (Use::Read, Use::Read) => false,
            (Use::Accumulate(a), Use::Accumulate(b)) => match (a, b) {
                (Reduction::MatmulFirst, Reduction::MatmulFirst) => true,
                (Reduction::MatmulFirst, Reduction::Matmul)
                | (Reduction::Matmul, Reduction::MatmulFirst) => false,
                _ => a != b,
            },
            _ => true,
        }
    }

    /// How a message says it.
    pub(super) fn verb(self) -> &'static str {
        match self {
            Use::Read => "reads",
            Use::Write => "writes",
            Use::Accumulate(Reduction::MatmulFirst) => "overwrites (nc_matmul, accumulate off)",
            Use::Accumulate(_) => "accumulates into",
        }
    }
}

/// One run of elements one access touches in one iteration.
#[derive(Clone, Copy, Debug)]
pub(super) struct Touch {
    /// First element.
    pub lo: i64,
    /// Last element (inclusive).
    pub hi: i64,
    /// The iteration.
    pub iteration: u32,
    /// The access (an index the caller gives).
    pub access: u32,
    /// How it is used.
    pub kind: Use,
}

/// The bounds of the exhaustive search: past them, the analysis says it could not decide.
#[derive(Clone, Copy, Debug)]
pub(super) struct Budget {
    /// Runs enumerated for one resource of one loop.
    pub touches: usize,
    /// Pairs of overlapping runs compared.
    pub comparisons: usize,
}

/// Runs of a tile region (tile of `free` elements per partition).
pub(super) fn tile_runs(r: &TileRegion, free: usize, out: &mut Vec<(i64, i64)>) {
    let free = free as i64;
    let (p0, p1) = r.partition_span();
    if r.nf == 0 {
        return;
    }
    if r.is_rect() {
        for p in p0..p1 {
            let base = p as i64 * free + r.f0 as i64;
            out.push((base, base + r.nf as i64 - 1));
        }
        return;
    }
    let offsets = r.free_offsets();
    for p in p0..p1 {
        push_offsets(p as i64 * free, offsets.iter().map(|&f| f as i64), out);
    }
}

/// Runs of an HBM access with its offset `offset` (evaluated).
pub(super) fn hbm_runs(a: &HbmAccess, offset: i64, out: &mut Vec<(i64, i64)>) {
    if a.nf == 0 {
        return;
    }
    let contiguous = a.free_dims.is_none() && (a.f_stride == 1 || a.nf == 1);
    let row: Vec<i64> = if contiguous {
        Vec::new()
    } else {
        a.row_offsets()
    };
    for r in 0..a.np as i64 {
        let base = offset + r * a.p_stride;
        if contiguous {
            out.push((base, base + a.nf as i64 - 1));
        } else {
            push_offsets(base, row.iter().copied(), out);
        }
    }
}

/// Runs of `base + offsets`, consecutive offsets merged.
fn push_offsets(base: i64, offsets: impl Iterator<Item = i64>, out: &mut Vec<(i64, i64)>) {
    let mut sorted: Vec<i64> = offsets.map(|o| base + o).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut iter = sorted.into_iter();
    let Some(first) = iter.next() else { return };
    let (mut lo, mut hi) = (first, first);
    for e in iter {
        if e == hi + 1 {
            hi = e;
        } else {
            out.push((lo, hi));
            (lo, hi) = (e, e);
        }
    }
    out.push((lo, hi));
}

/// Every assignment of `vars` (each over `0..trips[var]`), calling `f` with the values vector
/// (`values[var]` set, the rest left as they are); `false` when there are more than `limit`.
pub(super) fn each_assignment(
    vars: &[crate::affine::LoopVar],
    trips: &[usize],
    values: &mut [i64],
    limit: usize,
    f: &mut dyn FnMut(&[i64]),
) -> bool {
    let count = vars
        .iter()
        .try_fold(1usize, |n, v| n.checked_mul(trips[v.0 as usize]));
    if count.is_none_or(|c| c > limit) {
        return false;
    }
    fn rec(
        vars: &[crate::affine::LoopVar],
        trips: &[usize],
        values: &mut [i64],
        f: &mut dyn FnMut(&[i64]),
    ) {
        let Some((v, rest)) = vars.split_first() else {
            f(values);
            return;
        };
        for k in 0..trips[v.0 as usize] {
            values[v.0 as usize] = k as i64;
            rec(rest, trips, values, f);
        }
        values[v.0 as usize] = 0;
    }
    rec(vars, trips, values, f);
    true
}

/// The first pair of touches of different iterations that share an element and whose uses
/// conflict, `Err(())` when the search ran past `budget.comparisons`.
pub(super) fn first_conflict(
    mut touches: Vec<Touch>,
    budget: Budget,
) -> Result<Option<(Touch, Touch)>, ()> {
    // Runs of one access in one iteration merge first (inner loops, rows of a tile): they
    // never conflict with each other, and the sweep below stays small.
    touches.sort_unstable_by_key(|t| (t.iteration, t.access, t.lo));
    let mut merged: Vec<Touch> = Vec::with_capacity(touches.len());
    for t in touches {
        match merged.last_mut() {
            Some(m)
                if m.iteration == t.iteration
                    && m.access == t.access
                    && t.lo <= m.hi.saturating_add(1) =>
            {
                m.hi = m.hi.max(t.hi);
            }
            _ => merged.push(t),
        }
    }
    merged.sort_unstable_by_key(|t| (t.lo, t.iteration));
    let mut active: Vec<Touch> = Vec::new();
    let mut comparisons = 0usize;
    for t in merged {
        active.retain(|a| a.hi >= t.lo);
        comparisons += active.len() + 1;
        if comparisons > budget.comparisons {
            return Err(());
        }
        if let Some(a) = active
            .iter()
            .find(|a| a.iteration != t.iteration && a.kind.conflicts(t.kind))
        {
            return Ok(Some((*a, t)));
        }
        active.push(t);
    }
    Ok(None)
}

/// Adds the run `lo..=hi` to a set of disjoint runs (first element → last).
pub(super) fn insert_run(runs: &mut BTreeMap<i64, i64>, mut lo: i64, mut hi: i64) {
    if let Some((&l, &h)) = runs.range(..=lo).next_back()
        && h.saturating_add(1) >= lo
    {
        lo = l;
        hi = hi.max(h);
        runs.remove(&l);
    }
    while let Some((&l, &h)) = runs.range(lo..).next() {
        if l > hi.saturating_add(1) {
            break;
        }
        hi = hi.max(h);
        runs.remove(&l);
    }
    runs.insert(lo, hi);
}

/// Whether the runs cover every element of `lo..=hi`.
pub(super) fn covered(runs: &BTreeMap<i64, i64>, lo: i64, hi: i64) -> bool {
    runs.range(..=lo).next_back().is_some_and(|(_, &h)| h >= hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{FreeDim, TileId};

    fn touch(lo: i64, hi: i64, iteration: u32, kind: Use) -> Touch {
        Touch {
            lo,
            hi,
            iteration,
            access: iteration,
            kind,
        }
    }

    const BIG: Budget = Budget {
        touches: 1 << 20,
        comparisons: 1 << 20,
    };

    #[test]
    fn runs_are_exact() {
        let mut out = Vec::new();
        tile_runs(&TileRegion::rect(TileId(0), 1, 2, 3, 4), 10, &mut out);
        assert_eq!(out, [(13, 16), (23, 26)]);
        out.clear();
        let even =
            TileRegion::strided(TileId(0), (0, 1, 1), 0, vec![FreeDim { step: 2, count: 3 }]);
        tile_runs(&even, 10, &mut out);
        assert_eq!(out, [(0, 0), (2, 2), (4, 4)]);
    }

    #[test]
    fn conflicts_need_two_iterations_and_a_write() {
        let acc = Use::Accumulate(Reduction::Matmul);
        let none = first_conflict(
            vec![touch(0, 9, 0, Use::Read), touch(5, 7, 1, Use::Read)],
            BIG,
        );
        assert!(matches!(none, Ok(None)));
        let same = first_conflict(
            vec![touch(0, 9, 0, Use::Write), touch(5, 7, 0, Use::Read)],
            BIG,
        );
        assert!(matches!(same, Ok(None)));
        let sums = first_conflict(vec![touch(0, 9, 0, acc), touch(0, 9, 1, acc)], BIG);
        assert!(matches!(sums, Ok(None)));
        let race = first_conflict(vec![touch(0, 9, 0, acc), touch(9, 9, 1, Use::Read)], BIG);
        assert!(matches!(race, Ok(Some((a, b))) if a.iteration == 0 && b.iteration == 1));
        let apart = first_conflict(
            vec![touch(0, 9, 0, Use::Write), touch(10, 19, 1, Use::Write)],
            BIG,
        );
        assert!(matches!(apart, Ok(None)));
    }
}
