//! Which runs of statements the simulator executes band by band ([`BandRegion`]), found once
//! per program.
//!
//! A run qualifies when running it partition band after partition band gives the bits running
//! it instruction after instruction gives:
//!
//! - every instruction is partition-local: all its tile operands cover the same partitions, and
//!   partition `p` of the destination depends only on partition `p` of the inputs (no
//!   transpose, no `iota`, whose values depend on the partition index); a matmul contracts over
//!   its operands' partitions and qualifies when its stationary operand has a few columns (the
//!   simulator's fused multiply-add chain, carried from band to band in partition order) and its
//!   PSUM destination is written only by matmuls in the run (their results are added in program
//!   order once every band is done);
//! - loads read kernel inputs, which nothing writes; stores write kernel outputs in rows that
//!   are disjoint across partitions, and two stores of the run to one tensor either write an
//!   element from the same partition or not at all (so the order of bands cannot change which
//!   value lands last);
//! - the tiles the run allocates are used only inside it (each band gives them storage for its
//!   own partitions), and the run writes no other tile but its matmuls' destinations.
//!
//! Runs that would gain nothing are left alone ([`BandPolicy`]): too few instructions, too
//! little work per instruction, or tiles no taller than one band. Runs inside a loop whose iterations run in
//! parallel are left alone too (the iterations already have the threads).

use crate::ir::{DmaOperand, HbmAccess, HbmId, Op, Program, Stmt, TileId, TileRegion};
use crate::sim::matmul::SMALL_M;
use std::collections::{BTreeMap, HashSet};

/// When the simulator executes a run band by band, and how tall a band is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BandPolicy {
    /// Partitions per band.
    pub partitions: usize,
    /// Runs with fewer instructions run instruction by instruction.
    pub min_instructions: usize,
    /// Runs whose instructions average fewer elements than this run instruction by
    /// instruction (the per-band cost of each instruction would outweigh what the cache saves).
    pub min_mean_elements: usize,
}

impl Default for BandPolicy {
    /// Bands of 32 partitions (four per full tile), for runs of at least 8 instructions
    /// averaging at least a `[128, 256]` tile's elements. Taller bands pay each instruction's
    /// fixed cost fewer times; shorter ones keep more of a band's tiles in cache (fp32
    /// layernorm_backward at 8192×4096, simulator alone on two threads, six alternating rounds,
    /// min / median: bands of 16 partitions 73 / 75 ms, of 32 61 / 73 ms; unbanded 85–125 ms).
    fn default() -> Self {
        BandPolicy {
            partitions: 32,
            min_instructions: 8,
            min_mean_elements: 128 * 256,
        }
    }
}

impl BandPolicy {
    /// Every qualifying run, however short or small, in bands of `partitions` (for tests: the
    /// bits must not change).
    pub fn everywhere(partitions: usize) -> Self {
        BandPolicy {
            partitions: partitions.max(1),
            min_instructions: 1,
            min_mean_elements: 0,
        }
    }

    /// No run at all: every instruction runs whole.
    pub fn never() -> Self {
        BandPolicy {
            partitions: usize::MAX,
            min_instructions: usize::MAX,
            min_mean_elements: usize::MAX,
        }
    }
}

/// More stores than this to one tensor in a run and the run is not banded (their pairwise check
/// grows with the square).
const MAX_STORES_PER_TENSOR: usize = 2048;

/// A run of statements `start..end` of one block, executed band by band.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BandRegion {
    /// First statement.
    pub start: usize,
    /// One past the last statement.
    pub end: usize,
    /// Partitions the run's instructions reach: the bands cover `0..partitions`.
    pub partitions: usize,
    /// The statement indices of the run's matmuls, in program order.
    pub matmuls: Vec<usize>,
    /// Per statement of the run, the partitions `(p0, np)` its instruction covers (`(0, 0)`
    /// for an allocation), found once here rather than per band.
    pub spans: Vec<(usize, usize)>,
}

/// Per block (numbered as [`crate::sim::ExecPlan::release`] numbers them), the banded runs in
/// statement order; and per tile, whether a banded run allocates it.
pub(crate) fn band_regions(
    program: &Program,
    release: &[Vec<Vec<TileId>>],
    parallel: &[bool],
    fused_matmul: bool,
    policy: BandPolicy,
) -> (Vec<Vec<BandRegion>>, Vec<bool>) {
    let mut regions = vec![Vec::new(); release.len()];
    let mut local = vec![false; program.tiles.len()];
    let mut finder = Finder {
        program,
        release,
        parallel,
        fused_matmul,
        policy,
        next_block: 0,
        regions: &mut regions,
        local: &mut local,
    };
    finder.block(&program.body, false);
    (regions, local)
}

struct Finder<'a> {
    program: &'a Program,
    release: &'a [Vec<Vec<TileId>>],
    parallel: &'a [bool],
    fused_matmul: bool,
    policy: BandPolicy,
    next_block: usize,
    regions: &'a mut Vec<Vec<BandRegion>>,
    local: &'a mut Vec<bool>,
}

impl Finder<'_> {
    /// Numbers blocks in the order [`crate::sim::plan`]'s release analysis does (a block, then
    /// its loops' bodies in statement order).
    fn block(&mut self, body: &[Stmt], in_parallel: bool) {
        let id = self.next_block;
        self.next_block += 1;
        if !in_parallel {
            self.runs(id, body);
        }
        for s in body {
            match s {
                Stmt::Loop { var, body } => {
                    let parallel = self.parallel[var.0 as usize];
                    self.block(body, in_parallel || parallel);
                }
                Stmt::DeviceLoop { body, .. } => self.block(body, in_parallel),
                Stmt::Alloc { .. } | Stmt::Inst(_) => {}
            }
        }
    }

    /// Finds the banded runs of one block. Statements that cannot run band by band end a run:
    /// loops, instructions that are not partition-local, and everything but a matmul that
    /// touches a matmul's destination (its allocation, its zeroing, reading the result). A run
    /// that allocates a tile used after it is cut again with that tile's statements as ends,
    /// until every run qualifies or is left whole.
    fn runs(&mut self, block: usize, body: &[Stmt]) {
        let mut barred: HashSet<TileId> = body
            .iter()
            .filter_map(|s| match s {
                Stmt::Inst(inst) => match &inst.op {
                    op @ Op::NcMatmul { dst, .. } if self.partition_local(op) => Some(dst.tile),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        loop {
            let mut found = Vec::new();
            let mut escaping = Vec::new();
            let mut run_start = None;
            for i in 0..=body.len() {
                let fits = body.get(i).is_some_and(|s| match s {
                    Stmt::Alloc { tile } => !barred.contains(tile),
                    Stmt::Inst(inst) => {
                        let touches_barred = || {
                            let regions = inst.op.tile_reads().into_iter();
                            regions
                                .chain(inst.op.tile_writes())
                                .any(|r| barred.contains(&r.tile))
                        };
                        self.partition_local(&inst.op)
                            && (matches!(inst.op, Op::NcMatmul { .. }) || !touches_barred())
                    }
                    Stmt::Loop { .. } | Stmt::DeviceLoop { .. } => false,
                });
                if fits {
                    run_start.get_or_insert(i);
                    continue;
                }
                let Some(start) = run_start.take() else {
                    continue;
                };
                let release = &self.release[block];
                match whole_run(self.program, release, body, start, i, self.policy) {
                    Ok(region) => found.push(region),
                    Err(Reject::Escaping(tiles)) => escaping.extend(tiles),
                    Err(Reject::Unfit) => {}
                }
            }
            if escaping.is_empty() {
                for region in &found {
                    for s in &body[region.start..region.end] {
                        if let Stmt::Alloc { tile } = s {
                            self.local[tile.0 as usize] = true;
                        }
                    }
                }
                self.regions[block] = found;
                return;
            }
            barred.extend(escaping);
        }
    }

    /// Whether one instruction can run band by band (see the module doc).
    fn partition_local(&self, op: &Op) -> bool {
        let kind = |a: &HbmAccess| self.program.hbm[a.tensor.0 as usize].kind;
        let fits = match op {
            // Strided operands run through scratch rectangles (sim/strided.rs), whole.
            op if crate::sim::strided::any_strided(op) => false,
            // Runtime offsets are resolved row by row when the DMA runs (sim/indirect.rs), multi-dim free walks (sim/dma.rs's element-by-element path).
            op if op
                .hbm_accesses()
                .iter()
                .any(|(a, _)| a.dynamic.is_some() || a.free_dims.is_some()) =>
            {
                false
            }
            // Their values depend on the partition index within the whole region.
            Op::Iota { .. } | Op::AffineSelect { .. } | Op::NcTranspose { .. } => false,
            // They read other partitions than they write.
            Op::TensorPartitionReduce { .. } | Op::NcStreamShuffle { .. } => false,
            // nonzero_with_count works on the partitions that are multiples of 16 of the tile,
            // topk on groups of 16 partitions.
            Op::NonzeroWithCount { .. } | Op::Topk { .. } => false,
            // They draw from (or set) an engine's generator states, in program order.
            op if crate::sim::random::uses_prng(op) => false,
            // Registers are one state of the whole core, read and written in program order.
            op if op.uses_registers() => false,
            // Its k-th elements pair across the operands' partitions.
            Op::DmaCompute { .. } => false,
            // A transpose moves elements across partitions; local_gather's indices come from
            // all 16 partitions of a core. (nc_n_gather is partition-local.)
            Op::DmaTranspose { .. } | Op::LocalGather { .. } => false,
            // MX: scales sit in other partitions than their data (row 32·(g/4) + g%4 for the
            // group of partitions 8g..8g+8), and nc_matmul_mx contracts over the partitions.
            Op::QuantizeMx { .. } | Op::NcMatmulMx { .. } => false,
            // Staged whole through scratch tiles of the frame (sim/dma.rs).
            Op::DmaCopy {
                reinterpret: true, ..
            } => false,
            Op::DmaCopy {
                dst: DmaOperand::Hbm { .. },
                src: DmaOperand::Hbm { .. },
                ..
            } => false,
            Op::DmaCopy {
                src: DmaOperand::Hbm { access },
                ..
            } => !kind(access).is_writable(),
            Op::DmaCopy {
                dst: DmaOperand::Hbm { access },
                ..
            } => kind(access).is_writable() && rows_disjoint(access),
            // They meet the other core (sim/lockstep.rs), whole.
            Op::CoreBarrier { .. } | Op::SendRecv { .. } => false,
            Op::NcMatmul {
                dst,
                stationary,
                moving,
                is_transpose,
                perf_mode,
                ..
            } => {
                // Transpose mode runs whole, on its own path (sim/matmul.rs), and double-row
                // mode as its two halves (sim/exec.rs).
                self.fused_matmul
                    && !*is_transpose
                    && perf_mode.is_none()
                    && stationary.nf <= SMALL_M
                    && dst.tile != stationary.tile
                    && dst.tile != moving.tile
            }
            _ => true,
        };
        fits && partition_span(op).is_some()
    }
}

/// Whether an access's rows write disjoint memory: one row, or contiguous rows no longer than
/// the step between them.
fn rows_disjoint(a: &HbmAccess) -> bool {
    a.np <= 1 || (a.f_stride == 1 && a.p_stride.unsigned_abs() as usize >= a.nf)
}

/// The partitions `(p0, np)` every tile operand of `op` covers (a matmul's destination aside),
/// or `None` when they differ.
pub(crate) fn partition_span(op: &Op) -> Option<(usize, usize)> {
    let regions: Vec<&TileRegion> = match op {
        Op::NcMatmul {
            stationary, moving, ..
        } => vec![stationary, moving],
        _ => op
            .tile_reads()
            .into_iter()
            .chain(op.tile_writes())
            .collect(),
    };
    let first = regions.first()?;
    regions
        .iter()
        .all(|r| r.p0 == first.p0 && r.np == first.np)
        .then_some((first.p0, first.np))
}

/// Why a run is not banded.
enum Reject {
    /// It allocates these tiles and something after it uses them.
    Escaping(Vec<TileId>),
    /// It does not qualify, or would not gain.
    Unfit,
}

/// The run `body[start..end]` as a [`BandRegion`], when it qualifies as a whole and is worth
/// banding.
fn whole_run(
    program: &Program,
    release: &[Vec<TileId>],
    body: &[Stmt],
    start: usize,
    end: usize,
    policy: BandPolicy,
) -> Result<BandRegion, Reject> {
    let run = &body[start..end];
    let allocated: HashSet<TileId> = run
        .iter()
        .filter_map(|s| match s {
            Stmt::Alloc { tile } => Some(*tile),
            _ => None,
        })
        .collect();
    // Every tile the run allocates has its last use inside the run.
    let released: HashSet<TileId> = release[start..end].iter().flatten().copied().collect();
    let escaping: Vec<TileId> = allocated
        .iter()
        .filter(|t| !released.contains(t))
        .copied()
        .collect();
    if !escaping.is_empty() {
        return Err(Reject::Escaping(escaping));
    }
    let mut matmuls = Vec::new();
    let mut accumulators = HashSet::new();
    let mut others = HashSet::new();
    let mut stores: BTreeMap<HbmId, Vec<(&HbmAccess, usize)>> = BTreeMap::new();
    let (mut partitions, mut elements, mut instructions) = (0, 0, 0);
    let mut spans = vec![(0, 0); run.len()];
    for (i, s) in run.iter().enumerate() {
        let Stmt::Inst(inst) = s else { continue };
        let (p0, np) = partition_span(&inst.op).ok_or(Reject::Unfit)?;
        spans[i] = (p0, np);
        partitions = partitions.max(p0 + np);
        instructions += 1;
        match &inst.op {
            Op::NcMatmul {
                dst,
                stationary,
                moving,
                ..
            } => {
                if allocated.contains(&dst.tile) {
                    return Err(Reject::Unfit);
                }
                accumulators.insert(dst.tile);
                others.extend([stationary.tile, moving.tile]);
                elements += np * moving.nf;
                matmuls.push(start + i);
            }
            op => {
                if op
                    .tile_writes()
                    .iter()
                    .any(|w| !allocated.contains(&w.tile))
                {
                    return Err(Reject::Unfit);
                }
                others.extend(op.tile_reads().iter().map(|r| r.tile));
                let largest = op.tile_reads().into_iter().chain(op.tile_writes());
                elements += np * largest.map(|r| r.nf).max().unwrap_or(0);
                if let Op::DmaCopy {
                    dst: DmaOperand::Hbm { access },
                    src: DmaOperand::Tile { region },
                    ..
                } = op
                {
                    stores
                        .entry(access.tensor)
                        .or_default()
                        .push((access, region.p0));
                }
            }
        }
    }
    let worth = instructions >= policy.min_instructions
        && partitions > policy.partitions
        && elements >= instructions.saturating_mul(policy.min_mean_elements);
    // `stores_commute` compares offsets in plain i64 (see `HbmAccess::is_modest`).
    let trips = program.trips();
    let ordered = accumulators.is_disjoint(&others)
        && stores.iter().all(|(tensor, s)| {
            let row_len = program.hbm[tensor.0 as usize].shape.last().copied();
            s.iter().all(|(a, _)| a.is_modest(&trips))
                && stores_commute(s, row_len.unwrap_or(1) as i64)
        });
    if !(worth && ordered) {
        return Err(Reject::Unfit);
    }
    Ok(BandRegion {
        start,
        end,
        partitions,
        matmuls,
        spans,
    })
}

/// Whether stores to one tensor (each with the partition its row 0 comes from) give the same
/// result in any order of partitions: every pair writes each common element from one partition.
fn stores_commute(stores: &[(&HbmAccess, usize)], row_len: i64) -> bool {
    if stores.len() > MAX_STORES_PER_TENSOR {
        return false;
    }
    // Pairs compare their constant offsets: their loop-variable terms must agree.
    let first = stores.first().map(|(a, _)| &a.offset.terms);
    if !stores.iter().all(|(a, _)| Some(&a.offset.terms) == first) {
        return false;
    }
    let rows_aligned = row_len > 0 && first.is_none_or(|t| t.iter().all(|(_, k)| k % row_len == 0));
    stores.iter().enumerate().all(|(i, a)| {
        stores[i + 1..]
            .iter()
            .all(|b| commute(*a, *b, row_len, rows_aligned))
    })
}

/// One pair of [`stores_commute`].
fn commute(
    (a, pa): (&HbmAccess, usize),
    (b, pb): (&HbmAccess, usize),
    row_len: i64,
    rows_aligned: bool,
) -> bool {
    let (ca, cb) = (a.offset.constant, b.offset.constant);
    // Partition p writes from `c − p0·p_stride + p·p_stride`: the same elements from the same
    // partition in both (rows no longer than the step, so a row is one partition's).
    let step = a.p_stride;
    let same_partitions = step == b.p_stride
        && step.unsigned_abs() as usize >= a.nf.max(b.nf)
        && a.f_stride == 1
        && b.f_stride == 1
        && ca - pa as i64 * step == cb - pb as i64 * step;
    let flat_apart = {
        let ((a_lo, a_hi), (b_lo, b_hi)) = (a.extent(), b.extent());
        ca + a_hi < cb + b_lo || cb + b_hi < ca + a_lo
    };
    same_partitions || flat_apart || (rows_aligned && boxes_apart(a, b, row_len))
}

/// Whether two row-major stores (one tensor row per partition, columns inside the row) cover
/// disjoint rows or disjoint columns; their loop terms are whole rows, so the constants place
/// them.
fn boxes_apart(a: &HbmAccess, b: &HbmAccess, row_len: i64) -> bool {
    let boxed = |x: &HbmAccess| -> Option<((i64, i64), (i64, i64))> {
        let c = x.offset.constant;
        let row_major = x.f_stride == 1 && (x.np == 1 || x.p_stride == row_len);
        let (row, col) = (c.div_euclid(row_len), c.rem_euclid(row_len));
        (row_major && col + x.nf as i64 <= row_len)
            .then_some(((row, row + x.np as i64), (col, col + x.nf as i64)))
    };
    let (Some((ra, ca)), Some((rb, cb))) = (boxed(a), boxed(b)) else {
        return false;
    };
    let apart = |x: (i64, i64), y: (i64, i64)| x.1 <= y.0 || y.1 <= x.0;
    apart(ra, rb) || apart(ca, cb)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::affine::{AffineExpr, LoopVar};

    /// A store of `np` rows of `nf` columns at `offset` into a `[.., 64]` tensor, one row per
    /// partition.
    fn store(offset: AffineExpr, np: usize, nf: usize) -> HbmAccess {
        HbmAccess {
            tensor: HbmId(0),
            offset,
            np,
            nf,
            p_stride: 64,
            f_stride: 1,
            dynamic: None,
            free_dims: None,
        }
    }

    #[test]
    fn stores_to_disjoint_rows_or_columns_commute() {
        let g = AffineExpr::var(LoopVar(0)).scaled(64 * 256);
        let tile_a = store(g.clone() + 0i64, 128, 32);
        let tile_a_right = store(g.clone() + 32i64, 128, 32);
        let tile_b = store(g.clone() + 128 * 64i64, 128, 64);
        assert!(stores_commute(
            &[(&tile_a, 0), (&tile_a_right, 0), (&tile_b, 0)],
            64
        ));
    }

    #[test]
    fn one_element_from_two_partitions_does_not_commute() {
        // Rows 0..4 from partitions 0..4, then rows 1..5 from partitions 0..4: row 1 is written
        // from partition 1, then from partition 0, and banding may reorder the two.
        let (a, b) = (store(0i64.into(), 4, 64), store(64i64.into(), 4, 64));
        assert!(!stores_commute(&[(&a, 0), (&b, 0)], 64));
        // The same rows from the same partitions (the second tile region starts one partition
        // later) do commute.
        assert!(stores_commute(&[(&a, 0), (&b, 1)], 64));
        // Offsets that differ by loop terms cannot be compared: not banded.
        let c = store(AffineExpr::var(LoopVar(0)).scaled(64 * 4), 4, 64);
        assert!(!stores_commute(&[(&a, 0), (&c, 0)], 64));
    }

    #[test]
    fn the_policies_band_as_they_say() {
        let never = BandPolicy::never();
        assert_eq!(never.min_instructions, usize::MAX);
        let everywhere = BandPolicy::everywhere(0);
        assert_eq!((everywhere.partitions, everywhere.min_instructions), (1, 1));
    }
}
