//! Execution of single instructions on a tile store and HBM buffers, with hardware numerics:
//! fp32 arithmetic, round-to-nearest-even on every write to a narrower tile, fp32 PSUM
//! accumulation (`nc_matmul` itself is in [`super::matmul`]).

use crate::dtype::DType;
use crate::error::NkiError;
use crate::ir::{BinOp, Instruction, MatmulPerfMode, Op, ScalarOperand, TileRegion};
use crate::sim::bitvec;
use crate::sim::dma::{RowSink, dma};
use crate::sim::hbm::HbmBuffer;
use crate::sim::matmul::matmul;
use crate::sim::rounding::{
    as_long_as, column_values, round_into, round_into_in_place, write_column,
};
use crate::sim::row_math::{
    apply_activation, bn_aggr_row, bn_stats_row, reduce_row, reduce_row_inline, selected_columns,
    with_op,
};
use crate::sim::rows::{Scratch, Writes, as_one_row, rows1, rows1_writing, rows2, rows2_writing};
use crate::sim::store::{StoreError, TileStore};

pub(crate) struct Ctx<'a, 'b> {
    pub(crate) hbm: &'b [HbmBuffer<'a>],
    /// May large instructions split their rows across the simulator's threads?
    pub(crate) split: bool,
    pub(crate) env: &'b [i64],
    pub(crate) inst: &'b Instruction,
    /// The engines' generator states (`None` where random-number instructions never run: in
    /// bands).
    pub(crate) prng: Option<&'b std::sync::Mutex<super::random::PrngState>>,
    /// The register file (`None` where register instructions never run: in bands).
    pub(crate) registers: Option<&'b super::register::Registers>,
    /// Where the instruction's rows go instead of its destination tile, when the plan found
    /// the DMA store that follows it can take them ([`super::forward`]).
    pub(crate) forward: Option<&'b RowSink<'a>>,
}

impl<'a, 'b> Ctx<'a, 'b> {
    /// What a row loop that writes every element of its destination does with its rows: writes
    /// them to the tile, or hands them to the DMA store that follows ([`Ctx::forward`]).
    fn writes_every(&self) -> Writes<'b> {
        match self.forward {
            Some(sink) => Writes::Forwarded(sink),
            None => Writes::Every,
        }
    }

    /// The instruction's regions as one row each ([`as_one_row`]), for arithmetic that does not
    /// depend on the row; `None` when that would compute otherwise, or when the rows go to a
    /// forwarded store (its rows are the destination's).
    fn one_row<const N: usize>(
        &self,
        store: &TileStore<'_>,
        regions: [&TileRegion; N],
    ) -> Option<[TileRegion; N]> {
        self.forward
            .is_none()
            .then(|| as_one_row(store, self.split, regions))
            .flatten()
    }

    pub(crate) fn err(&self, message: String) -> NkiError {
        NkiError::Simulation {
            message,
            instruction: self.inst.op.name(),
            loc: self.inst.loc,
        }
    }

    pub(crate) fn store_err(&self, e: StoreError) -> NkiError {
        match e {
            StoreError::Unallocated(t) => self.err(format!("tile t{} is not allocated here", t.0)),
            StoreError::SharedWrite(t) => self.err(format!(
                "tile t{} is written from a parallel loop iteration",
                t.0
            )),
        }
    }
}

/// Executes one instruction.
pub(crate) fn execute<'a: 'p, 'p>(
    ctx: &Ctx<'a, '_>,
    store: &mut TileStore<'p>,
    scratch: &mut Scratch,
) -> Result<(), NkiError> {
    let result = if super::strided::any_strided(&ctx.inst.op) {
        super::strided::execute(ctx, store, scratch, run)
    } else {
        run(ctx, store, scratch)
    };
    result.map_err(|e| match e {
        ExecError::Store(s) => ctx.store_err(s),
        ExecError::Other(e) => e,
    })
}

/// Why one instruction failed: a tile-store access, or anything already phrased as an error.
pub(crate) enum ExecError {
    Store(StoreError),
    Other(NkiError),
}

impl From<StoreError> for ExecError {
    fn from(e: StoreError) -> Self {
        ExecError::Store(e)
    }
}

impl From<NkiError> for ExecError {
    fn from(e: NkiError) -> Self {
        ExecError::Other(e)
    }
}

pub(crate) fn copy_row(
    store: &TileStore<'_>,
    region: &TileRegion,
    r: usize,
    buf: &mut Vec<f32>,
) -> Result<(), StoreError> {
    buf.clear();
    buf.extend_from_slice(store.row(region, r)?);
    Ok(())
}

fn run<'a: 'p, 'p>(
    ctx: &Ctx<'a, '_>,
    store: &mut TileStore<'p>,
    s: &mut Scratch,
) -> Result<(), ExecError> {
    match &ctx.inst.op {
        Op::DmaCopy {
            dst,
            src,
            reinterpret: true,
            ..
        } => super::dma::dma_reinterpret(ctx, store, dst, src, s)?,
        Op::DmaCopy {
            dst, src, oob_mode, ..
        } if super::indirect::is_dynamic(dst, src) => {
            super::indirect::dma_rows(ctx, store, dst, src, *oob_mode, s)?
        }
        Op::DmaCopy { dst, src, .. } => dma(ctx, store, dst, src, s)?,
        // The order it imposes is kept by the lockstep run of the instances (`lockstep.rs`).
        Op::CoreBarrier { .. } => {}
        // Outside a lockstep run there is one core: only an exchange with itself is defined.
        Op::SendRecv {
            dst,
            src,
            send_to_rank,
            recv_from_rank,
            ..
        } => {
            if (*send_to_rank, *recv_from_rank) != (0, 0) {
                return Err(ctx
                    .err(format!(
                        "sendrecv to core {send_to_rank} and from core {recv_from_rank}, but this \
                         program runs on one core: launch the kernel on the two cores of a \
                         logical NeuronCore (kernel[2])"
                    ))
                    .into());
            }
            let dt = store.dtype(dst.tile);
            rows1(store, dst, src, s, false, |_, out, x| {
                round_into(out, dt, |i| x[i])
            })?;
        }
        op @ (Op::RegisterAlloc { .. }
        | Op::RegisterMove { .. }
        | Op::RegisterLoad { .. }
        | Op::RegisterStore { .. }
        | Op::DmaCompute { .. }) => super::register::execute(ctx, store, op)?,
        Op::TensorTensor { dst, a, b, op, .. } if op.is_bitvec() => {
            bitvec::tensor_tensor(ctx, store, s, (dst, a, b), *op)?;
        }
        op @ Op::DmaTranspose { .. } => super::dma::dma_transpose(ctx, store, op)?,
        // Both engines compute in fp32 and round on write.
        Op::TensorTensor { dst, a, b, op, .. } => {
            let dt = store.dtype(dst.tile);
            let one_row = ctx.one_row(store, [dst, a, b]);
            let [dst, a, b] = one_row.as_ref().map_or([dst, a, b], |[d, x, y]| [d, x, y]);
            rows2_writing(
                store,
                (dst, ctx.writes_every()),
                (a, b),
                s,
                ctx.split,
                #[inline(always)]
                |_, out, x, y| {
                    let (x, y) = (as_long_as(x, out), as_long_as(y, out));
                    with_op!(*op, |f| round_into(out, dt, |i| f(x[i], y[i])))
                },
            )?;
        }
        // A tensor_scalar into an fp32 temporary, then a tensor_tensor: the intermediate stays
        // in fp32 and the result is rounded once.
        Op::ScalarTensorTensor {
            dst,
            data,
            op0,
            operand0,
            reverse0,
            op1,
            operand1,
            reverse1,
            reduce: None,
        } => {
            let dt = store.dtype(dst.tile);
            let v0 = column_values(store, operand0, dst.np)?;
            let reversed = *reverse0 || *reverse1;
            rows2(
                store,
                dst,
                data,
                operand1,
                s,
                ctx.split,
                #[inline(always)]
                |r, out, x, y| {
                    let (x, y) = (as_long_as(x, out), as_long_as(y, out));
                    let v0 = v0[r];
                    if reversed {
                        let stages = ((*op0, *reverse0), (*op1, *reverse1));
                        round_into(out, dt, |i| two_stages(stages, x[i], v0, y[i]));
                        return;
                    }
                    with_op!(*op0, |f0| with_op!(*op1, |f1| {
                        round_into(out, dt, |i| f1(f0(x[i], v0), y[i]))
                    }))
                },
            )?;
        }
        // The same in fp32, reduced, then rounded to dst.
        Op::ScalarTensorTensor {
            dst,
            data,
            op0,
            operand0,
            reverse0,
            op1,
            operand1,
            reverse1,
            reduce: Some((reduce_op, res)),
        } => {
            let dt = store.dtype(dst.tile);
            let v0 = column_values(store, operand0, dst.np)?;
            let reversed = *reverse0 || *reverse1;
            let reduced = rows2(
                store,
                dst,
                data,
                operand1,
                s,
                ctx.split,
                #[inline(always)]
                |r, out, x, y| {
                    let v0 = v0[r];
                    if reversed {
                        let stages = ((*op0, *reverse0), (*op1, *reverse1));
                        round_into(out, DType::F32, |i| two_stages(stages, x[i], v0, y[i]));
                    } else {
                        with_op!(*op0, |f0| with_op!(*op1, |f1| {
                            round_into(out, DType::F32, |i| f1(f0(x[i], v0), y[i]))
                        }));
                    }
                    // As for activation: the engine reduces the fp32 results, before they are
                    // rounded to dst.
                    let total = reduce_row(*reduce_op, out);
                    round_into_in_place(out, dt);
                    total
                },
            )?;
            write_column(store, res, reduced)?;
        }
        Op::TensorScalar {
            dst,
            data,
            op0,
            operand0,
            reverse0,
            op1,
            reverse1,
        } if op0.is_bitvec() => {
            let second = op1.as_ref().map(|(op, o)| (*op, o));
            let reverse = (*reverse0, *reverse1);
            bitvec::tensor_scalar(
                ctx,
                store,
                s,
                (dst, data),
                (*op0, operand0),
                second,
                reverse,
            )?;
        }
        Op::TensorScalar {
            dst,
            data,
            op0,
            operand0,
            reverse0,
            op1,
            reverse1,
        } => {
            let dt = store.dtype(dst.tile);
            // Immediate operands make every row the same arithmetic.
            let immediates = matches!(operand0, ScalarOperand::Imm { .. })
                && op1
                    .as_ref()
                    .is_none_or(|(_, o)| matches!(o, ScalarOperand::Imm { .. }));
            let one_row = immediates
                .then(|| ctx.one_row(store, [dst, data]))
                .flatten();
            let [dst, data] = one_row.as_ref().map_or([dst, data], |[d, x]| [d, x]);
            let v0 = column_values(store, operand0, dst.np)?;
            let second = match op1 {
                Some((op, o)) => Some((*op, column_values(store, o, dst.np)?)),
                None => None,
            };
            let reversed = *reverse0 || *reverse1;
            rows1_writing(
                store,
                (dst, ctx.writes_every()),
                data,
                s,
                ctx.split,
                #[inline(always)]
                |r, out, x| {
                    let x = as_long_as(x, out);
                    let v0 = v0[r];
                    if reversed {
                        let first = |x: f32| oriented(*op0, *reverse0, x, v0);
                        match &second {
                            None => round_into(out, dt, |i| first(x[i])),
                            Some((op1, v1)) => round_into(out, dt, |i| {
                                oriented(*op1, *reverse1, first(x[i]), v1[r])
                            }),
                        }
                        return;
                    }
                    match &second {
                        None => with_op!(*op0, |f0| round_into(out, dt, |i| f0(x[i], v0))),
                        Some((op1, v1)) => {
                            let v1 = v1[r];
                            with_op!(*op0, |f0| with_op!(*op1, |f1| {
                                round_into(out, dt, |i| f1(f0(x[i], v0), v1))
                            }))
                        }
                    }
                },
            )?;
        }
        Op::Activation {
            dst,
            func,
            data,
            scale,
            bias,
            reduce,
        } => {
            let dt = store.dtype(dst.tile);
            // An immediate scale, no bias and no reduction make every row the same arithmetic.
            let uniform =
                matches!(scale, ScalarOperand::Imm { .. }) && bias.is_none() && reduce.is_none();
            let one_row = uniform.then(|| ctx.one_row(store, [dst, data])).flatten();
            let [dst, data] = one_row.as_ref().map_or([dst, data], |[d, x]| [d, x]);
            let scales = column_values(store, scale, dst.np)?;
            let biases = match bias {
                Some(b) => {
                    column_values(store, &ScalarOperand::Column { region: b.clone() }, dst.np)?
                }
                None => vec![0.0; dst.np],
            };
            let reduced = rows1_writing(
                store,
                (dst, ctx.writes_every()),
                data,
                s,
                ctx.split,
                #[inline(always)]
                |r, out, x| {
                    apply_activation(*func, x, scales[r], biases[r], out);
                    // The engine reduces the fp32 results, before they are rounded to dst.
                    let total = reduce.as_ref().map(|(op, _)| reduce_row(*op, out));
                    round_into_in_place(out, dt);
                    total
                },
            )?;
            if let Some((_, res)) = reduce {
                write_column(store, res, reduced.into_iter().flatten().collect())?;
            }
        }
        op @ Op::Activate2 { .. } => super::scalar::activate2(ctx, store, s, op)?,
        Op::TensorReduce { dst, op, data, .. } if op.is_bitvec() => {
            bitvec::tensor_reduce(store, dst, *op, data)?;
        }
        Op::TensorReduce {
            dst,
            op,
            data,
            negate,
        } => {
            // Each of dst's columns reduces one consecutive group of data's free elements.
            let dt = store.dtype(dst.tile);
            let group = data.nf / dst.nf.max(1);
            rows1(
                store,
                dst,
                data,
                s,
                ctx.split,
                #[inline(always)]
                |_, out, x| {
                    for (o, g) in out.iter_mut().zip(x.chunks(group)) {
                        let v = reduce_row_inline(*op, g);
                        *o = dt.round(if *negate { -v } else { v });
                    }
                },
            )?;
        }
        Op::BnStats { dst, data } => {
            let dt = store.dtype(dst.tile);
            for r in 0..data.np {
                let stats = bn_stats_row(store.row(data, r)?);
                round_into(store.row_mut(dst, r)?, dt, |i| stats[i]);
            }
        }
        Op::BnAggr { dst, data } => {
            let dt = store.dtype(dst.tile);
            for r in 0..data.np {
                let stats = bn_aggr_row(store.row(data, r)?);
                round_into(store.row_mut(dst, r)?, dt, |i| stats[i]);
            }
        }
        Op::TensorCopy { dst, src } => {
            let dt = store.dtype(dst.tile);
            let one_row = ctx.one_row(store, [dst, src]);
            let [dst, src] = one_row.as_ref().map_or([dst, src], |[d, x]| [d, x]);
            rows1_writing(
                store,
                (dst, ctx.writes_every()),
                src,
                s,
                ctx.split,
                #[inline(always)]
                |_, out, x| {
                    let x = as_long_as(x, out);
                    round_into(out, dt, |i| x[i])
                },
            )?;
        }
        // fp32 division, rounded on write (as `BinOp::Divide` with a numerator of 1).
        Op::Reciprocal { dst, data } => {
            let dt = store.dtype(dst.tile);
            rows1(
                store,
                dst,
                data,
                s,
                ctx.split,
                #[inline(always)]
                |_, out, x| {
                    let x = as_long_as(x, out);
                    round_into(out, dt, |i| 1.0 / x[i])
                },
            )?;
        }
        Op::Memset { dst, value } => {
            let v = store.dtype(dst.tile).round(*value);
            for r in 0..dst.np {
                store.row_mut(dst, r)?.fill(v);
            }
        }
        Op::Rng { .. }
        | Op::Rand2 { .. }
        | Op::RandSetState { .. }
        | Op::RandGetState { .. }
        | Op::SetRngSeed { .. }
        | Op::Dropout { .. } => {
            let prng = ctx.prng.ok_or_else(|| {
                NkiError::Internal(format!(
                    "{} ran without the generator state (in a band?)",
                    ctx.inst.op.name()
                ))
            })?;
            super::random::execute(ctx, store, prng)?
        }
        Op::Iota {
            dst,
            offset,
            channel_multiplier,
            pattern,
        } => {
            let dt = store.dtype(dst.tile);
            let free = crate::ir::iota_offsets(pattern);
            for r in 0..dst.np {
                // int32 arithmetic, wrapping as the engine's does, then the write's rounding.
                let base = offset.wrapping_add(channel_multiplier.wrapping_mul(r as i32));
                round_into(store.row_mut(dst, r)?, dt, |f| {
                    base.wrapping_add(free[f]) as f32
                });
            }
        }
        Op::RangeSelect {
            dst,
            on_true,
            comp0,
            bound0,
            comp1,
            bound1,
            range_start,
            on_false,
            reduce,
        } => {
            let dt = store.dtype(dst.tile);
            let b0 = column_values(
                store,
                &ScalarOperand::Column {
                    region: bound0.clone(),
                },
                dst.np,
            )?;
            let b1 = column_values(
                store,
                &ScalarOperand::Column {
                    region: bound1.clone(),
                },
                dst.np,
            )?;
            let reduced = rows1(
                store,
                dst,
                on_true,
                s,
                ctx.split,
                #[inline(always)]
                |r, out, x| {
                    // Both comparisons are monotone in the index, so the selected columns are one
                    // contiguous range.
                    let (lo, hi) =
                        selected_columns(out.len(), *range_start, (*comp0, b0[r]), (*comp1, b1[r]));
                    out[..lo].fill(*on_false);
                    out[lo..hi].copy_from_slice(&x[lo..hi]);
                    out[hi..].fill(*on_false);
                    // As for activation: the engine reduces the fp32 results, before they are
                    // rounded to dst (an fp32 reduce_res keeps an fp32 on_false_value exactly).
                    let total = reduce.as_ref().map(|(op, _)| reduce_row(*op, out));
                    round_into_in_place(out, dt);
                    total
                },
            )?;
            if let Some((_, res)) = reduce {
                write_column(store, res, reduced.into_iter().flatten().collect())?;
            }
        }
        Op::Exponential {
            dst,
            src,
            max_value,
            reduce_res,
            reduce_init,
        } => super::vector::exponential(
            ctx,
            store,
            s,
            (dst, src, max_value),
            reduce_res.as_ref().map(|r| (r, reduce_init)),
        )?,
        op @ Op::AffineSelect { .. } => super::selection::affine_select(ctx, store, s, op)?,
        Op::TensorCopyPredicated {
            dst,
            src,
            imm,
            predicate,
            reverse,
        } => super::vector::tensor_copy_predicated(
            ctx,
            store,
            s,
            (dst, src.as_ref(), *imm),
            predicate,
            *reverse,
        )?,
        op @ Op::TensorScalarReduce { .. } => {
            super::vector::tensor_scalar_reduce(ctx, store, s, op)?
        }
        op @ Op::NcStreamShuffle { .. } => super::partition::stream_shuffle(store, op)?,
        op @ Op::LocalGather { .. } => super::gather::local_gather(ctx, store, op)?,
        op @ Op::NcNGather { .. } => super::gather::n_gather(ctx, store, op)?,
        op @ Op::QuantizeMx { .. } => super::mx::quantize_mx(ctx, store, op)?,
        op @ Op::NcMatmulMx { .. } => super::mx::nc_matmul_mx(ctx, store, op)?,
        op @ Op::TensorPartitionReduce { .. } => {
            super::partition::partition_reduce(ctx, store, op)?
        }
        op @ Op::SelectReduce { .. } => super::vector::select_reduce(ctx, store, s, op)?,
        op @ Op::TensorScalarCumulative { .. } => {
            super::vector::tensor_scalar_cumulative(ctx, store, s, op)?
        }
        op @ Op::SequenceBounds { .. } => super::gpsimd::sequence_bounds(store, op)?,
        op @ Op::NonzeroWithCount { .. } => super::gpsimd::nonzero_with_count(store, op)?,
        op @ Op::Topk { .. } => super::gpsimd::topk(ctx, store, op)?,
        op @ Op::TensorTensorScan { .. } => super::vector::tensor_tensor_scan(ctx, store, s, op)?,
        Op::Max8 { dst, src } => super::selection::max8(ctx, store, s, dst, src)?,
        Op::NcFindIndex8 { dst, data, vals } => {
            super::selection::find_index8(ctx, store, s, (dst, data, vals))?
        }
        Op::NcMatchReplace8 {
            dst,
            data,
            vals,
            imm,
            dst_idx,
        } => super::selection::match_replace8(
            ctx,
            store,
            s,
            (dst, data, vals),
            *imm,
            dst_idx.as_ref(),
        )?,
        Op::NcMatmul {
            dst,
            stationary,
            moving,
            accumulate,
            is_transpose: true,
            ..
        } => super::matmul::transpose_mode(ctx, store, dst, stationary, moving, *accumulate)?,
        Op::NcMatmul {
            dst,
            stationary,
            moving,
            accumulate,
            perf_mode,
            ..
        } => match perf_mode {
            MatmulPerfMode::None => matmul(ctx, store, dst, stationary, moving, *accumulate)?,
            // The halves in turn, the second accumulating into the first.
            MatmulPerfMode::DoubleRow => {
                let halves = |r| {
                    MatmulPerfMode::double_row_halves(r).ok_or_else(|| {
                        ctx.err("nc_matmul: a double_row operand without two halves".into())
                    })
                };
                let ([s0, s1], [m0, m1]) = (halves(stationary)?, halves(moving)?);
                matmul(ctx, store, dst, &s0, &m0, *accumulate)?;
                matmul(ctx, store, dst, &s1, &m1, true)?;
            }
        },
        Op::NcTranspose { dst, data, .. } => {
            if dst.tile == data.tile {
                return Err(ctx
                    .err("nc_transpose destination aliases its source".into())
                    .into());
            }
            if dst.shape() != [data.nf, data.np] {
                return Err(ctx
                    .err(format!(
                        "nc_transpose of a {:?} source into a {:?} destination",
                        data.shape(),
                        dst.shape()
                    ))
                    .into());
            }
            if data.np == 0 || data.nf == 0 {
                return Ok(());
            }
            let dt = store.dtype(dst.tile);
            let (mut out, dstride) = store.take(dst.tile)?;
            let result = store.data(data.tile).map(|(src, sstride)| {
                let src = &src[data.p0 * sstride + data.f0..];
                let o = &mut out[dst.p0 * dstride + dst.f0..];
                super::transpose::transpose(src, sstride, data.np, data.nf, o, dstride);
                if dt != DType::F32 {
                    // In vectors as wide as the CPU has: this closure is not inside a caller
                    // compiled for them (four lanes wide, it was 10–12% of a bf16 linear's time).
                    crate::wide::wide(
                        #[inline(always)]
                        || {
                            for f in 0..data.nf {
                                round_into_in_place(&mut o[f * dstride..][..data.np], dt);
                            }
                        },
                    );
                }
            });
            store.restore(dst.tile, out);
            result?;
        }
    }
    Ok(())
}

/// `x <op> operand`, or `operand <op> x` when `reverse` (NKI's `reverse0` / `reverse1`).
#[inline(always)]
pub(crate) fn oriented(op: BinOp, reverse: bool, x: f32, operand: f32) -> f32 {
    with_op!(op, |f| if reverse {
        f(operand, x)
    } else {
        f(x, operand)
    })
}

/// `scalar_tensor_tensor`'s two stages with their operand orders: `(x <op0> v0) <op1> y`, each
/// stage's operands swapped when its flag is set.
#[inline(always)]
fn two_stages(
    ((op0, reverse0), (op1, reverse1)): ((BinOp, bool), (BinOp, bool)),
    x: f32,
    v0: f32,
    y: f32,
) -> f32 {
    oriented(op1, reverse1, oriented(op0, reverse0, x, v0), y)
}
