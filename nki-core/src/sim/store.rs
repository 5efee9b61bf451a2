//! Tile storage of one simulated execution frame.
//!
//! Tiles hold fp32 values that are exactly representable in the tile's dtype (rounding happens
//! on every write). A parallel loop iteration gets a child store that borrows the parent's
//! tiles read-only and owns the tiles its body allocates.
//!
//! A whole fp32 tile loaded from an fp32 kernel input reads the input's memory in place
//! ([`TileStore::alias`]): inputs never change during a run, so the tile holds exactly what a
//! copy would, and the load costs nothing. Writing such a tile first copies it into storage of
//! its own.

use crate::dtype::DType;
use crate::ir::{Program, TileId, TileRegion};

enum Slot<'p> {
    Empty,
    Owned(Vec<f32>),
    Shared(&'p [f32]),
    /// Rows of a kernel input, `stride` elements apart (row `r` starts at `data[r * stride]`);
    /// `shared` when the tile belongs to a parent frame (read only here).
    Alias {
        data: &'p [f32],
        stride: usize,
        shared: bool,
    },
}

/// One tile of a frame: its storage here and its geometry.
struct Entry<'p> {
    slot: Slot<'p>,
    /// Free size (row stride).
    stride: usize,
    /// Partition count (the declared one, or a band's share of it).
    partitions: usize,
    dtype: DType,
}

/// The tiles of one frame (one vector, so that a frame costs one allocation).
pub(crate) struct TileStore<'p> {
    tiles: Vec<Entry<'p>>,
}

/// Why a tile could not be accessed.
#[derive(Debug)]
pub(crate) enum StoreError {
    /// Read of a tile that has no storage in this frame.
    Unallocated(TileId),
    /// Write to a tile borrowed from a parent frame.
    SharedWrite(TileId),
}

impl<'p> TileStore<'p> {
    pub(crate) fn new(program: &Program) -> TileStore<'p> {
        TileStore {
            tiles: program
                .tiles
                .iter()
                .map(|t| Entry {
                    slot: Slot::Empty,
                    stride: t.free,
                    partitions: t.partitions,
                    dtype: t.dtype,
                })
                .collect(),
        }
    }

    /// A frame that reads this one's tiles and owns nothing yet.
    pub(crate) fn child(&self) -> TileStore<'_> {
        TileStore {
            tiles: self
                .tiles
                .iter()
                .map(|e| Entry {
                    slot: match &e.slot {
                        Slot::Empty => Slot::Empty,
                        Slot::Owned(v) => Slot::Shared(v.as_slice()),
                        Slot::Shared(r) => Slot::Shared(r),
                        Slot::Alias { data, stride, .. } => Slot::Alias {
                            data,
                            stride: *stride,
                            shared: true,
                        },
                    },
                    stride: e.stride,
                    partitions: e.partitions,
                    dtype: e.dtype,
                })
                .collect(),
        }
    }

    /// Gives `tile` fresh storage in this frame, filled with NaN ([`super::trap::POISON`]) when `poison` is set (when it
    /// is not, the plan proved no instruction reads an element before one writes it).
    /// `partitions` is the tile's height here: its declared one, or a band's share of it.
    pub(crate) fn allocate(&mut self, tile: TileId, partitions: usize, poison: bool) {
        self.tiles[tile.0 as usize].partitions = partitions;
        let n = partitions * self.tiles[tile.0 as usize].stride;
        let slot = &mut self.tiles[tile.0 as usize].slot;
        let mut buf = match std::mem::replace(slot, Slot::Empty) {
            Slot::Owned(v) if v.capacity() >= n => v,
            Slot::Owned(v) => {
                recycle(v);
                take_buffer(n)
            }
            _ => take_buffer(n),
        };
        // Storage may be longer than the tile (rows are found by stride, never by length).
        // Without poison every element is written before it is read, so a reused buffer's old
        // values can stay, and a buffer is filled to its whole capacity the first time it is
        // too short: later tiles of any size up to it then find it ready.
        if buf.len() < n {
            buf.resize(buf.capacity().max(n), super::trap::POISON);
        }
        if poison {
            buf[..n].fill(super::trap::POISON);
        }
        *slot = Slot::Owned(buf);
    }

    /// Appends a scratch tile of `[partitions, free]` and `dtype` to this frame, allocated
    /// (unpoisoned: the caller fills it), and returns its id; [`Self::drop_scratch`] removes it.
    pub(crate) fn push_scratch(&mut self, partitions: usize, free: usize, dtype: DType) -> TileId {
        let id = TileId(self.tiles.len() as u32);
        self.tiles.push(Entry {
            slot: Slot::Empty,
            stride: free,
            partitions,
            dtype,
        });
        self.allocate(id, partitions, false);
        id
    }

    /// Number of tiles this frame knows (the program's, then any scratch tiles).
    pub(crate) fn tile_count(&self) -> usize {
        self.tiles.len()
    }

    /// Removes the scratch tiles from `first` on, returning their storage to the pool.
    pub(crate) fn drop_scratch(&mut self, first: usize) {
        for entry in self.tiles.drain(first..) {
            if let Slot::Owned(v) = entry.slot {
                recycle(v);
            }
        }
    }

    /// Returns `tile`'s storage in this frame to the pool (its last use is past); a tile
    /// borrowed from a parent frame is left to the parent.
    pub(crate) fn release(&mut self, tile: TileId) {
        // A parent's tile, or one with no storage, stays as it is.
        let _ = self.replace_own(tile, Slot::Empty);
    }

    pub(crate) fn dtype(&self, tile: TileId) -> DType {
        self.tiles[tile.0 as usize].dtype
    }

    /// Row `r` of a region.
    #[inline]
    pub(crate) fn row(&self, region: &TileRegion, r: usize) -> Result<&[f32], StoreError> {
        let (data, stride) = self.data(region.tile)?;
        let start = (region.p0 + r) * stride + region.f0;
        Ok(&data[start..start + region.nf])
    }

    /// Row `r` of a region, writable.
    #[inline]
    pub(crate) fn row_mut(
        &mut self,
        region: &TileRegion,
        r: usize,
    ) -> Result<&mut [f32], StoreError> {
        self.own(region.tile)?;
        let stride = self.tiles[region.tile.0 as usize].stride;
        let data = match &mut self.tiles[region.tile.0 as usize].slot {
            Slot::Owned(v) => v.as_mut_slice(),
            Slot::Alias { .. } => unreachable!("`own` replaced the alias"),
            Slot::Shared(_) => return Err(StoreError::SharedWrite(region.tile)),
            Slot::Empty => return Err(StoreError::Unallocated(region.tile)),
        };
        let start = (region.p0 + r) * stride + region.f0;
        Ok(&mut data[start..start + region.nf])
    }

    /// The whole storage of a tile and its row stride (for GEMM operands).
    pub(crate) fn data(&self, tile: TileId) -> Result<(&[f32], usize), StoreError> {
        let stride = self.tiles[tile.0 as usize].stride;
        match &self.tiles[tile.0 as usize].slot {
            Slot::Owned(v) => Ok((v.as_slice(), stride)),
            Slot::Shared(s) => Ok((s, stride)),
            Slot::Alias { data, stride, .. } => Ok((data, *stride)),
            Slot::Empty => Err(StoreError::Unallocated(tile)),
        }
    }

    /// Lets the whole of `tile` (fp32) read `data` in place: row `r` is
    /// `data[r * stride..][..free]`. The caller guarantees `data` holds every row and does not
    /// change while the store lives (a kernel input). The tile must be writable here, as for
    /// [`Self::take`]: allocated in this frame.
    pub(crate) fn alias(
        &mut self,
        tile: TileId,
        data: &'p [f32],
        stride: usize,
    ) -> Result<(), StoreError> {
        let alias = Slot::Alias {
            data,
            stride,
            shared: false,
        };
        self.replace_own(tile, alias)
    }

    /// Replaces the storage this frame has of its own for `tile` by `new` (an owned buffer goes
    /// back to the pool); a tile with no storage here, or a parent's, is an error and unchanged.
    fn replace_own(&mut self, tile: TileId, new: Slot<'p>) -> Result<(), StoreError> {
        let slot = &mut self.tiles[tile.0 as usize].slot;
        match slot {
            Slot::Empty => return Err(StoreError::Unallocated(tile)),
            Slot::Shared(_) | Slot::Alias { shared: true, .. } => {
                return Err(StoreError::SharedWrite(tile));
            }
            Slot::Owned(_) | Slot::Alias { shared: false, .. } => {}
        }
        if let Slot::Owned(v) = std::mem::replace(slot, new) {
            recycle(v);
        }
        Ok(())
    }

    /// Row stride (free size) of a tile's own storage.
    pub(crate) fn stride(&self, tile: TileId) -> usize {
        self.tiles[tile.0 as usize].stride
    }

    /// Partition count of a tile.
    pub(crate) fn partitions(&self, tile: TileId) -> usize {
        self.tiles[tile.0 as usize].partitions
    }

    /// Gives an aliased tile storage of its own (a copy of what it reads), before a write.
    fn own(&mut self, tile: TileId) -> Result<(), StoreError> {
        let i = tile.0 as usize;
        if let Slot::Alias {
            data,
            stride,
            shared,
        } = self.tiles[i].slot
        {
            if shared {
                return Err(StoreError::SharedWrite(tile));
            }
            let free = self.tiles[i].stride;
            let mut buf = take_buffer(self.tiles[i].partitions * free);
            buf.clear();
            for p in 0..self.tiles[i].partitions {
                buf.extend_from_slice(&data[p * stride..p * stride + free]);
            }
            self.tiles[i].slot = Slot::Owned(buf);
        }
        Ok(())
    }

    /// Takes a tile's storage out (to write it while reading others); put it back with [`Self::restore`].
    pub(crate) fn take(&mut self, tile: TileId) -> Result<(Vec<f32>, usize), StoreError> {
        self.own(tile)?;
        let stride = self.tiles[tile.0 as usize].stride;
        match std::mem::replace(&mut self.tiles[tile.0 as usize].slot, Slot::Empty) {
            Slot::Owned(v) => Ok((v, stride)),
            Slot::Shared(s) => {
                self.tiles[tile.0 as usize].slot = Slot::Shared(s);
                Err(StoreError::SharedWrite(tile))
            }
            Slot::Alias { .. } => unreachable!("`own` replaced the alias"),
            Slot::Empty => Err(StoreError::Unallocated(tile)),
        }
    }

    /// Storage for an instruction about to write every element of `region`'s tile (whole
    /// rows of every partition), its old values still readable through the store: for a tile
    /// that reads an input in place ([`TileStore::alias`]), a buffer of its own (the old values
    /// stay in the input; nothing is copied), returned with `true`; otherwise what
    /// [`TileStore::take`] returns, with `false`. [`TileStore::restore`] puts it back either way.
    pub(crate) fn take_to_overwrite(
        &mut self,
        region: &TileRegion,
    ) -> Result<(Vec<f32>, usize, bool), StoreError> {
        let i = region.tile.0 as usize;
        let whole = region.p0 == 0
            && region.f0 == 0
            && region.np == self.tiles[i].partitions
            && region.nf == self.tiles[i].stride;
        if whole && matches!(self.tiles[i].slot, Slot::Alias { shared: false, .. }) {
            let n = region.np * region.nf;
            let mut buf = take_buffer(n);
            if buf.len() < n {
                buf.resize(n, super::trap::POISON);
            }
            return Ok((buf, region.nf, true));
        }
        let (data, stride) = self.take(region.tile)?;
        Ok((data, stride, false))
    }

    pub(crate) fn restore(&mut self, tile: TileId, data: Vec<f32>) {
        if let Slot::Owned(old) =
            std::mem::replace(&mut self.tiles[tile.0 as usize].slot, Slot::Owned(data))
        {
            recycle(old);
        }
    }
}

impl Drop for TileStore<'_> {
    fn drop(&mut self) {
        for entry in self.tiles.drain(..) {
            if let Slot::Owned(v) = entry.slot {
                recycle(v);
            }
        }
    }
}

/// Buffers kept per thread between simulations, so tile allocation in hot loops does not go
/// back to the allocator (large tiles would otherwise be fresh, page-faulting mappings).
const POOL_BUFFERS: usize = 64;

thread_local! {
    static POOL: std::cell::RefCell<Vec<Vec<f32>>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn take_buffer(n: usize) -> Vec<f32> {
    POOL.with(|p| {
        let mut pool = p.borrow_mut();
        // The smallest buffer that fits, so small tiles leave the large buffers to large ones;
        // the most recently recycled one of exactly the size at once (a tile of the same shape
        // as one just released, as in a pipelined or banded run).
        let mut best: Option<(usize, usize)> = None;
        for (i, v) in pool.iter().enumerate().rev() {
            let cap = v.capacity();
            if cap == n {
                best = Some((i, cap));
                break;
            }
            if cap >= n && best.is_none_or(|(_, c)| cap < c) {
                best = Some((i, cap));
            }
        }
        let best = best.map(|(i, _)| i);
        match best {
            Some(i) => pool.swap_remove(i),
            None => Vec::with_capacity(n),
        }
    })
}

fn recycle(v: Vec<f32>) {
    POOL.with(|p| {
        let mut pool = p.borrow_mut();
        if pool.len() < POOL_BUFFERS {
            pool.push(v);
        } else if let Some(smallest) = pool.iter_mut().min_by_key(|b| b.capacity())
            && smallest.capacity() < v.capacity()
        {
            *smallest = v;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store of `tiles` fp32 tiles of `[2, 3]`.
    fn store<'p>(tiles: usize) -> TileStore<'p> {
        TileStore {
            tiles: (0..tiles)
                .map(|_| Entry {
                    slot: Slot::Empty,
                    stride: 3,
                    partitions: 2,
                    dtype: DType::F32,
                })
                .collect(),
        }
    }

    fn region(tile: u32) -> TileRegion {
        TileRegion::rect(TileId(tile), 0, 2, 0, 3)
    }

    /// A released buffer comes back for the next tile that fits it, however long it is: a
    /// poisoned allocation reads NaN in every element of the tile, an unpoisoned one keeps what
    /// is there, and a band's share of a tile (fewer partitions) is a tile of that height.
    #[test]
    fn reused_storage_is_poisoned_only_where_asked() {
        let mut s = store(2);
        s.allocate(TileId(0), 2, false);
        s.row_mut(&region(0), 1)
            .unwrap()
            .copy_from_slice(&[1.0, 2.0, 3.0]);
        s.release(TileId(0));
        s.allocate(TileId(1), 1, false);
        assert_eq!(s.partitions(TileId(1)), 1);
        let one_row = TileRegion { np: 1, ..region(1) };
        assert!(s.row(&one_row, 0).unwrap().iter().all(|v| v.is_nan()));
        s.row_mut(&one_row, 0)
            .unwrap()
            .copy_from_slice(&[4.0, 5.0, 6.0]);
        s.release(TileId(1));
        s.allocate(TileId(0), 2, false);
        assert_eq!(
            s.row(&region(0), 0).unwrap(),
            &[4.0, 5.0, 6.0],
            "old values stay"
        );
        assert_eq!(s.row(&region(0), 1).unwrap(), &[1.0, 2.0, 3.0]);
        s.release(TileId(0));
        s.allocate(TileId(1), 2, true);
        for r in 0..2 {
            assert!(s.row(&region(1), r).unwrap().iter().all(|v| v.is_nan()));
        }
    }

    /// An aliased tile reads the input rows `stride` apart, is copied on its first write (the
    /// input keeps its values), and follows `take`'s rules: only a tile allocated in this frame
    /// can be aliased, and a child frame sees its parent's alias read-only.
    #[test]
    fn aliases_read_in_place_and_copy_on_write() {
        let input: Vec<f32> = (0..8).map(|v| v as f32).collect();
        let mut s = store(2);
        assert!(matches!(
            s.alias(TileId(0), &input, 4),
            Err(StoreError::Unallocated(_))
        ));
        s.allocate(TileId(0), 2, false);
        s.alias(TileId(0), &input[1..], 4).unwrap();
        assert_eq!(s.row(&region(0), 1).unwrap(), &[5.0, 6.0, 7.0]);
        {
            let mut child = s.child();
            assert_eq!(child.row(&region(0), 0).unwrap(), &[1.0, 2.0, 3.0]);
            assert!(matches!(
                child.row_mut(&region(0), 0),
                Err(StoreError::SharedWrite(_))
            ));
            assert!(matches!(
                child.alias(TileId(0), &input, 4),
                Err(StoreError::SharedWrite(_))
            ));
        }
        s.row_mut(&region(0), 0).unwrap()[0] = -1.0;
        assert_eq!(s.row(&region(0), 0).unwrap(), &[-1.0, 2.0, 3.0]);
        assert_eq!(s.row(&region(0), 1).unwrap(), &[5.0, 6.0, 7.0]);
        assert_eq!(
            s.data(TileId(0)).unwrap().1,
            3,
            "its own storage, rows 3 apart"
        );
    }
}
