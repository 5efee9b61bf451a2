//! On-chip tiles (SBUF and PSUM) and rectangular regions of them.

use crate::dtype::DType;
use crate::ir::{Buffer, Stmt, TileDecl, TileId, TileRegion};
use crate::lang::context::with_builder;
use crate::loc::SourceLoc;

/// A tile handle: `[partitions, free]` in SBUF or PSUM. Dim 0 is the partition dim.
///
/// Pass tiles to instructions by reference (`&t`) or as regions (`t.rows(n)`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tile {
    id: TileId,
    partitions: usize,
    free: usize,
    dtype: DType,
    buffer: Buffer,
}

#[track_caller]
fn alloc(shape: [usize; 2], dtype: DType, buffer: Buffer) -> Tile {
    let loc = SourceLoc::caller();
    let [partitions, free] = shape;
    let id = with_builder(|b| {
        let id = TileId(b.tiles.len() as u32);
        b.tiles.push(TileDecl {
            name: format!("t{}", id.0),
            partitions,
            free,
            dtype,
            buffer,
            loc,
        });
        b.push_stmt(Stmt::Alloc { tile: id });
        if partitions == 0 || free == 0 {
            b.fail(loc, format!("tile shape {shape:?} has an empty dimension"));
        }
        id
    });
    Tile {
        id,
        partitions,
        free,
        dtype,
        buffer,
    }
}

/// Allocates an SBUF tile (`nl.ndarray(shape, dtype, buffer=nl.sbuf)`), filled with NaN until written.
#[track_caller]
pub fn sbuf(shape: [usize; 2], dtype: DType) -> Tile {
    alloc(shape, dtype, Buffer::Sbuf)
}

/// Allocates a PSUM tile (`buffer=nl.psum`), where `nc_matmul` accumulates.
#[track_caller]
pub fn psum(shape: [usize; 2], dtype: DType) -> Tile {
    alloc(shape, dtype, Buffer::Psum)
}

impl Tile {
    /// The tile's id in the program.
    pub fn id(&self) -> TileId {
        self.id
    }

    /// `[partitions, free]`.
    pub fn shape(&self) -> [usize; 2] {
        [self.partitions, self.free]
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
        TileRegion {
            tile: self.id,
            p0: 0,
            np: self.partitions,
            f0: 0,
            nf: self.free,
        }
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
        TileRegion {
            tile: self.tile,
            p0: self.p0 + p0,
            np,
            f0: self.f0 + f0,
            nf,
        }
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
