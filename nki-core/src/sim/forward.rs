//! Forwarding: an instruction whose result the next statement stores to HBM (or copies, for a
//! transpose), and which nothing reads again, hands it straight to that statement.
//!
//! Kernels end a tile's life the same way again and again: an engine writes the tile whole
//! (`tensor_tensor`, `tensor_scalar`, `activation`, `tensor_copy`), a `dma_copy` stores it, and
//! the tile is released. Run as written, the simulator writes the tile to memory and reads it
//! back to store it: for a memory-bound op (`add`, `silu`) that is a third of the bytes it moves.
//! Forwarded, each row is computed into a row buffer that stays in cache and is stored from
//! there; the tile is never written. The bits in HBM are the same: the row holds the values the
//! tile would (rounded to the tile's dtype), and the store converts them to the tensor's dtype
//! as it would.
//!
//! The plan ([`forward_points`]) pairs an instruction with the statement after it when:
//! - the instruction writes every element of its destination region row by row
//!   ([`writes_every_row`]), and none of its operands is strided;
//! - every operand it reads in the destination tile is the destination region itself (row `r`
//!   then reads only its own old row, which the tile still holds when nothing is written);
//! - the next statement is a `dma_copy` of exactly that region to HBM, with a static access
//!   (no runtime offset, one free dim), not reinterpreting;
//! - the tile is allocated in the same block and that store is its last use.
//!
//! When the pair runs, the store's checks (bounds, writes only to outputs) are made first; if
//! one fails, the instruction runs as written and the store then fails with its own message.
//!
//! A transpose is forwarded the same way: kernels transpose on the tensor engine into PSUM and
//! copy the result to SBUF (`nc_transpose(t, x); tensor_copy(held, t)`), which the simulator
//! would run as two passes over the tile. The plan pairs the two when the copy reads exactly
//! what the transpose wrote, the PSUM tile is not used again, the copy's destination has the
//! PSUM tile's dtype (so the copy changes no value) and is not the transpose's source; the pair
//! then runs as one transpose into the copy's destination ([`transpose_pair`]).
//!
//! The non-finite trap compares tiles, so it runs every instruction as written.

use crate::error::NkiError;
use crate::ir::{DmaOperand, Instruction, Op, Program, Stmt, TileId, TileRegion};
use crate::sim::dma::{RowSink, check_dma};
use crate::sim::exec::{Ctx, execute};
use crate::sim::rows::Scratch;
use crate::sim::store::TileStore;

/// The destination of an instruction that writes every element of it row by row, through
/// [`Ctx::forward`] when it is set (the arms of the executor that write with
/// `Writes::Forwarded`); `None` for every other instruction. An instruction listed here that
/// did not forward would still run correctly (the runner sees [`RowSink::used`] unset and runs
/// the store), only without the saving.
pub(crate) fn writes_every_row(op: &Op) -> Option<&TileRegion> {
    match op {
        Op::TensorTensor { dst, op, .. } if !op.is_bitvec() => Some(dst),
        Op::TensorScalar { dst, op0, .. } if !op0.is_bitvec() => Some(dst),
        Op::Activation { dst, reduce, .. }
            if reduce.as_ref().is_none_or(|(_, res)| res.tile != dst.tile) =>
        {
            Some(dst)
        }
        Op::TensorCopy { dst, .. } => Some(dst),
        _ => None,
    }
}

/// Whether `inst` hands its result to `next`: a store that is the last use (`released` after
/// it) of the tile `inst` writes, or the copy of a transpose ([`transposed_into`]).
fn forwards(inst: &Instruction, next: &Stmt, released: &[TileId], program: &Program) -> bool {
    let Stmt::Inst(store) = next else {
        return false;
    };
    if let Some(copy_dst) = transposed_into(&inst.op, &store.op) {
        let Op::NcTranspose { dst, data, .. } = &inst.op else {
            unreachable!("transposed_into matched an nc_transpose");
        };
        let dtype = |r: &TileRegion| program.tiles.get(r.tile.0 as usize).map(|t| t.dtype);
        return released.contains(&dst.tile)
            && copy_dst.tile != data.tile
            && copy_dst.is_rect()
            && dtype(dst).is_some()
            && dtype(dst) == dtype(copy_dst);
    }
    let Some(dst) = writes_every_row(&inst.op) else {
        return false;
    };
    let Op::DmaCopy {
        dst: DmaOperand::Hbm { access },
        src: DmaOperand::Tile { region },
        reinterpret: false,
        ..
    } = &store.op
    else {
        return false;
    };
    !crate::sim::strided::any_strided(&inst.op)
        && region == dst
        && inst
            .op
            .tile_reads()
            .iter()
            .all(|r| r.tile != dst.tile || *r == dst)
        && access.dynamic.is_none()
        && access.free_dims.is_none()
        && released.contains(&dst.tile)
}

/// The destination of `next` when it is a `tensor_copy` of exactly what `inst`, an
/// `nc_transpose`, wrote (a transpose through PSUM into SBUF, as kernels write it): the pair
/// then transposes straight into that destination ([`transpose_pair`]).
fn transposed_into<'o>(inst: &Op, next: &'o Op) -> Option<&'o TileRegion> {
    match (inst, next) {
        (Op::NcTranspose { dst, .. }, Op::TensorCopy { dst: copy_dst, src })
            if src == dst && dst.is_rect() =>
        {
            Some(copy_dst)
        }
        _ => None,
    }
}

/// The one instruction a forwarded `nc_transpose` and its copy run as: the transpose, into the
/// copy's destination. The values are the same: a transpose moves them, and the plan pairs the
/// two only when the transpose's tile and the copy's destination have one dtype (the copy then
/// changes nothing), the transpose's tile is not used again, and the destination is not the
/// transpose's source.
pub(crate) fn transpose_pair(inst: &Instruction, next: &Stmt) -> Option<Instruction> {
    let Stmt::Inst(copy) = next else {
        return None;
    };
    let copy_dst = transposed_into(&inst.op, &copy.op)?;
    let Op::NcTranspose { data, engine, .. } = &inst.op else {
        return None;
    };
    Some(Instruction {
        op: Op::NcTranspose {
            dst: copy_dst.clone(),
            data: data.clone(),
            engine: *engine,
        },
        loc: inst.loc,
    })
}

/// Per block (numbered as [`crate::sim::ExecPlan::release`] numbers them: the program body,
/// then each loop body as it is reached), per statement: does the instruction there hand its
/// result to the statement after it? A statement that a pair runs is not itself paired.
pub(crate) fn forward_points(program: &Program, release: &[Vec<Vec<TileId>>]) -> Vec<Vec<bool>> {
    fn block(
        program: &Program,
        body: &[Stmt],
        release: &[Vec<Vec<TileId>>],
        out: &mut Vec<Vec<bool>>,
    ) {
        let id = out.len();
        out.push(vec![false; body.len()]);
        for (i, s) in body.iter().enumerate() {
            match s {
                // Not a statement the pair before it runs.
                Stmt::Inst(inst) if i == 0 || !out[id][i - 1] => {
                    out[id][i] = body
                        .get(i + 1)
                        .is_some_and(|next| forwards(inst, next, &release[id][i + 1], program));
                }
                Stmt::Inst(_) => {}
                Stmt::Loop { body, .. } | Stmt::DeviceLoop { body, .. } => {
                    block(program, body, release, out)
                }
                Stmt::Alloc { .. } => {}
            }
        }
    }
    let mut out = Vec::with_capacity(release.len());
    block(program, &program.body, release, &mut out);
    debug_assert_eq!(
        out.len(),
        release.len(),
        "blocks numbered as the release points"
    );
    out
}

/// Where the instruction before `ctx.inst` (a store the plan paired with it) sends its rows,
/// for the current loop indices: `None` when the store's checks fail (the store then runs as
/// itself, and reports the failure).
pub(crate) fn sink<'a>(ctx: &Ctx<'a, '_>, store: &TileStore<'_>) -> Option<RowSink<'a>> {
    let Op::DmaCopy { dst, src, .. } = &ctx.inst.op else {
        return None;
    };
    let (DmaOperand::Hbm { access }, DmaOperand::Tile { region }) = (dst, src) else {
        return None;
    };
    check_dma(ctx, dst, src).ok()?;
    Some(RowSink::new(ctx, access, store.dtype(region.tile)))
}

/// Runs `ctx.inst` with its rows handed to `dma`, the store the plan paired it with, when that
/// store's checks pass for the current loop indices: `Some(whether the store ran too)`
/// ([`RowSink::used`]). `None`, with nothing run, when they fail: the caller then runs the
/// instruction and the store as written, and the store reports the failure.
pub(crate) fn execute_forwarded<'a: 'p, 'p>(
    ctx: &Ctx<'a, '_>,
    dma: &Instruction,
    store: &mut TileStore<'p>,
    scratch: &mut Scratch,
) -> Result<Option<bool>, NkiError> {
    let Some(sink) = sink(&Ctx { inst: dma, ..*ctx }, store) else {
        return Ok(None);
    };
    execute(
        &Ctx {
            forward: Some(&sink),
            ..*ctx
        },
        store,
        scratch,
    )?;
    Ok(Some(sink.used()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::ActFn;
    use crate::lang::trace;
    use crate::prelude::*;
    use crate::sim::exec::execute;
    use crate::sim::hbm::HbmBuffer;
    use crate::sim::rows::Scratch;

    /// Writes its first tile from the other two.
    type Write = fn(&Tile, &Tile, &Tile);

    /// `[8, 16]` fp32: `write(t, a, b)` into a fresh tile `t`, then `t` stored to an `out`
    /// output.
    fn writer_then_store(write: Write, out: DType) -> Program {
        trace("k", Target::Trn2, &[], |_| {
            let out = shared_hbm(&[8, 16], out);
            let (a, b, t) = (
                sbuf([8, 16], DType::F32),
                sbuf([8, 16], DType::F32),
                sbuf([8, 16], DType::F32),
            );
            memset(&a, 1.5);
            memset(&b, -0.5);
            write(&t, &a, &b);
            dma_copy(&out, &t);
            vec![out]
        })
        .unwrap()
    }

    /// Every instruction [`writes_every_row`] lists hands its rows to the sink when run with
    /// one, so the plan never pairs an instruction that would write its tile anyway, and the
    /// output then holds the bits the two run as written store: computed into the output's rows
    /// (fp32) or through a row buffer rounded on the way (bf16).
    #[test]
    fn every_listed_instruction_forwards() {
        let writers: [(&str, Write); 4] = [
            ("tensor_tensor", |t, a, b| {
                tensor_tensor(t, a, b, BinOp::Add);
            }),
            ("tensor_scalar", |t, a, _| {
                tensor_scalar(t, a, BinOp::Multiply, 2.0);
            }),
            ("activation", |t, a, _| {
                activation(t, ActFn::Exp, a, None, 1.0)
            }),
            ("tensor_copy", |t, a, _| tensor_copy(t, a)),
        ];
        for ((name, write), out) in writers
            .into_iter()
            .flat_map(|w| [DType::F32, DType::BF16].map(|out| (w, out)))
        {
            let p = writer_then_store(write, out);
            let n = p.body.len();
            let (Stmt::Inst(writer), Stmt::Inst(dma)) = (&p.body[n - 2], &p.body[n - 1]) else {
                panic!("{name}: the program ends with the writer and the store");
            };
            assert_eq!(writer.op.name(), name);
            let plan = crate::sim::ExecPlan::new(&p);
            assert!(plan.forward()[0][n - 2], "{name}: paired by the plan");
            // The instructions before the pair (the operands' memsets) run as written into a
            // store of every tile.
            let prepared = || {
                let mut store = TileStore::new(&p);
                for (i, t) in p.tiles.iter().enumerate() {
                    store.allocate(TileId(i as u32), t.partitions, true);
                }
                for stmt in &p.body[..n - 2] {
                    if let Stmt::Inst(inst) = stmt {
                        execute(&ctx_of(&[], inst), &mut store, &mut Scratch::default()).unwrap();
                    }
                }
                store
            };
            let mut bytes = vec![0u8; 8 * 16 * out.size_bytes()];
            {
                let mut store = prepared();
                let hbm = [HbmBuffer::output(&mut bytes, out)];
                let ctx = ctx_of(&hbm, dma);
                let sink = sink(&ctx, &store).expect("the store's checks pass");
                let forwarded = Ctx {
                    inst: writer,
                    forward: Some(&sink),
                    ..ctx
                };
                execute(&forwarded, &mut store, &mut Scratch::default()).unwrap();
                assert!(sink.used(), "{name} wrote its tile instead of forwarding");
            }
            let mut written = vec![0u8; bytes.len()];
            {
                let mut store = prepared();
                let hbm = [HbmBuffer::output(&mut written, out)];
                for inst in [writer, dma] {
                    execute(&ctx_of(&hbm, inst), &mut store, &mut Scratch::default()).unwrap();
                }
            }
            assert!(bytes.iter().any(|&b| b != 0), "{name} to {out:?}: stored");
            assert_eq!(bytes, written, "{name} to {out:?}: forwarded as written");
        }
    }

    /// The context of `inst` alone, on one thread, outside loops, nothing forwarded.
    fn ctx_of<'a, 'b>(hbm: &'b [HbmBuffer<'a>], inst: &'b Instruction) -> Ctx<'a, 'b> {
        Ctx {
            hbm,
            split: false,
            env: &[],
            inst,
            prng: None,
            registers: None,
            forward: None,
        }
    }
}
