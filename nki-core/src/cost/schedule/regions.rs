//! Dependencies through tiles, tracked per region: a read waits for the earlier writes that
//! overlap it, a write for the earlier reads and writes that overlap it, so writing one chunk
//! of a tile does not make a read of another chunk wait.

use crate::ir::{TileId, TileRegion};
use std::collections::HashMap;

/// A tile buffer instance: the tile and which allocation of it (one per loop iteration).
pub(super) type TileKey = (TileId, u32);

/// The rectangle a region touches: partitions `p.0..p.1`, free elements `f.0..f.1`. A strided
/// region is taken as its partitions' whole free range (conservative).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Rect {
    p: (usize, usize),
    f: (usize, usize),
}

impl Rect {
    pub(super) fn of(r: &TileRegion) -> Rect {
        match &r.pattern {
            None => Rect {
                p: (r.p0, r.p0 + r.np.max(1)),
                f: (r.f0, r.f0 + r.nf.max(1)),
            },
            Some(pattern) => {
                let rows = if pattern.partition_step == 0 {
                    1
                } else {
                    r.np.max(1)
                };
                Rect {
                    p: (r.p0, r.p0 + rows),
                    f: (0, usize::MAX),
                }
            }
        }
    }

    fn overlaps(&self, o: &Rect) -> bool {
        self.p.0 < o.p.1 && o.p.0 < self.p.1 && self.f.0 < o.f.1 && o.f.0 < self.f.1
    }

    fn covers(&self, o: &Rect) -> bool {
        self.p.0 <= o.p.0 && o.p.1 <= self.p.1 && self.f.0 <= o.f.0 && o.f.1 <= self.f.1
    }
}

/// What the scheduler has seen of one region of a buffer: when its last write is visible and
/// its last read ends, and which slices those were.
#[derive(Clone, Copy, Debug)]
struct Entry {
    rect: Rect,
    write_end: f64,
    write_by: Option<usize>,
    read_end: f64,
    read_by: Option<usize>,
}

/// Per buffer, the regions written and read so far.
#[derive(Default)]
pub(super) struct Regions {
    buffers: HashMap<TileKey, Vec<Entry>>,
}

/// The latest of `(time, slice)` pairs.
fn latest(a: (f64, Option<usize>), t: f64, by: Option<usize>) -> (f64, Option<usize>) {
    if t > a.0 { (t, by) } else { a }
}

impl Regions {
    fn overlapping(&self, key: TileKey, rect: Rect) -> impl Iterator<Item = &Entry> {
        self.buffers
            .get(&key)
            .into_iter()
            .flatten()
            .filter(move |e| e.rect.overlaps(&rect))
    }

    /// When a read of `rect` may start: after the overlapping writes are visible.
    pub(super) fn read_ready(&self, key: TileKey, rect: Rect) -> (f64, Option<usize>) {
        self.overlapping(key, rect)
            .fold((0.0, None), |a, e| latest(a, e.write_end, e.write_by))
    }

    /// When a write of `rect` may start: after the overlapping writes and reads.
    pub(super) fn write_ready(&self, key: TileKey, rect: Rect) -> (f64, Option<usize>) {
        self.overlapping(key, rect).fold((0.0, None), |a, e| {
            latest(latest(a, e.write_end, e.write_by), e.read_end, e.read_by)
        })
    }

    /// Whether slice `by` wrote any of `rect`, and among its latest writers.
    pub(super) fn written_by(&self, key: TileKey, rect: Rect, by: usize) -> bool {
        self.overlapping(key, rect).any(|e| e.write_by == Some(by))
    }

    /// The slice whose write of `rect` is visible last.
    pub(super) fn last_writer(&self, key: TileKey, rect: Rect) -> Option<usize> {
        self.read_ready(key, rect).1
    }

    /// Records a read of `rect` ending at `end` by slice `by`.
    pub(super) fn record_read(&mut self, key: TileKey, rect: Rect, end: f64, by: Option<usize>) {
        let list = self.buffers.entry(key).or_default();
        if let Some(e) = list.iter_mut().find(|e| e.rect == rect) {
            if end > e.read_end {
                e.read_end = end;
                e.read_by = by;
            }
            return;
        }
        list.push(Entry {
            rect,
            write_end: 0.0,
            write_by: None,
            read_end: end,
            read_by: by,
        });
    }

    /// Records a write of `rect` visible at `done` by slice `by`. Earlier entries it covers are
    /// dropped: the write waited for them, so anything later that overlaps them waits for it.
    pub(super) fn record_write(&mut self, key: TileKey, rect: Rect, done: f64, by: Option<usize>) {
        let list = self.buffers.entry(key).or_default();
        list.retain(|e| !rect.covers(&e.rect));
        list.push(Entry {
            rect,
            write_end: done,
            write_by: by,
            read_end: 0.0,
            read_by: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rect(p0: usize, np: usize, f0: usize, nf: usize) -> Rect {
        Rect::of(&TileRegion::rect(TileId(0), p0, np, f0, nf))
    }

    #[test]
    fn disjoint_chunks_do_not_wait_and_overlapping_ones_do() {
        let key = (TileId(0), 1);
        let mut r = Regions::default();
        r.record_write(key, rect(0, 128, 0, 512), 10.0, Some(0));
        r.record_write(key, rect(0, 128, 512, 512), 20.0, Some(1));
        assert_eq!(r.read_ready(key, rect(0, 128, 0, 512)), (10.0, Some(0)));
        assert_eq!(r.read_ready(key, rect(0, 128, 256, 512)), (20.0, Some(1)));
        assert_eq!(r.read_ready(key, rect(0, 128, 1024, 8)), (0.0, None));
        r.record_read(key, rect(0, 128, 0, 512), 30.0, Some(2));
        assert_eq!(r.write_ready(key, rect(0, 64, 0, 8)), (30.0, Some(2)));
        assert_eq!(r.write_ready(key, rect(0, 64, 600, 8)), (20.0, Some(1)));
        // A write over the whole tile replaces every entry.
        r.record_write(key, rect(0, 128, 0, 1024), 40.0, Some(3));
        assert_eq!(r.buffers[&key].len(), 1);
        assert!(r.written_by(key, rect(0, 1, 0, 1), 3));
        assert_eq!(r.last_writer(key, rect(0, 1, 0, 1)), Some(3));
    }
}
