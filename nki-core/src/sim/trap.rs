//! The non-finite trap ([`super::SimOptions::trap_nonfinite`]): the simulation stops at the
//! first instruction that writes NaN or ±inf over a finite or never-written element of a tile, with a
//! `SimulationError` naming the instruction, its line, the element and what the instruction
//! read (elements never written, NaN, infinities).
//!
//! A fresh tile's unwritten elements are a NaN of their own ([`POISON`]), so a read of memory
//! no instruction wrote is told apart from a NaN the arithmetic made. The trap compares each
//! written tile's elements before and after the instruction, instruction by instruction, on one
//! thread: it is a debugging mode, as slow as the tiles are large.

use crate::error::NkiError;
use crate::ir::{Instruction, TileId, TileRegion};
use crate::sim::store::TileStore;

/// The value of a tile element no instruction has written: a quiet NaN with a payload of its
/// own, so that the trap can say "never written" rather than "NaN".
pub(crate) const POISON: f32 = f32::from_bits(0x7FC0_0BAD);

/// Whether `x` is [`POISON`] (compared by bits: every NaN compares unequal).
pub(crate) fn is_poison(x: f32) -> bool {
    x.to_bits() == POISON.to_bits()
}

/// The written tiles' elements before an instruction: `(tile, a copy of its storage)`.
pub(crate) struct Before(Vec<(TileId, Vec<f32>)>);

/// What an unwritten element of a written tile holds while the instruction runs: a NaN with
/// another payload, so that an element the instruction leaves alone is told apart from one it
/// computes from [`POISON`] (arithmetic on a NaN keeps its payload).
const UNTOUCHED: f32 = f32::from_bits(0x7FC0_0BAE);

/// Copies the tiles `inst` writes, before it runs, and marks their unwritten elements
/// [`UNTOUCHED`] ([`after`] puts [`POISON`] back).
pub(crate) fn before(inst: &Instruction, store: &mut TileStore<'_>) -> Before {
    let mut tiles: Vec<TileId> = inst.op.tile_writes().iter().map(|r| r.tile).collect();
    tiles.sort_unstable_by_key(|t| t.0);
    tiles.dedup();
    Before(
        tiles
            .into_iter()
            .filter_map(|tile| {
                let (mut data, _) = store.take(tile).ok()?;
                let old = data.clone();
                for x in data.iter_mut().filter(|x| is_poison(**x)) {
                    *x = UNTOUCHED;
                }
                store.restore(tile, data);
                Some((tile, old))
            })
            .collect(),
    )
}

/// After `inst` ran: the trap's error when it made a finite element of a tile it wrote
/// non-finite, naming the first such element and what the instruction read.
pub(crate) fn after(
    inst: &Instruction,
    store: &mut TileStore<'_>,
    before: Before,
    tile_name: impl Fn(TileId) -> String,
) -> Result<(), NkiError> {
    let mut first = None;
    for (tile, old) in &before.0 {
        let Ok((mut data, stride)) = store.take(*tile) else {
            continue;
        };
        for (i, x) in data.iter_mut().enumerate() {
            if x.to_bits() == UNTOUCHED.to_bits() {
                *x = POISON;
            } else if first.is_none() && old.get(i).is_some_and(|&o| made_nonfinite(o, *x)) {
                first = Some((*tile, i, stride, old[i], *x));
            }
        }
        store.restore(*tile, data);
    }
    if let Some((tile, i, stride, old, value)) = first {
        let value = describe(value);
        let was = if is_poison(old) {
            "never written before"
        } else {
            "finite before"
        };
        let (p, f) = (i / stride.max(1), i % stride.max(1));
        let reads: Vec<String> = inst
            .op
            .tile_reads()
            .into_iter()
            .map(|r| read_summary(&*store, r, &tile_name))
            .collect();
        let reads = if reads.is_empty() {
            "it reads no tile".to_string()
        } else {
            format!("it read {}", reads.join("; "))
        };
        return Err(NkiError::Simulation {
            message: format!(
                "non-finite trap: this instruction wrote {value} to {}[{p}, {f}] ({was}); {reads}",
                tile_name(tile)
            ),
            instruction: inst.op.name(),
            loc: inst.loc,
        });
    }
    Ok(())
}

/// Whether an element that held `old` and now holds `new` (not [`UNTOUCHED`]: the instruction
/// wrote it) was made non-finite by the instruction: it is NaN or infinite now, and was finite
/// or never written before (a NaN written over a NaN is not new).
fn made_nonfinite(old: f32, new: f32) -> bool {
    !new.is_finite() && (old.is_finite() || is_poison(old))
}

fn describe(x: f32) -> &'static str {
    if is_poison(x) {
        return "NaN from an element never written";
    }
    if x.is_nan() {
        "NaN"
    } else if x > 0.0 {
        "+inf"
    } else {
        "-inf"
    }
}

/// What a read region holds: all finite, or how many of its elements are never written, NaN
/// and infinite (the whole tile when the region is a strided walk).
fn read_summary(
    store: &TileStore<'_>,
    region: &TileRegion,
    tile_name: &impl Fn(TileId) -> String,
) -> String {
    let name = tile_name(region.tile);
    let Ok((data, stride)) = store.data(region.tile) else {
        return format!("{name} (not allocated)");
    };
    let (values, what): (Vec<f32>, String) = if region.pattern.is_none() {
        let rows = (region.p0..region.p0 + region.np).filter_map(|p| {
            let start = p * stride + region.f0;
            data.get(start..start + region.nf)
        });
        (
            rows.flatten().copied().collect(),
            format!(
                "{name}[{}:{}, {}:{}]",
                region.p0,
                region.p0 + region.np,
                region.f0,
                region.f0 + region.nf
            ),
        )
    } else {
        let rows = store.partitions(region.tile);
        (
            data[..(rows * stride).min(data.len())].to_vec(),
            format!("{name} (whole tile)"),
        )
    };
    let unwritten = values.iter().filter(|x| is_poison(**x)).count();
    let nan = values
        .iter()
        .filter(|x| x.is_nan() && !is_poison(**x))
        .count();
    let inf = values.iter().filter(|x| x.is_infinite()).count();
    if unwritten + nan + inf == 0 {
        return format!("{what}: all finite");
    }
    let mut parts = Vec::new();
    if unwritten > 0 {
        parts.push(format!("{unwritten} element(s) never written"));
    }
    if nan > 0 {
        parts.push(format!("{nan} NaN"));
    }
    if inf > 0 {
        parts.push(format!("{inf} infinite"));
    }
    format!("{what}: {}", parts.join(", "))
}
