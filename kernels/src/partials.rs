//! Sums over the rows of a kernel split across the cores of a logical NeuronCore, with the same
//! bits on one core as on two.
//!
//! A kernel whose output sums over its rows (a norm's weight gradient, a mean loss) splits its
//! 128-row tiles across the cores as the row-wise kernels do, each core accumulating the
//! partial sums of its share; the cores then exchange their partials (`sendrecv`) and both add
//! them in one fixed order, share 0 + share 1. The one-core program computes the same shares
//! one after the other, each into its own accumulators, and adds them in the same order, so
//! the sum is associated the same way whether one core or two compute it: bit-identical (IEEE
//! addition is commutative, so both cores of a launch get the same bits too). Each element of a
//! reduced output is then stored by one core only ([`store_share`]), so the `core-race` rule
//! has nothing to find.

use nki_core::isa::LNC_CORES;
use nki_core::prelude::*;
use std::ops::Range;

/// Runs `body` over the row shares of `0..rows` this program computes, each with its own fp32
/// PSUM accumulators (one per shape of `sums`, zeroed), and returns their totals, fp32 SBUF
/// regions of the same shapes: share 0 + share 1, the same bits on every core of the launch and
/// in the one-core program.
///
/// `rows` is cut into 128-row tiles, shared out as [`for_each_program_tile`] shares them
/// ([`share_of`] the tile count): `body(range, accs)` gets a share's rows (tile-aligned, the
/// ragged last tile in the last share; possibly empty, its partials then zeros) and does all
/// of its work for them, the per-row outputs included, accumulating into `accs`
/// (`nc_matmul(.., accumulate = true)`). Traced as one program, every share of the target's
/// logical core ([`Target::default_lnc`]: two on Trn2/Trn3, one on Trn1) is computed in turn
/// and the partials added; traced as one core of a two-core launch, the core computes its own
/// share and swaps its partials with the other core's in one `sendrecv` (at the top level of the
/// instance: call this outside loops). On a grid of more than two instances, which cannot
/// exchange, each instance computes every share as one program does.
///
/// A share's partials are copied out of PSUM side by side into one SBUF tile (`[max rows,
/// Σ columns]`), so a share holds its PSUM banks only while it runs, and the exchange is one
/// transfer.
pub(crate) fn sum_row_shares(
    rows: usize,
    sums: &[[usize; 2]],
    mut body: impl FnMut(Range<usize>, &[Tile]),
) -> Vec<TileRegion> {
    let tiles = rows.div_ceil(PMAX);
    let instance = program_instance().filter(|&(_, n)| n <= LNC_CORES);
    let (shares, count) = match instance {
        Some((k, n)) => (k..k + 1, n),
        None => {
            let n = current_target().default_lnc();
            (0..n, n)
        }
    };
    let shape = [
        sums.iter().map(|s| s[0]).max().unwrap_or(1),
        sums.iter().map(|s| s[1]).sum::<usize>().max(1),
    ];
    // Each sum's columns in the packed tile.
    let columns: Vec<(usize, [usize; 2])> = sums
        .iter()
        .scan(0, |c0, &s| {
            let at = *c0;
            *c0 += s[1];
            Some((at, s))
        })
        .collect();
    let partials: Vec<Tile> = shares
        .map(|k| {
            let share = share_of(tiles, k, count);
            let accs: Vec<Tile> = sums.iter().map(|&s| psum(s, DType::F32)).collect();
            for acc in &accs {
                memset(acc, 0.0);
            }
            body(rows_of_tiles(share, rows), &accs);
            let packed = sbuf(shape, DType::F32);
            if sums.iter().any(|s| s[0] < shape[0]) || sums.is_empty() {
                memset(&packed, 0.0);
            }
            for (acc, &(c0, [p, w])) in accs.iter().zip(&columns) {
                tensor_copy(packed.region().slice(0, p, c0, w), acc);
            }
            packed
        })
        .collect();
    let total = match (instance, partials.as_slice()) {
        (Some((k, 2)), [mine]) => {
            let theirs = sbuf(shape, DType::F32);
            let other = 1 - k;
            sendrecv(&theirs, mine, (other, other), 0);
            let (first, second) = if k == 0 {
                (mine, &theirs)
            } else {
                (&theirs, mine)
            };
            add(first, second)
        }
        // Every share here: added in order, share 0 first (one share: its partials).
        (_, [first, rest @ ..]) => rest.iter().fold(first.clone(), |sum, p| add(&sum, p)),
        (_, []) => unreachable!("a program computes at least one share"),
    };
    columns
        .iter()
        .map(|&(c0, [p, w])| total.region().slice(0, p, c0, w))
        .collect()
}

/// `first + second`, fp32, into a new tile.
fn add(first: &Tile, second: &Tile) -> Tile {
    let total = sbuf(first.shape(), DType::F32);
    tensor_tensor(&total, first, second, BinOp::Add);
    total
}

/// The rows `0..rows` of the 128-row tiles `tiles` (the last one ragged).
fn rows_of_tiles(tiles: Range<usize>, rows: usize) -> Range<usize> {
    let start = (tiles.start * PMAX).min(rows);
    start..(tiles.end * PMAX).clamp(start, rows)
}

/// Stores this program's share of the columns of `src` (`[p, w]`, a result every core of the
/// launch holds, such as [`sum_row_shares`]'s totals) into `dst` (`[p, w]`): on two cores each
/// stores its half ([`program_share`] of the columns; for one column, the last core stores it),
/// so every element is written once. One program stores everything. The store carries the
/// caller's line.
#[track_caller]
pub(crate) fn store_share(dst: HbmView, src: impl Into<TileRegion>) {
    let src: TileRegion = src.into();
    let share = program_share(src.nf);
    if !share.is_empty() {
        dma_copy(
            dst.cols(share.start, share.len()),
            src.slice(0, src.np, share.start, share.len()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nki_core::ir::Program;
    use nki_core::lang::{InputSpec, trace_on_cores};
    use nki_core::sim::{SimOptions, simulate_to_vecs};
    use nki_core::validate::validate_with_warnings;

    /// `out[0, c] = Σ_rows x[r, c]` through [`sum_row_shares`] (a ones column summing each row
    /// tile into PSUM), and `copy = x` row tile by row tile inside the shares: a kernel with a
    /// reduced output and a per-row one.
    fn column_sums(x: &[Hbm]) -> Vec<Hbm> {
        let x = &x[0];
        let (n, d) = (x.dim(0), x.dim(1));
        let out = shared_hbm(&[1, d], DType::F32);
        let copy = shared_hbm(&[n, d], DType::F32);
        let ones = sbuf([PMAX, 1], DType::F32);
        memset(&ones, 1.0);
        let totals = sum_row_shares(n, &[[1, d]], |share, accs| {
            for_each_tile_in(share, PMAX, |rows| {
                let t = sbuf([rows.size, d], DType::F32);
                dma_copy(&t, x.rows(rows.start.clone(), rows.size));
                nc_matmul(&accs[0], ones.rows(rows.size), &t, true);
                dma_copy(copy.rows(rows.start, rows.size), &t);
            });
        });
        store_share(out.view(), totals[0].clone());
        vec![out, copy]
    }

    /// `x[n, d]`: values of very different magnitudes, whose fp32 sums round differently when
    /// associated differently.
    fn input(n: usize, d: usize) -> Vec<f32> {
        (0..n * d)
            .map(|i| ((i * 7919) % 4099) as f32 * if i % 3 == 0 { 1e3 } else { 1.37e-3 })
            .collect()
    }

    /// [`column_sums`] traced on `cores` cores of `target` (validated: no error, no warning).
    fn program(n: usize, d: usize, target: Target, cores: usize) -> Program {
        let spec = [InputSpec {
            name: "x".into(),
            shape: vec![n, d],
            dtype: DType::F32,
        }];
        let program = trace_on_cores("column_sums", target, cores, &spec, column_sums).unwrap();
        let warnings = validate_with_warnings(&program).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        program
    }

    /// `program`'s outputs on `x`.
    fn run(program: &Program, x: &[f32]) -> Vec<Vec<f32>> {
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let outs = simulate_to_vecs(program, &[&bytes], SimOptions::default()).unwrap();
        outs.iter()
            .map(|b| {
                b.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            })
            .collect()
    }

    /// Two halves (three row tiles, the last ragged), an empty share (one row tile: core 0's
    /// share is empty, its partial zeros), a single row, an empty batch and two full tiles: on
    /// two cores the program exchanges and computes the one-core bits, every row copied once
    /// and every sum stored once (no `core-race` finding).
    #[test]
    fn two_cores_compute_the_one_core_bits_with_any_share() {
        for (n, d) in [
            (3 * PMAX - 5, 40),
            (PMAX, 7),
            (1, 3),
            (0, 5),
            (2 * PMAX, 512),
        ] {
            let x = input(n, d);
            let (one, two) = (
                program(n, d, Target::Trn2, 1),
                program(n, d, Target::Trn2, 2),
            );
            assert!(one.grid.is_empty(), "n = {n}: one core is one program");
            assert_eq!(two.grid, [2], "n = {n}: launched on two cores");
            let (a, b) = (run(&one, &x), run(&two, &x));
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&a[0]), bits(&b[0]), "n = {n}, d = {d}");
            assert_eq!(a[1], x, "n = {n}: every row copied");
            assert_eq!(b[1], x, "n = {n}: every row copied on two cores");
            if n == 0 {
                assert!(
                    a[0].iter().all(|&v| v == 0.0),
                    "a sum over no rows is zeros"
                );
            }
        }
    }

    /// On Trn2 the one-core sum is half 0 + half 1 in fp32, each half summed as one
    /// accumulator sums it (Trn1's one-core program: a logical core of one core, one share),
    /// which differs from one accumulator over every row at this input.
    #[test]
    fn the_sum_is_half_0_plus_half_1() {
        let (n, d) = (3 * PMAX - 5, 40);
        let x = input(n, d);
        let trn2 = run(&program(n, d, Target::Trn2, 1), &x);
        let whole = |rows: Range<usize>| {
            let p = program(rows.len(), d, Target::Trn1, 1);
            run(&p, &x[rows.start * d..rows.end * d]).swap_remove(0)
        };
        // Three row tiles: core 0 takes the first, core 1 the other two.
        let halves = (whole(0..PMAX), whole(PMAX..n));
        for (c, &got) in trn2[0].iter().enumerate() {
            let want = halves.0[c] + halves.1[c];
            assert_eq!(got.to_bits(), want.to_bits(), "column {c}: {got} vs {want}");
        }
        assert_ne!(
            trn2[0],
            whole(0..n),
            "the input distinguishes the associations"
        );
    }
}
