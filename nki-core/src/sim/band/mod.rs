//! Band-by-band execution of straight-line runs of partition-local instructions.
//!
//! Instruction by instruction, a long unrolled kernel (a pipeline over row tiles of a wide
//! tensor) splits every large instruction over the simulator's threads and joins them again,
//! thousands of times per run; its matmuls, a contraction over partitions, run on one thread
//! while the others wait; and the tiles one row tile keeps between its stages stream through
//! memory once per instruction. Partition-local instructions let the simulator run the whole
//! run for some partitions (a band, [`plan::BandPolicy`]) before the next: the threads take
//! bands in partition order and meet once per run, each computes its bands' share of every
//! matmul, and what a band's instructions write its next instructions find in cache more often.
//! The tiles the run allocates get storage for one band's partitions only. An instruction the
//! plan pairs with the store after it (`sim/forward.rs`) hands that store its band's rows
//! directly, as it does unbanded, when both are in the run.
//!
//! Matmuls carry each element's chain of fused multiply-adds
//! from band to band: the band for partitions `32..64` continues the chain where the band for
//! `0..32` left it, waiting for it if needed, so every element sums over `K` in the order one
//! call would. Their destinations take the finished sums in program order once every band is
//! done. [`plan`] proves, once per program, which runs give the same bits this way.
//!
//! Errors: every DMA of the run is checked whole before any band runs (bounds, shapes, writes
//! to inputs), so a bad access fails with the message it fails with unbanded; of several
//! failures the earliest statement's is reported. A malformed hand-built program that fails in
//! more than one way may report a different one than unbanded execution would. A band that
//! panics marks the run failed, so the bands waiting for its matmul chains give up and the
//! panic reaches the caller.

mod clip;
pub(crate) mod plan;

use crate::error::NkiError;
use crate::ir::{Instruction, Op, Program, Stmt, TileId};
use crate::sim::dma::check_dma;
use crate::sim::exec::{Ctx, execute};
use crate::sim::forward;
use crate::sim::hbm::HbmBuffer;
use crate::sim::matmul::{accumulate_band, finish_band};
use crate::sim::rows::Scratch;
use crate::sim::store::TileStore;
use clip::{clip, clip_operands};
use plan::BandRegion;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// What a banded run needs of the simulation around it.
pub(crate) struct Frame<'r, 'a> {
    pub(crate) program: &'r Program,
    pub(crate) hbm: &'r [HbmBuffer<'a>],
    pub(crate) env: &'r [i64],
    /// Per tile: must a fresh allocation be filled with NaN?
    pub(crate) poison: &'r [bool],
    /// Per statement of the run's block: the tiles whose last use it is.
    pub(crate) release: &'r [Vec<TileId>],
    /// Per statement of the run's block: does the instruction there hand its rows to the
    /// store after it (`sim/forward.rs`)? `None` when the run forwards nothing.
    pub(crate) forward: Option<&'r [bool]>,
    /// Per tile: does a banded run allocate it (its storage is per band)?
    pub(crate) local: &'r [bool],
    /// Threads to spread the bands over (1: in order on this one).
    pub(crate) threads: usize,
    /// Partitions per band.
    pub(crate) band_partitions: usize,
}

/// One matmul's chains between bands, and the next band to continue them.
struct Chains {
    acc: Mutex<Vec<f32>>,
    next: AtomicUsize,
}

/// Why a band stopped.
enum Stop {
    /// Statement `.0` failed.
    Failed(usize, NkiError),
    /// Another band failed: this one was waiting for it.
    Abandoned,
}

/// Runs `body[region.start..region.end]` band by band on `store` (see the module doc).
pub(crate) fn run_region<'a: 'p, 'p>(
    frame: &Frame<'_, 'a>,
    body: &[Stmt],
    region: &BandRegion,
    store: &mut TileStore<'p>,
) -> Result<(), NkiError> {
    let run = &body[region.start..region.end];
    // The whole DMAs' checks first, so a bad access fails as it would unbanded.
    for s in run {
        if let Stmt::Inst(
            inst @ Instruction {
                op: Op::DmaCopy { dst, src, .. },
                ..
            },
        ) = s
        {
            check_dma(&ctx(frame, inst), dst, src)?;
        }
    }
    let chains: Vec<Chains> = region
        .matmuls
        .iter()
        .map(|&k| {
            let Stmt::Inst(Instruction {
                op: Op::NcMatmul {
                    stationary, moving, ..
                },
                ..
            }) = &body[k]
            else {
                unreachable!("the plan lists matmul statements")
            };
            Chains {
                acc: Mutex::new(vec![0.0; stationary.nf * moving.nf]),
                next: AtomicUsize::new(stationary.p0 / frame.band_partitions),
            }
        })
        .collect();
    let bands = region.partitions.div_ceil(frame.band_partitions);
    let next_band = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let shared: &TileStore<'p> = store;
    let worker = || -> Option<(usize, usize, NkiError)> {
        // A band that panics (a bug, or a malformed hand-built program) must not leave the
        // others waiting for its matmul chains: the panic then reaches the caller.
        let _unwinding = FailOnPanic(&failed);
        let mut band_store = shared.child();
        let mut scratch = Scratch::default();
        loop {
            let band = next_band.fetch_add(1, Ordering::Relaxed);
            if band >= bands {
                return None;
            }
            let result = run_band(
                frame,
                body,
                region,
                band,
                &chains,
                &failed,
                &mut band_store,
                &mut scratch,
            );
            match result {
                Ok(()) => {}
                Err(Stop::Failed(k, e)) => {
                    failed.store(true, Ordering::Release);
                    return Some((k, band, e));
                }
                Err(Stop::Abandoned) => return None,
            }
        }
    };
    let threads = frame.threads.clamp(1, bands);
    let failures: Vec<(usize, usize, NkiError)> = if threads > 1 {
        crate::sim::threads::map(threads, || (), |_, _| worker())
            .into_iter()
            .flatten()
            .collect()
    } else {
        worker().into_iter().collect()
    };
    // The failure an unbanded run meets first: the earliest statement (then band).
    if let Some((_, _, e)) = failures.into_iter().min_by_key(|(k, b, _)| (*k, *b)) {
        return Err(e);
    }
    for (&k, chains) in region.matmuls.iter().zip(chains) {
        let Stmt::Inst(
            inst @ Instruction {
                op:
                    Op::NcMatmul {
                        dst,
                        stationary,
                        moving,
                        accumulate,
                        ..
                    },
                ..
            },
        ) = &body[k]
        else {
            unreachable!("the plan lists matmul statements")
        };
        let acc = chains
            .acc
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        finish_band(store, dst, &acc, stationary.nf, moving.nf, *accumulate)
            .map_err(|e| ctx(frame, inst).store_err(e))?;
    }
    Ok(())
}

fn ctx<'c, 'a>(frame: &'c Frame<'_, 'a>, inst: &'c Instruction) -> Ctx<'a, 'c> {
    Ctx {
        hbm: frame.hbm,
        split: false,
        env: frame.env,
        inst,
        prng: None,
        registers: None,
        forward: None,
    }
}

/// Runs the region's statements for the partitions of band `band`.
#[allow(clippy::too_many_arguments)]
fn run_band<'a: 'p, 'p>(
    frame: &Frame<'_, 'a>,
    body: &[Stmt],
    region: &BandRegion,
    band: usize,
    chains: &[Chains],
    failed: &AtomicBool,
    store: &mut TileStore<'p>,
    scratch: &mut Scratch,
) -> Result<(), Stop> {
    let b0 = band * frame.band_partitions;
    let b1 = (b0 + frame.band_partitions).min(region.partitions);
    let mut matmul = 0;
    // Set when the statement before ran this one (a store it forwarded its rows to).
    let mut ran = false;
    for (k, s) in body.iter().enumerate().take(region.end).skip(region.start) {
        if std::mem::take(&mut ran) {
            for &tile in &frame.release[k] {
                store.release(tile);
            }
            continue;
        }
        match s {
            Stmt::Alloc { tile } => {
                let rows = frame.program.tiles[tile.0 as usize]
                    .partitions
                    .min(b1)
                    .saturating_sub(b0);
                if rows > 0 {
                    store.allocate(*tile, rows, frame.poison[tile.0 as usize]);
                }
            }
            Stmt::Inst(inst) => match &inst.op {
                Op::NcMatmul {
                    stationary, moving, ..
                } => {
                    let chain = &chains[matmul];
                    matmul += 1;
                    if let Some((st, mv)) = clip_operands(stationary, moving, b0, b1, frame.local) {
                        wait_for(&chain.next, band, failed)?;
                        let mut acc = chain
                            .acc
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        let done = accumulate_band(store, &st, &mv, &mut acc);
                        drop(acc);
                        chain.next.store(band + 1, Ordering::Release);
                        done.map_err(|e| Stop::Failed(k, ctx(frame, inst).store_err(e)))?;
                    }
                }
                op => {
                    let span = region.spans[k - region.start];
                    if let Some(op) = clip(op, span, b0, b1, frame.local) {
                        let inst = Instruction { op, loc: inst.loc };
                        let paired = paired_store(frame, body, region, k, (b0, b1));
                        ran = run_instruction(frame, &inst, paired.as_ref(), store, scratch)
                            .map_err(|e| Stop::Failed(k, e))?;
                    }
                }
            },
            Stmt::Loop { .. } | Stmt::DeviceLoop { .. } => {
                unreachable!("banded runs are straight-line")
            }
        }
        for &tile in &frame.release[k] {
            store.release(tile);
        }
    }
    Ok(())
}

/// The store after statement `k`, restricted to band `b0..b1`, when the plan pairs the two
/// (`sim/forward.rs`) and both are in the run.
fn paired_store(
    frame: &Frame<'_, '_>,
    body: &[Stmt],
    region: &BandRegion,
    k: usize,
    (b0, b1): (usize, usize),
) -> Option<Instruction> {
    if !frame.forward.is_some_and(|f| f[k]) || k + 1 >= region.end {
        return None;
    }
    let Stmt::Inst(dma) = &body[k + 1] else {
        return None;
    };
    let span = region.spans[k + 1 - region.start];
    let op = clip(&dma.op, span, b0, b1, frame.local)?;
    Some(Instruction { op, loc: dma.loc })
}

/// Runs one band's part of an instruction; with `paired`, the band's part of the store after
/// it, its rows go straight to that store when its checks pass. Returns whether the store
/// ran too (as the unbanded runner does).
fn run_instruction<'a: 'p, 'p>(
    frame: &Frame<'_, 'a>,
    inst: &Instruction,
    paired: Option<&Instruction>,
    store: &mut TileStore<'p>,
    scratch: &mut Scratch,
) -> Result<bool, NkiError> {
    let plain = ctx(frame, inst);
    if let Some(dma) = paired
        && let Some(ran) = forward::execute_forwarded(&plain, dma, store, scratch)?
    {
        return Ok(ran);
    }
    execute(&plain, store, scratch)?;
    Ok(false)
}

/// Sets its flag when dropped during a panic, so bands waiting on the panicking one give up.
struct FailOnPanic<'f>(&'f AtomicBool);

impl Drop for FailOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Release);
        }
    }
}

/// Waits until `next` says it is `band`'s turn, or another band failed.
fn wait_for(next: &AtomicUsize, band: usize, failed: &AtomicBool) -> Result<(), Stop> {
    let mut spins = 0u32;
    while next.load(Ordering::Acquire) != band {
        if failed.load(Ordering::Acquire) {
            return Err(Stop::Abandoned);
        }
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    Ok(())
}
