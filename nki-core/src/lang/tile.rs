//! On-chip tiles (SBUF and PSUM) and regions of them: rectangles, and the strided walks of
//! NKI's access patterns ([`Tile::ap`]).

use crate::dtype::DType;
use crate::ir::{Buffer, FreeDim, Stmt, TileDecl, TileId, TileRegion};
use crate::lang::context::with_builder;
use crate::loc::SourceLoc;

/// A tile handle in SBUF or PSUM: dim 0 is the partition dim, then one or more free dims
/// (`[128, 512]`, or `[128, 4, 64]`: four runs of 64 per partition). Instructions see
/// `[partitions, free elements]`, the free dims row-major; [`Tile::at`] selects a run of them.
///
/// Pass tiles to instructions by reference (`&t`) or as regions (`t.rows(n)`, `t.at(&[i])`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tile {
    id: TileId,
    partitions: usize,
    free: usize,
    free_dims: Vec<usize>,
    dtype: DType,
    buffer: Buffer,
}

/// A tile shape: `[partitions, free dims...]` of any rank from 1 (`[p]` is `[p, 1]`).
pub trait TileShape {
    /// The dims, partition dim first.
    fn dims(&self) -> Vec<usize>;
}

impl<const N: usize> TileShape for [usize; N] {
    fn dims(&self) -> Vec<usize> {
        self.to_vec()
    }
}

#[track_caller]
fn alloc(shape: impl TileShape, dtype: DType, buffer: Buffer) -> Tile {
    let loc = SourceLoc::caller();
    let dims = shape.dims();
    let partitions = dims.first().copied().unwrap_or(0);
    let free_dims: Vec<usize> = if dims.len() > 1 {
        dims[1..].to_vec()
    } else {
        vec![1]
    };
    let free = free_dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .unwrap_or(usize::MAX);
    let shape = dims;
    let id = with_builder(|b| {
        let id = TileId(b.tiles.len() as u32);
        b.tiles.push(TileDecl {
            name: format!("t{}", id.0),
            partitions,
            free,
            dtype,
            buffer,
            loc,
            address: None,
        });
        b.push_stmt(Stmt::Alloc { tile: id });
        if shape.is_empty() || partitions == 0 || free == 0 {
            b.fail(loc, format!("tile shape {shape:?} has an empty dimension"));
        }
        id
    });
    Tile {
        id,
        partitions,
        free,
        free_dims,
        dtype,
        buffer,
    }
}

/// Allocates an SBUF tile (`nl.ndarray(shape, dtype, buffer=nl.sbuf)`), filled with NaN until
/// written. `shape` is `[partitions, free dims...]`.
#[track_caller]
pub fn sbuf(shape: impl TileShape, dtype: DType) -> Tile {
    alloc(shape, dtype, Buffer::Sbuf)
}

/// Allocates a PSUM tile (`buffer=nl.psum`), where `nc_matmul` accumulates.
#[track_caller]
pub fn psum(shape: impl TileShape, dtype: DType) -> Tile {
    alloc(shape, dtype, Buffer::Psum)
}

impl Tile {
    /// Places the tile at `(partition, free)` in its buffer, as `nl.ndarray(address=...)`
    /// does: the author fits placed tiles, so the capacity rules leave it out (the bounds are
    /// the caller's to check).
    pub fn place(&self, address: (usize, usize)) {
        with_builder(|b| b.tiles[self.id.0 as usize].address = Some(address));
    }

    /// The tile's id in the program.
    pub fn id(&self) -> TileId {
        self.id
    }

    /// `[partitions, free]`: the free dims as one (what instructions see).
    pub fn shape(&self) -> [usize; 2] {
        [self.partitions, self.free]
    }

    /// `[partitions, free dims...]` as allocated.
    pub fn dims(&self) -> Vec<usize> {
        let mut d = vec![self.partitions];
        d.extend(&self.free_dims);
        d
    }

    /// All partitions and the contiguous run of free elements the leading free indices
    /// `index` select (`t.at(&[i])` of a `[P, A, B]` tile is its `i`-th run of `B`, as
    /// `t[:, i, :]` in NKI). An index past its dim, or more indices than free dims, is a trace
    /// error at the caller.
    #[track_caller]
    pub fn at(&self, index: &[usize]) -> TileRegion {
        let loc = SourceLoc::caller();
        let bad = if index.len() > self.free_dims.len() {
            Some(format!(
                "{} indices for the {} free dims of tile t{} {:?}",
                index.len(),
                self.free_dims.len(),
                self.id.0,
                self.dims()
            ))
        } else {
            index
                .iter()
                .zip(&self.free_dims)
                .enumerate()
                .find(|(_, (i, d))| i >= d)
                .map(|(k, (i, d))| {
                    format!(
                        "index {i} is outside free dim {} (size {d}) of tile t{} {:?}",
                        k + 1,
                        self.id.0,
                        self.dims()
                    )
                })
        };
        if let Some(message) = bad {
            with_builder(|b| b.fail(loc, message));
            return self.region();
        }
        let rest = &self.free_dims[index.len()..];
        let run: usize = rest.iter().product();
        let f0 = index
            .iter()
            .enumerate()
            .map(|(k, i)| i * self.free_dims[k + 1..].iter().product::<usize>())
            .sum();
        TileRegion::rect(self.id, 0, self.partitions, f0, run)
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// SBUF or PSUM.
    pub fn buffer(&self) -> Buffer {
        self.buffer
    }

    /// The whole tile.
    pub fn region(&self) -> TileRegion {
        TileRegion::rect(self.id, 0, self.partitions, 0, self.free)
    }

    /// NKI's access pattern (`t.ap(pattern=[[step, num], ...], offset=...)`): the first entry is
    /// the partition dim, whose step must be the tile's free size (partitions are read
    /// contiguously, as the NKI docs require of SBUF and PSUM); the others walk the free
    /// elements of each partition, outermost first, any step (0 repeats an element). `offset`
    /// counts elements from the tile's start: partition `offset / free`, free element
    /// `offset % free`. A pattern reaching outside the tile is a trace error at the caller.
    #[track_caller]
    pub fn ap(&self, pattern: &[[usize; 2]], offset: usize) -> TileRegion {
        let loc = SourceLoc::caller();
        let fail = |message: String| {
            with_builder(|b| b.fail(loc, message));
            self.region()
        };
        let Some(([p_step, np], free)) = pattern.split_first().map(|(p, f)| (*p, f)) else {
            return fail(format!(
                "tile t{}: an access pattern needs the partition entry [step, num] first",
                self.id.0
            ));
        };
        if p_step != self.free && np > 1 {
            return fail(format!(
                "tile t{}: the partition entry's step must be the tile's free size {} (partitions \
                 are read contiguously), got [{p_step}, {np}]",
                self.id.0, self.free
            ));
        }
        let dims = free
            .iter()
            .map(|&[step, count]| FreeDim { step, count })
            .collect();
        let region = TileRegion::strided(
            self.id,
            (offset / self.free.max(1), np, 1),
            offset % self.free.max(1),
            dims,
        );
        if !region.within(self.partitions, self.free) {
            return fail(format!(
                "tile t{}: access pattern {pattern:?} at offset {offset} reaches outside the \
                 tile {:?}",
                self.id.0,
                self.dims()
            ));
        }
        region
    }

    /// Partitions `0..n`, all free elements (the ragged last row tile).
    #[track_caller]
    pub fn rows(&self, n: usize) -> TileRegion {
        self.region().rows(n)
    }

    /// Free elements `f0..f0+n` of every partition.
    #[track_caller]
    pub fn cols(&self, f0: usize, n: usize) -> TileRegion {
        self.region().cols(f0, n)
    }
}

impl From<Tile> for TileRegion {
    fn from(t: Tile) -> TileRegion {
        t.region()
    }
}

impl From<&Tile> for TileRegion {
    fn from(t: &Tile) -> TileRegion {
        t.region()
    }
}

impl From<&TileRegion> for TileRegion {
    fn from(r: &TileRegion) -> TileRegion {
        r.clone()
    }
}

impl TileRegion {
    /// `[np, nf]`.
    pub fn shape(&self) -> [usize; 2] {
        [self.np, self.nf]
    }

    /// A sub-region: partitions `p0..p0+np`, free elements `f0..f0+nf`, relative to this one.
    #[track_caller]
    pub fn slice(&self, p0: usize, np: usize, f0: usize, nf: usize) -> TileRegion {
        if self.pattern.is_some() && (f0, nf) != (0, self.nf) {
            let loc = SourceLoc::caller();
            with_builder(|b| {
                b.fail(
                    loc,
                    format!(
                        "free elements {f0}..{} of a strided region: slice the tile, or give \
                         the whole walk with Tile::ap",
                        f0 + nf
                    ),
                )
            });
            return self.clone();
        }
        if p0 + np > self.np || f0 + nf > self.nf {
            let loc = SourceLoc::caller();
            with_builder(|b| {
                b.fail(
                    loc,
                    format!(
                        "tile region [{p0}:{}, {f0}:{}] is outside the {:?} region it slices",
                        p0 + np,
                        f0 + nf,
                        self.shape()
                    ),
                )
            });
            return self.clone();
        }
        if self.pattern.is_some() {
            return TileRegion {
                p0: self.partition_of(p0),
                np,
                ..self.clone()
            };
        }
        TileRegion::rect(self.tile, self.p0 + p0, np, self.f0 + f0, nf)
    }

    /// Partitions `0..n`.
    #[track_caller]
    pub fn rows(&self, n: usize) -> TileRegion {
        self.slice(0, n, 0, self.nf)
    }

    /// Free elements `f0..f0+n`.
    #[track_caller]
    pub fn cols(&self, f0: usize, n: usize) -> TileRegion {
        self.slice(0, self.np, f0, n)
    }
}
