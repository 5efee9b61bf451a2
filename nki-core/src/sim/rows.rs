//! Row iteration over an instruction's destination tile: the partitions of an elementwise
//! instruction are independent, so a large one is split across the simulator's threads (rows
//! computed in any order give the same bits), and a small one, or one whose input overlaps its
//! destination on other partitions, runs row after row.

use crate::ir::TileRegion;
use crate::sim::dma::RowSink;
use crate::sim::store::{StoreError, TileStore};
use crate::sim::threads;

/// Instructions with fewer elements than this run on one thread (splitting costs a few
/// microseconds; a `[128, 256]` fp32 pass takes tens).
const SPLIT_MIN_ELEMENTS: usize = 128 * 256;

/// Reusable row buffers of one thread.
#[derive(Default)]
pub(crate) struct Scratch {
    /// First input row (also the DMA paths' staging row).
    pub(crate) a: Vec<f32>,
    /// Second input row.
    b: Vec<f32>,
    /// An output row on its way to a DMA store ([`Writes::Forwarded`]).
    out: Vec<f32>,
}

/// Whether `dst`'s rows may be computed on several threads: enough work, and every input that
/// lives in the destination tile on the same partitions (row `r` reads only row `r` there).
fn splittable(split: bool, dst: &TileRegion, inputs: &[&TileRegion]) -> bool {
    split
        && dst.np > 1
        && dst.np * dst.nf >= SPLIT_MIN_ELEMENTS
        && inputs.iter().all(|i| i.tile != dst.tile || i.p0 == dst.p0)
}

/// `regions` (an instruction's destination, then its inputs) seen as one row each, when the
/// row loop then computes the same elements: every region a whole-width rectangle of its
/// tile's storage (its rows follow one another), of the destination's height; every input in
/// the destination's tile the destination itself (row `r` reads only its own old row, and one
/// row reads every old value before it writes); and the instruction too small to split across
/// threads anyway. Only for arithmetic that does not depend on the row. A `[128, 1]` column
/// then costs one row's overhead instead of 128 (cross_entropy's per-row statistics are
/// dozens of such instructions).
pub(crate) fn as_one_row<const N: usize>(
    store: &TileStore<'_>,
    split: bool,
    regions: [&TileRegion; N],
) -> Option<[TileRegion; N]> {
    let (dst, inputs) = regions.split_first()?;
    let whole_rows = |r: &TileRegion| {
        r.is_rect()
            && r.f0 == 0
            && r.np == dst.np
            && store.data(r.tile).is_ok_and(|(_, stride)| stride == r.nf)
    };
    let one_row = dst.np > 1
        && !splittable(split, dst, inputs)
        && regions.iter().all(|r| whole_rows(r))
        && inputs.iter().all(|i| i.tile != dst.tile || *i == *dst);
    one_row.then(|| regions.map(|r| TileRegion::rect(r.tile, 0, 1, r.p0 * r.nf, r.np * r.nf)))
}

/// Whether a row loop over `region` (reading no tile it writes) runs on the calling thread:
/// splitting is off, or the region is too small to split.
pub(crate) fn on_one_thread(split: bool, region: &TileRegion) -> bool {
    !splittable(split, region, &[])
}

/// Where an instruction's input rows come from, looked up once per instruction: its tile's
/// storage in the store, or — when it lives in the destination tile, which may overlap the
/// output row — the destination's own storage, each row copied to scratch first. With `fresh`
/// (the destination writes a buffer of its own, its old values still in the store:
/// [`TileStore::take_to_overwrite`]) every input is read from the store.
enum Source<'t> {
    /// The input tile's storage and row stride.
    Stored(&'t [f32], usize),
    /// The destination tile.
    InDestination,
}

impl<'t> Source<'t> {
    fn of(
        store: &'t TileStore<'_>,
        (dst, fresh): (&TileRegion, bool),
        input: &TileRegion,
    ) -> Result<Source<'t>, StoreError> {
        if input.tile == dst.tile && !fresh {
            Ok(Source::InDestination)
        } else {
            let (data, stride) = store.data(input.tile)?;
            Ok(Source::Stored(data, stride))
        }
    }

    /// Row `r` of `input`: from its storage, or `in_dst()` (the row as the destination's
    /// storage holds it) copied to `scratch`.
    #[inline(always)]
    fn row<'s, 'd>(
        &self,
        input: &TileRegion,
        r: usize,
        in_dst: impl FnOnce() -> &'d [f32],
        scratch: &'s mut Vec<f32>,
    ) -> &'s [f32]
    where
        't: 's,
    {
        match *self {
            Source::Stored(data, stride) => row_in(data, stride, input, r),
            Source::InDestination => {
                scratch.clear();
                scratch.extend_from_slice(in_dst());
                scratch
            }
        }
    }
}

/// Whether a row loop's `f` writes every element of its output row (an arithmetic result, a
/// copy) or may leave some as they were (a predicated copy), and where the rows go.
#[derive(Clone, Copy)]
pub(crate) enum Writes<'k> {
    /// Every element of the output row.
    Every,
    /// Possibly only some; the others keep their old values.
    Part,
    /// Every element, each row handed to the DMA store that follows the instruction instead of
    /// the destination tile, which nothing reads again ([`super::forward`]).
    Forwarded(&'k RowSink<'k>),
}

/// The destination's storage for a row loop, and whether it is a fresh buffer (see
/// [`input_row`]): fresh only when `f` writes every element, the loop covers the whole tile and
/// every input in the destination tile is the destination region itself (row `r` reads only
/// its own old row), so no old value is needed from the buffer.
fn take_destination(
    store: &mut TileStore<'_>,
    (dst, writes): (&TileRegion, Writes),
    inputs: &[&TileRegion],
) -> Result<(Vec<f32>, usize, bool), StoreError> {
    if matches!(writes, Writes::Every) && inputs.iter().all(|i| i.tile != dst.tile || *i == dst) {
        store.take_to_overwrite(dst)
    } else {
        let (out, stride) = store.take(dst.tile)?;
        Ok((out, stride, false))
    }
}

/// Row `r` of `region` inside a tile's storage with row stride `stride`.
fn row_in<'t>(data: &'t [f32], stride: usize, region: &TileRegion, r: usize) -> &'t [f32] {
    let start = (region.p0 + r) * stride + region.f0;
    &data[start..start + region.nf]
}

/// `input`'s part of `row`, the destination's whole partition `p0 + r` in a split run (an
/// input in the destination tile sits on the same partition, see [`splittable`]).
fn in_row<'d>(row: &'d [f32], input: &TileRegion) -> &'d [f32] {
    &row[input.f0..input.f0 + input.nf]
}

/// Calls `f(r, out_row, in_row)` for every row of `dst`, writing the destination in place, and
/// returns what each call returned, in row order. `split` allows several threads.
pub(crate) fn rows1<R: Send>(
    store: &mut TileStore<'_>,
    dst: &TileRegion,
    a: &TileRegion,
    s: &mut Scratch,
    split: bool,
    f: impl Fn(usize, &mut [f32], &[f32]) -> R + Sync,
) -> Result<Vec<R>, StoreError> {
    rows1_writing(store, (dst, Writes::Part), a, s, split, f)
}

/// [`rows1`] with what `f` writes said: with [`Writes::Every`] the destination may get a
/// buffer of its own (see [`take_destination`]).
pub(crate) fn rows1_writing<R: Send>(
    store: &mut TileStore<'_>,
    (dst, writes): (&TileRegion, Writes),
    a: &TileRegion,
    s: &mut Scratch,
    split: bool,
    f: impl Fn(usize, &mut [f32], &[f32]) -> R + Sync,
) -> Result<Vec<R>, StoreError> {
    if let Writes::Forwarded(sink) = writes {
        let (x, x_stride) = store.data(a.tile)?;
        return Ok(forward_rows(
            dst,
            split,
            sink,
            s,
            #[inline(always)]
            |r, out| f(r, out, row_in(x, x_stride, a, r)),
        ));
    }
    let (mut out, stride, fresh) = take_destination(store, (dst, writes), &[a])?;
    let shared: &TileStore<'_> = store;
    let source = match Source::of(shared, (dst, fresh), a) {
        Ok(source) => source,
        Err(e) => {
            store.restore(dst.tile, out);
            return Err(e);
        }
    };
    let result = if splittable(split, dst, &[a]) {
        threads::map_rows_mut(
            &mut out[dst.p0 * stride..(dst.p0 + dst.np) * stride],
            stride,
            Vec::new,
            |scratch, r, row| {
                let x = source.row(a, r, || in_row(row, a), scratch);
                let out = &mut row[dst.f0..dst.f0 + dst.nf];
                crate::wide::wide(
                    #[inline(always)]
                    || f(r, out, x),
                )
            },
        )
    } else {
        crate::wide::wide(
            #[inline(always)]
            // A loop, not `map().collect()`: the iterator's fold is a function of its own that
            // the compiler may leave un-inlined, and so compiled without the wide instructions.
            || {
                let mut results = Vec::with_capacity(dst.np);
                for r in 0..dst.np {
                    let x = source.row(a, r, || row_in(&out, stride, a, r), &mut s.a);
                    let start = (dst.p0 + r) * stride + dst.f0;
                    results.push(f(r, &mut out[start..start + dst.nf], x));
                }
                results
            },
        )
    };
    store.restore(dst.tile, out);
    Ok(result)
}

/// Calls `f(r, out_row, a_row, b_row)` for every row `r` of `dst`, writing the destination in
/// place, and returns what each call returned, in row order. `split` allows several threads.
pub(crate) fn rows2<R: Send>(
    store: &mut TileStore<'_>,
    dst: &TileRegion,
    a: &TileRegion,
    b: &TileRegion,
    s: &mut Scratch,
    split: bool,
    f: impl Fn(usize, &mut [f32], &[f32], &[f32]) -> R + Sync,
) -> Result<Vec<R>, StoreError> {
    rows2_writing(store, (dst, Writes::Part), (a, b), s, split, f)
}

/// [`rows2`] with what `f` writes said: with [`Writes::Every`] the destination may get a
/// buffer of its own (see [`take_destination`]).
pub(crate) fn rows2_writing<R: Send>(
    store: &mut TileStore<'_>,
    (dst, writes): (&TileRegion, Writes),
    (a, b): (&TileRegion, &TileRegion),
    s: &mut Scratch,
    split: bool,
    f: impl Fn(usize, &mut [f32], &[f32], &[f32]) -> R + Sync,
) -> Result<Vec<R>, StoreError> {
    if let Writes::Forwarded(sink) = writes {
        let (x, x_stride) = store.data(a.tile)?;
        let (y, y_stride) = store.data(b.tile)?;
        return Ok(forward_rows(
            dst,
            split,
            sink,
            s,
            #[inline(always)]
            |r, out| f(r, out, row_in(x, x_stride, a, r), row_in(y, y_stride, b, r)),
        ));
    }
    let (mut out, stride, fresh) = take_destination(store, (dst, writes), &[a, b])?;
    let shared: &TileStore<'_> = store;
    let sources = Source::of(shared, (dst, fresh), a)
        .and_then(|x| Ok((x, Source::of(shared, (dst, fresh), b)?)));
    let (source_a, source_b) = match sources {
        Ok(sources) => sources,
        Err(e) => {
            store.restore(dst.tile, out);
            return Err(e);
        }
    };
    let result = if splittable(split, dst, &[a, b]) {
        threads::map_rows_mut(
            &mut out[dst.p0 * stride..(dst.p0 + dst.np) * stride],
            stride,
            Scratch::default,
            |scratch, r, row| {
                let x = source_a.row(a, r, || in_row(row, a), &mut scratch.a);
                let y = source_b.row(b, r, || in_row(row, b), &mut scratch.b);
                let out = &mut row[dst.f0..dst.f0 + dst.nf];
                crate::wide::wide(
                    #[inline(always)]
                    || f(r, out, x, y),
                )
            },
        )
    } else {
        crate::wide::wide(
            #[inline(always)]
            // A loop, for the reason given in `rows1_writing`.
            || {
                let mut results = Vec::with_capacity(dst.np);
                for r in 0..dst.np {
                    let x = source_a.row(a, r, || row_in(&out, stride, a, r), &mut s.a);
                    let y = source_b.row(b, r, || row_in(&out, stride, b, r), &mut s.b);
                    let start = (dst.p0 + r) * stride + dst.f0;
                    results.push(f(r, &mut out[start..start + dst.nf], x, y));
                }
                results
            },
        )
    };
    store.restore(dst.tile, out);
    Ok(result)
}

/// Computes every row of `dst` with `f(r, out)` into a row buffer and hands it to `sink`
/// instead of the destination tile ([`Writes::Forwarded`]); returns what each call returned,
/// in row order. Inputs are read from their tiles as they are: the plan allows this only when
/// every input in the destination tile is the destination region itself, so row `r` reads its
/// own old row, as it does when the tile is written. Rows go to several threads when `split`
/// allows and they write disjoint memory.
fn forward_rows<R: Send>(
    dst: &TileRegion,
    split: bool,
    sink: &RowSink<'_>,
    s: &mut Scratch,
    f: impl Fn(usize, &mut [f32]) -> R + Sync,
) -> Vec<R> {
    if sink.rows_disjoint() && splittable(split, dst, &[]) {
        threads::map(dst.np, Vec::new, |out, r| {
            crate::wide::wide(
                #[inline(always)]
                || forward_row(dst, sink, &f, r, out),
            )
        })
    } else {
        crate::wide::wide(
            #[inline(always)]
            || {
                let mut results = Vec::with_capacity(dst.np);
                for r in 0..dst.np {
                    results.push(forward_row(dst, sink, &f, r, &mut s.out));
                }
                results
            },
        )
    }
}

/// Row `r` of [`forward_rows`]: `f` computes it into the tensor's row where that stores the
/// same bits ([`RowSink::row_in_place`]), else into `out`, which then goes to `sink`. Always
/// inlined, with `f`, into the wide copies of its callers: called, it would be compiled for the
/// baseline's four lanes.
#[inline(always)]
fn forward_row<R>(
    dst: &TileRegion,
    sink: &RowSink<'_>,
    f: &impl Fn(usize, &mut [f32]) -> R,
    r: usize,
    out: &mut Vec<f32>,
) -> R {
    // SAFETY: `forward_rows` asks for each row once.
    if let Some(row) = unsafe { sink.row_in_place(r) } {
        debug_assert_eq!(row.len(), dst.nf, "the store moves the region's shape");
        return f(r, row);
    }
    out.truncate(dst.nf);
    out.resize(dst.nf, 0.0);
    let result = f(r, out);
    sink.put(r, out);
    result
}

/// Calls `f(r, row)` for every row of `region`, writing it in place (a DMA into a tile).
/// `split` allows several threads.
pub(crate) fn fill_rows(
    store: &mut TileStore<'_>,
    region: &TileRegion,
    split: bool,
    f: impl Fn(usize, &mut [f32]) + Sync,
) -> Result<(), StoreError> {
    let (mut out, stride) = store.take(region.tile)?;
    let rows = &mut out[region.p0 * stride..(region.p0 + region.np) * stride];
    let fill = |(r, row): (usize, &mut [f32])| f(r, &mut row[region.f0..region.f0 + region.nf]);
    if splittable(split, region, &[]) {
        threads::map_rows_mut(rows, stride, || (), |_, r, row| fill((r, row)));
    } else {
        rows.chunks_mut(stride).enumerate().for_each(fill);
    }
    store.restore(region.tile, out);
    Ok(())
}

/// Calls `f(r, row)` for every row of `region` (a DMA out of a tile), on several threads when
/// `split` allows and `disjoint` says the calls write disjoint memory.
pub(crate) fn read_rows(
    store: &TileStore<'_>,
    region: &TileRegion,
    split: bool,
    disjoint: bool,
    f: impl Fn(usize, &[f32]) + Sync,
) -> Result<(), StoreError> {
    let read = |r: usize| store.row(region, r).map(|row| f(r, row));
    if disjoint && splittable(split, region, &[]) {
        threads::map(region.np, || (), |_, r| read(r))
            .into_iter()
            .collect()
    } else {
        (0..region.np).try_for_each(read)
    }
}
