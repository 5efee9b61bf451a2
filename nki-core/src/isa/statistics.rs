//! The vector engine's batch-normalisation statistics: `nisa.bn_stats`, per-partition mean and
//! variance of up to 512 elements as `(count, mean, variance · count)` triples, and
//! `nisa.bn_aggr`, which combines any number of triples into a mean and a variance.

use super::{SourceLoc, TileRegion};
use crate::ir::Op;
use crate::lang::context::with_builder;

/// The most elements per partition one `bn_stats` reads (NKI's `nl.tile_size.bn_stats_fmax`).
pub const BN_STATS_FMAX: usize = 512;

/// `nisa.bn_stats(dst, data)`: for each partition of `data` (at most [`BN_STATS_FMAX`]
/// elements), `dst` (`(P, 6)`) gets `(count, mean, variance · count)` of the even-indexed
/// elements, then the same of the odd-indexed ones, in fp32. Combine one or more of them with
/// [`bn_aggr`]; rows longer than 512 take one `bn_stats` per 512 columns, each writing its six
/// columns of one statistics tile.
#[track_caller]
pub fn bn_stats(dst: impl Into<TileRegion>, data: impl Into<TileRegion>) {
    let loc = SourceLoc::caller();
    let (dst, data) = (dst.into(), data.into());
    with_builder(|b| {
        if data.nf > BN_STATS_FMAX {
            b.fail(
                loc,
                format!(
                    "bn_stats: data has {} elements per partition; the vector engine takes at most \
                     {BN_STATS_FMAX} per bn_stats (one per 512 columns, then bn_aggr)",
                    data.nf
                ),
            );
        } else if dst.shape() != [data.np, 6] {
            b.fail(
                loc,
                format!(
                    "bn_stats: dst must be ({}, 6), two (count, mean, variance·count) triples per \
                     partition, got shape {:?}",
                    data.np,
                    dst.shape()
                ),
            );
        } else {
            b.push_op(Op::BnStats { dst, data }, loc);
        }
    });
}

/// `nisa.bn_aggr(dst, data)`: combines the `(count, mean, variance · count)` triples of `data`
/// (`(P, 3k)`, written by [`bn_stats`]) into `dst` (`(P, 2)`): the mean, then the biased
/// variance of every element the triples describe, in fp32.
#[track_caller]
pub fn bn_aggr(dst: impl Into<TileRegion>, data: impl Into<TileRegion>) {
    let loc = SourceLoc::caller();
    let (dst, data) = (dst.into(), data.into());
    with_builder(|b| {
        if data.nf == 0 || data.nf % 3 != 0 {
            b.fail(
                loc,
                format!(
                    "bn_aggr: data must hold (count, mean, variance·count) triples, a multiple of 3 \
                     elements per partition, got {}",
                    data.nf
                ),
            );
        } else if dst.shape() != [data.np, 2] {
            b.fail(
                loc,
                format!(
                    "bn_aggr: dst must be ({}, 2), a mean and a variance per partition, got shape {:?}",
                    data.np,
                    dst.shape()
                ),
            );
        } else {
            b.push_op(Op::BnAggr { dst, data }, loc);
        }
    });
}
