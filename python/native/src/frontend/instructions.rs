//! What each implemented `nisa` instruction does with its decoded arguments: the one place
//! the frontend maps an NKI call onto the tile language's `nki_core::isa` function (so a call
//! runs the same checks as a Rust kernel). Signatures, kinds, defaults and engines come from the
//! instruction's declaration in `nki_spec`; a keyword an instruction below does not read must be
//! at its default ([`Args::finish`]).

use super::Tracer;
use super::args::{Args, Scalar};
use nki_core::ir::{ActFn, BinOp, DgeMode, ElementwiseEngine, OobMode, ScalarOperand, TileRegion};
use nki_core::isa;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

/// An optional tuple of non-negative ints (`tile_position`, `tile_size`): empty for `None`.
fn pair(a: &Args<'_>, name: &str) -> PyResult<Vec<usize>> {
    let v = a.value(name)?;
    if v.is_none() {
        return Ok(Vec::new());
    }
    v.extract::<Vec<usize>>()
        .map_err(|_| a.type_error(name, "a tuple of non-negative ints", &v))
}

fn scalar(s: Scalar) -> ScalarOperand {
    match s {
        Scalar::Imm(value) => ScalarOperand::Imm {
            value: value as f32,
        },
        Scalar::Tile(r) => ScalarOperand::Column { region: r },
    }
}

fn binop(a: &Args<'_>, name: &str) -> PyResult<BinOp> {
    let f = a.function(name)?;
    BinOp::from_nki_name(&f).ok_or_else(|| a.unsupported(&format!("{name}=nl.{f}")))
}

fn opt_binop(a: &Args<'_>, name: &str) -> PyResult<Option<BinOp>> {
    match a.opt_function(name)? {
        None => Ok(None),
        Some(_) => binop(a, name).map(Some),
    }
}

fn actfn(a: &Args<'_>, name: &str) -> PyResult<ActFn> {
    let f = a.function(name)?;
    ActFn::from_nki_name(&f).ok_or_else(|| a.unsupported(&format!("{name}=nl.{f}")))
}

/// The engine chosen by `engine=`, which must be `unknown` or one of `modelled` (the engines
/// the IR records this instruction on; the first is what `unknown` picks).
fn engine<'e>(a: &Args<'_>, modelled: &[&'e str]) -> PyResult<&'e str> {
    let chosen = a.variant("engine")?;
    if chosen == "unknown" {
        return Ok(modelled[0]);
    }
    modelled
        .iter()
        .copied()
        .find(|m| *m == chosen)
        .ok_or_else(|| a.unsupported(&format!("engine=nisa.engine.{chosen}")))
}

/// The IR's engine for an `engine()` answer among vector and gpsimd.
fn elementwise_engine(chosen: &str) -> ElementwiseEngine {
    match chosen {
        "gpsimd" => ElementwiseEngine::GpSimd,
        _ => ElementwiseEngine::Vector,
    }
}

/// The reduction of an instruction that writes this instruction's row reductions into
/// `reduce_res` (`reduce_cmd=reset_reduce`). Without `reduce_res` there is none, and
/// `reduce_op` / `reduce_cmd` are left for [`Args::finish`] to require at their defaults
/// (reducing into the accumulator registers across instructions is not implemented).
fn reduction(a: &Args<'_>) -> PyResult<Option<(BinOp, TileRegion)>> {
    let Some(res) = a.opt_tile("reduce_res")? else {
        return Ok(None);
    };
    let cmd = a.variant("reduce_cmd")?;
    if cmd != "reset_reduce" {
        return Err(a.unsupported(&format!(
            "reduce_cmd=nisa.reduce_cmd.{cmd} (the accumulator registers across instructions; \
             only reset_reduce, which writes this instruction's reductions)"
        )));
    }
    let op = opt_binop(a, "reduce_op")?
        .ok_or_else(|| a.value_error("reduce_res needs reduce_op".into()))?;
    Ok(Some((op, res)))
}

/// One tensor-scalar stage of `activate2`: its operator keyword (`nl.bypass` for none, whose
/// operand is read and ignored), operand and reverse flag.
fn activate2_stage(
    a: &Args<'_>,
    op: &str,
    imm: &str,
    reverse: &str,
) -> PyResult<isa::Activate2Stage> {
    let operand = scalar(a.scalar(imm)?);
    let stage = if a.function(op)? == "bypass" {
        isa::Activate2Stage::bypass()
    } else {
        isa::Activate2Stage::new(binop(a, op)?, operand)
    };
    Ok(if a.flag(reverse)? {
        isa::Activate2Stage {
            reverse: true,
            ..stage
        }
    } else {
        stage
    })
}

/// `exponential`'s row sum: `(reduce_res, reduce_init)` for `reduce_cmd=reset_reduce` (from 0)
/// or `load_reduce` (from `reduce_init`) with `reduce_res`. Without `reduce_res` there is none and
/// `reduce_cmd` must be at its default (`idle`, checked by [`Args::finish`]): keeping the sum in the
/// accumulator registers for a later instruction (`reduce`, or no `reduce_res`) is not
/// implemented. As the docs require, `reduce_init` is 0.0 unless `reduce_cmd` is `load_reduce`.
fn exponential_reduction(a: &Args<'_>) -> PyResult<Option<(TileRegion, ScalarOperand)>> {
    let Some(res) = a.opt_tile("reduce_res")? else {
        return Ok(None);
    };
    let init = a.scalar("reduce_init")?;
    match (a.variant("reduce_cmd")?.as_str(), init) {
        ("reset_reduce", Scalar::Imm(0.0)) => Ok(Some((res, ScalarOperand::Imm { value: 0.0 }))),
        ("reset_reduce", _) => Err(a.value_error(
            "reduce_init must be 0.0 unless reduce_cmd is nisa.reduce_cmd.load_reduce".into(),
        )),
        ("load_reduce", init) => Ok(Some((res, scalar(init)))),
        (cmd, _) => Err(a.unsupported(&format!(
            "reduce_cmd=nisa.reduce_cmd.{cmd} with reduce_res (the accumulator registers across \
             instructions; reset_reduce and load_reduce write this instruction's row sums)"
        ))),
    }
}

/// The one step of an `iota` pattern (`[[step, num], ...]`, outermost first) over `free`
/// elements: dimensions of size 1 drop out, and an outer dimension whose step is the inner
/// one's step times its size continues it.
fn iota_step(a: &Args<'_>, free: usize) -> PyResult<i32> {
    let pattern = a.value("pattern")?;
    let bad = || a.type_error("pattern", "[[step, num], ...] of int32s", &pattern);
    let dims: Vec<Vec<i32>> = pattern.extract().map_err(|_| bad())?;
    let dims: Vec<(i32, i32)> = dims
        .into_iter()
        .map(|d| match d.as_slice() {
            [step, num] => Ok((*step, *num)),
            _ => Err(bad()),
        })
        .collect::<PyResult<_>>()?;
    let total: i64 = dims.iter().map(|&(_, n)| i64::from(n)).product();
    if total != free as i64 {
        return Err(a.value_error(format!(
            "pattern covers {total} elements per partition but dst has {free}"
        )));
    }
    // With one element per partition the step is never applied: keep the innermost one given
    // (what generated code writes for a one-column tile), so a round trip finds the same value.
    let (mut step, mut size) = (dims.last().map_or(0, |d| d.0), 1i64);
    for &(outer, num) in dims.iter().rev().filter(|d| d.1 != 1) {
        if size == 1 {
            (step, size) = (outer, i64::from(num));
        } else if i64::from(outer) == i64::from(step) * size {
            size *= i64::from(num);
        } else {
            return Err(a.unsupported(
                "pattern= that is not one arithmetic progression over the free elements",
            ));
        }
    }
    Ok(step)
}

fn tensor_reduce_axis(a: &Args<'_>) -> PyResult<usize> {
    let v = a.value("axis")?;
    let axes: Vec<usize> = match v.extract::<usize>() {
        Ok(axis) => vec![axis],
        Err(_) => v
            .cast::<PyTuple>()
            .map(|t| t.extract())
            .or_else(|_| v.cast::<PyList>().map(|l| l.extract()))
            .map_err(|_| a.value_error("axis must be an int or a tuple of ints".into()))??,
    };
    match axes.as_slice() {
        [axis] => Ok(*axis),
        _ => Err(a.unsupported(&format!("axis={axes:?} (several axes)"))),
    }
}

/// Records `nisa.<spec.name>(...)` with its decoded arguments `a` at `file:line`.
pub(super) fn record(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let name = a.call();
    match name.strip_prefix("nisa.").unwrap_or(&name) {
        "dma_copy" => {
            // Which engine triggers the transfer, how its descriptors are made, its queue
            // priority and the out-of-bounds mode of indirect accesses do not change the bytes
            // a direct copy moves; the cost model does not tell them apart yet.
            for unmodelled in ["priority", "oob_mode", "dge_mode", "engine"] {
                a.value(unmodelled)?;
            }
            let dst = tracer.dma_arg(&a.tensor("dst")?)?;
            let src = tracer.dma_arg(&a.tensor("src")?)?;
            a.finish()?;
            tracer.at(file, line, || isa::dma_copy(dst, src))
        }
        "dma_transpose" => {
            let dst = a.tile("dst")?;
            let src_value = a.tensor("src")?;
            let src = match tracer.dma_arg(&src_value)? {
                isa::DmaArg::Tile(r) => isa::TransposeSrc::tile(r, a.tile_dims("src")?),
                isa::DmaArg::Hbm(v) => v.into(),
            };
            let axes_value = a.value("axes")?;
            let axes: Option<Vec<usize>> = if axes_value.is_none() {
                None
            } else {
                Some(
                    axes_value
                        .extract()
                        .map_err(|_| a.type_error("axes", "a tuple of ints", &axes_value))?,
                )
            };
            let priority = match a.opt_count("priority")? {
                None => None,
                Some(p) => Some(u8::try_from(p).map_err(|_| {
                    a.value_error(format!("priority is {p}; DMA priorities are 0..=3"))
                })?),
            };
            let dge_mode = a.variant("dge_mode")?;
            let oob_mode = a.variant("oob_mode")?;
            let args = isa::DmaTransposeArgs {
                axes,
                priority,
                dge_mode: DgeMode::from_nki_name(&dge_mode)
                    .ok_or_else(|| a.unsupported(&format!("dge_mode=nisa.dge_mode.{dge_mode}")))?,
                oob_mode: OobMode::from_nki_name(&oob_mode)
                    .ok_or_else(|| a.unsupported(&format!("oob_mode=nisa.oob_mode.{oob_mode}")))?,
            };
            a.finish()?;
            tracer.at(file, line, || isa::dma_transpose(dst, src, args))
        }
        "tensor_copy" => {
            engine(a, &["vector"])?;
            let (dst, src) = (a.tile("dst")?, a.tile("src")?);
            a.finish()?;
            tracer.at(file, line, || isa::tensor_copy(dst, src))
        }
        "memset" => {
            engine(a, &["vector"])?;
            let (dst, value) = (a.tile("dst")?, a.number("value")?);
            a.finish()?;
            tracer.at(file, line, || isa::memset(dst, value as f32))
        }
        "rng" => {
            let on = elementwise_engine(engine(a, &["vector", "gpsimd"])?);
            let dst = a.tile("dst")?;
            a.finish()?;
            tracer.at(file, line, || isa::rng(dst, on))
        }
        "rand2" => {
            let dst = a.tile("dst")?;
            let (min, max) = (scalar(a.scalar("min")?), scalar(a.scalar("max")?));
            a.finish()?;
            tracer.at(file, line, || isa::rand2(dst, min, max))
        }
        "rand_set_state" => {
            let on = elementwise_engine(engine(a, &["gpsimd", "vector"])?);
            let src = a.tile("src_seeds")?;
            a.finish()?;
            tracer.at(file, line, || isa::rand_set_state(src, on))
        }
        "rand_get_state" => {
            let on = elementwise_engine(engine(a, &["gpsimd", "vector"])?);
            let dst = a.tile("dst")?;
            a.finish()?;
            tracer.at(file, line, || isa::rand_get_state(dst, on))
        }
        "set_rng_seed" => {
            let src = a.tile("src_seeds")?;
            a.finish()?;
            tracer.at(file, line, || isa::set_rng_seed(src))
        }
        "dropout" => {
            let (dst, data) = (a.tile("dst")?, a.tile("data")?);
            let prob = scalar(a.scalar("prob")?);
            a.finish()?;
            tracer.at(file, line, || isa::dropout(dst, data, prob))
        }
        "nc_matmul" => {
            let dst = a.tile("dst")?;
            let (stationary, moving) = (a.tile("stationary")?, a.tile("moving")?);
            // NKI's `accumulate=None` accumulates when the destination was written before.
            let accumulate = a
                .opt_flag("accumulate")?
                .unwrap_or_else(|| tracer.written.contains(&dst.tile.0));
            a.finish()?;
            tracer.at(file, line, || {
                isa::nc_matmul(dst, stationary, moving, accumulate)
            })
        }
        "quantize_mx" => {
            let (dst, src) = (a.tile("dst")?, a.tile("src")?);
            let dst_scale = a.tile("dst_scale")?;
            a.finish()?;
            tracer.at(file, line, || isa::quantize_mx(dst, src, dst_scale))
        }
        "nc_matmul_mx" => {
            let dst = a.tile("dst")?;
            let (stationary, moving) = (a.tile("stationary")?, a.tile("moving")?);
            let s_scale = a.tile("stationary_scale")?;
            let m_scale = a.tile("moving_scale")?;
            let tiling = isa::MxTiling {
                tile_position: pair(a, "tile_position")?,
                tile_size: pair(a, "tile_size")?,
            };
            // As nc_matmul: `accumulate=None` accumulates when the destination was written.
            let accumulate = a
                .opt_flag("accumulate")?
                .unwrap_or_else(|| tracer.written.contains(&dst.tile.0));
            a.finish()?;
            tracer.at(file, line, || {
                isa::nc_matmul_mx(
                    dst,
                    (stationary, moving),
                    (s_scale, m_scale),
                    tiling,
                    accumulate,
                )
            })
        }
        "nc_transpose" => {
            engine(a, &["tensor"])?;
            let (dst, data) = (a.tile("dst")?, a.tile("data")?);
            a.finish()?;
            tracer.at(file, line, || isa::nc_transpose(dst, data))
        }
        "tensor_tensor" => {
            let on = match engine(a, &["vector", "gpsimd"])? {
                "gpsimd" => ElementwiseEngine::GpSimd,
                _ => ElementwiseEngine::Vector,
            };
            let (dst, d1, d2) = (a.tile("dst")?, a.tile("data1")?, a.tile("data2")?);
            let op = binop(a, "op")?;
            a.finish()?;
            tracer.at(file, line, || isa::tensor_tensor(dst, d1, d2, op).on(on))
        }
        "tensor_scalar" => {
            engine(a, &["vector"])?;
            let (dst, data) = (a.tile("dst")?, a.tile("data")?);
            let (op0, operand0) = (binop(a, "op0")?, scalar(a.scalar("operand0")?));
            let second = match (opt_binop(a, "op1")?, a.opt_scalar("operand1")?) {
                (Some(op), Some(operand)) => Some((op, scalar(operand))),
                (None, None) => None,
                _ => return Err(a.value_error("op1 and operand1 go together".into())),
            };
            a.finish()?;
            tracer.at(file, line, || {
                let recorded = isa::tensor_scalar(dst, data, op0, operand0);
                if let Some((op1, operand1)) = second {
                    recorded.then(op1, operand1);
                }
            })
        }
        "scalar_tensor_tensor" => {
            let (dst, data) = (a.tile("dst")?, a.tile("data")?);
            let (op0, operand0) = (binop(a, "op0")?, scalar(a.scalar("operand0")?));
            let (op1, operand1) = (binop(a, "op1")?, a.tile("operand1")?);
            let reduce = reduction(a)?;
            a.finish()?;
            tracer.at(file, line, || match reduce {
                Some((op, res)) => isa::scalar_tensor_tensor_reduce(
                    dst, data, op0, operand0, op1, operand1, op, res,
                ),
                None => isa::scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1),
            })
        }
        "activation" | "activation_reduce" => {
            let (dst, func, data) = (a.tile("dst")?, actfn(a, "op")?, a.tile("data")?);
            let bias = match a.opt_scalar("bias")? {
                None => None,
                Some(Scalar::Tile(r)) => Some(r),
                Some(Scalar::Imm(0.0)) => None,
                Some(Scalar::Imm(v)) => {
                    return Err(a.unsupported(&format!("bias={v} (an immediate bias)")));
                }
            };
            let scale = scalar(a.scalar("scale")?);
            let reduce = if a.call() == "nisa.activation" {
                reduction(a)?
            } else {
                Some((binop(a, "reduce_op")?, a.tile("reduce_res")?))
            };
            a.finish()?;
            tracer.at(file, line, || match reduce {
                Some((op, res)) => isa::activation_reduce(dst, func, data, op, res, bias, scale),
                None => isa::activation(dst, func, data, bias, scale),
            })
        }
        "activate2" => {
            let (dst, func, data) = (a.tile("dst")?, actfn(a, "op")?, a.tile("data")?);
            let stage0 = activate2_stage(a, "op0", "imm0", "reverse0")?;
            let stage1 = activate2_stage(a, "op1", "imm1", "reverse1")?;
            let relu_param = scalar(a.scalar("relu_param")?);
            let reduce = reduction(a)?;
            a.finish()?;
            let stages = (stage0, stage1);
            tracer.at(file, line, || match reduce {
                Some((op, res)) => {
                    isa::activate2_reduce(dst, func, data, stages, relu_param, op, res)
                }
                None => isa::activate2(dst, func, data, stages.0, stages.1, relu_param),
            })
        }
        "tensor_reduce" => {
            let (dst, op, data) = (a.tile("dst")?, binop(a, "op")?, a.tile("data")?);
            let axis = tensor_reduce_axis(a)?;
            let negate = a.flag("negate")?;
            // Tiles are [partition, free]: the result is a (P, 1) column either way.
            a.flag("keepdims")?;
            a.finish()?;
            tracer.at(file, line, || {
                isa::tensor_reduce(dst, op, data, axis, negate)
            })
        }
        "bn_stats" | "bn_aggr" => {
            let (dst, data) = (a.tile("dst")?, a.tile("data")?);
            a.finish()?;
            if name == "nisa.bn_stats" {
                tracer.at(file, line, || isa::bn_stats(dst, data))
            } else {
                tracer.at(file, line, || isa::bn_aggr(dst, data))
            }
        }
        "reciprocal" => {
            let (dst, data) = (a.tile("dst")?, a.tile("data")?);
            a.finish()?;
            tracer.at(file, line, || isa::reciprocal(dst, data))
        }
        "exponential" => {
            let (dst, src) = (a.tile("dst")?, a.tile("src")?);
            let max_value = scalar(a.scalar("max_value")?);
            let reduce = exponential_reduction(a)?;
            a.finish()?;
            tracer.at(file, line, || match reduce {
                Some((res, init)) => isa::exponential_reduce(dst, src, max_value, res, init),
                None => isa::exponential(dst, src, max_value),
            })
        }
        "tensor_scalar_reduce" => {
            let (dst, data) = (a.tile("dst")?, a.tile("data")?);
            let (op0, operand0) = (binop(a, "op0")?, scalar(a.scalar("operand0")?));
            let reduce_op = binop(a, "reduce_op")?;
            let res = a.opt_tile("reduce_res")?.ok_or_else(|| {
                a.unsupported(
                    "reduce_res=None (keeping the reduction in the accumulator registers for a \
                     later instruction)",
                )
            })?;
            let init = match (
                a.variant("reduce_cmd")?.as_str(),
                a.opt_scalar("reduce_init")?,
            ) {
                ("reset_reduce", None) => None,
                ("reset_reduce", Some(_)) => {
                    return Err(a.value_error(
                        "reduce_init is only set with reduce_cmd=nisa.reduce_cmd.load_reduce"
                            .into(),
                    ));
                }
                ("load_reduce", Some(init)) => Some(scalar(init)),
                ("load_reduce", None) => {
                    return Err(a.value_error(
                        "reduce_cmd=nisa.reduce_cmd.load_reduce needs reduce_init".into(),
                    ));
                }
                (cmd, _) => {
                    return Err(a.unsupported(&format!(
                        "reduce_cmd=nisa.reduce_cmd.{cmd} (the accumulator registers across \
                         instructions; reset_reduce and load_reduce write this instruction's \
                         reductions)"
                    )));
                }
            };
            let negate = a.flag("reduce_res_negate")?;
            a.finish()?;
            tracer.at(file, line, || {
                isa::tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, res, init, negate)
            })
        }
        "max8" => {
            let (dst, src) = (a.tile("dst")?, a.tile("src")?);
            a.finish()?;
            tracer.at(file, line, || isa::max8(dst, src))
        }
        "nc_find_index8" => {
            let (dst, data) = (a.tile("dst")?, a.tile("data")?);
            let vals = a.tile("vals")?;
            a.finish()?;
            tracer.at(file, line, || isa::nc_find_index8(dst, data, vals))
        }
        "nc_match_replace8" => {
            let (dst, data) = (a.tile("dst")?, a.tile("data")?);
            let (vals, imm) = (a.tile("vals")?, a.number("imm")? as f32);
            let dst_idx = a.opt_tile("dst_idx")?;
            a.finish()?;
            tracer.at(file, line, || {
                isa::nc_match_replace8(dst, data, vals, imm, dst_idx)
            })
        }
        "tensor_tensor_scan" => {
            let (dst, data0, data1) = (a.tile("dst")?, a.tile("data0")?, a.tile("data1")?);
            let initial = scalar(a.scalar("initial")?);
            let (op0, op1) = (binop(a, "op0")?, binop(a, "op1")?);
            let (reverse0, reverse1) = (a.flag("reverse0")?, a.flag("reverse1")?);
            a.finish()?;
            tracer.at(file, line, || {
                isa::tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0, reverse1)
            })
        }
        "nc_stream_shuffle" => {
            let (dst, src) = (a.tile("dst")?, a.tile("src")?);
            let value = a.value("shuffle_mask")?;
            let mask: Vec<i64> = value
                .extract()
                .map_err(|_| a.type_error("shuffle_mask", "a list of 32 ints", &value))?;
            let mask: Vec<u8> = mask
                .iter()
                .map(|&m| u8::try_from(m))
                .collect::<Result<_, _>>()
                .map_err(|_| {
                    a.value_error(format!(
                        "shuffle_mask entries are partitions 0..31 or 255, got {mask:?}"
                    ))
                })?;
            a.finish()?;
            tracer.at(file, line, || isa::nc_stream_shuffle(dst, src, &mask))
        }
        "local_gather" => {
            let dst = a.tile("dst")?;
            let (src, index) = (a.tile("src_buffer")?, a.tile("index")?);
            let n = a
                .opt_count("num_elem_per_idx")?
                .ok_or_else(|| a.value_error("num_elem_per_idx must be an int, got None".into()))?;
            let valid = a.opt_count("num_valid_indices")?;
            a.finish()?;
            tracer.at(file, line, || isa::local_gather(dst, src, index, n, valid))
        }
        "nc_n_gather" => {
            let dst = a.tile("dst")?;
            let (data, indices) = (a.tile("data")?, a.tile("indices")?);
            a.finish()?;
            tracer.at(file, line, || isa::nc_n_gather(dst, data, indices))
        }
        "tensor_partition_reduce" => {
            let (dst, op, data) = (a.tile("dst")?, binop(a, "op")?, a.tile("data")?);
            a.finish()?;
            tracer.at(file, line, || isa::tensor_partition_reduce(dst, op, data))
        }
        "select_reduce" => {
            let (dst, predicate) = (a.tile("dst")?, a.tile("predicate")?);
            let (on_true, on_false) = (a.tile("on_true")?, scalar(a.scalar("on_false")?));
            let reduce_op = a.function("reduce_op")?;
            if reduce_op != "maximum" {
                return Err(a.value_error(format!(
                    "reduce_op must be nl.maximum (select_reduce reduces with max only), got \
                     nl.{reduce_op}"
                )));
            }
            // reset_reduce writes this instruction's row maxima; the accumulator registers
            // carried across instructions (reduce, idle with reduce_res, reset_reduce without
            // it) are not implemented.
            let res = a.opt_tile("reduce_res")?;
            match (a.variant("reduce_cmd")?.as_str(), &res) {
                ("idle", None) | ("reset_reduce", Some(_)) => {}
                (cmd, res) => {
                    let with = if res.is_some() { "with" } else { "without" };
                    return Err(a.unsupported(&format!(
                        "reduce_cmd=nisa.reduce_cmd.{cmd} {with} reduce_res (the accumulator \
                         registers across instructions; idle without reduce_res selects, \
                         reset_reduce with it writes this instruction's row maxima)"
                    )));
                }
            }
            let reverse_pred = a.flag("reverse_pred")?;
            a.finish()?;
            tracer.at(file, line, || {
                isa::select_reduce(dst, predicate, on_true, on_false, res, reverse_pred)
            })
        }
        "tensor_scalar_cumulative" => {
            let (dst, src) = (a.tile("dst")?, a.tile("src")?);
            let (op0, op1) = (binop(a, "op0")?, binop(a, "op1")?);
            let imm0 = scalar(a.scalar("imm0")?);
            let imm1 = match (a.variant("reduce_cmd")?.as_str(), a.opt_scalar("imm1")?) {
                ("reset_reduce", None) => None,
                ("reset_reduce", Some(_)) => {
                    return Err(a.value_error(
                        "imm1 is only read with reduce_cmd=nisa.reduce_cmd.load_reduce".into(),
                    ));
                }
                ("load_reduce", Some(init)) => Some(scalar(init)),
                ("load_reduce", None) => {
                    return Err(a.value_error(
                        "reduce_cmd=nisa.reduce_cmd.load_reduce needs imm1, the value the \
                         accumulator starts from"
                            .into(),
                    ));
                }
                (cmd, _) => {
                    return Err(a.unsupported(&format!(
                        "reduce_cmd=nisa.reduce_cmd.{cmd} (the accumulator registers across \
                         instructions; reset_reduce and load_reduce start this instruction's \
                         running reduction)"
                    )));
                }
            };
            a.finish()?;
            tracer.at(file, line, || {
                isa::tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1)
            })
        }
        "sequence_bounds" => {
            let (dst, ids) = (a.tile("dst")?, a.tile("segment_ids")?);
            a.finish()?;
            tracer.at(file, line, || isa::sequence_bounds(dst, ids))
        }
        "nonzero_with_count" => {
            let (dst, src) = (a.tile("dst")?, a.tile("src")?);
            let (offset, padding) = (a.int32("index_offset")?, a.int32("padding_val")?);
            a.finish()?;
            tracer.at(file, line, || {
                isa::nonzero_with_count(dst, src, offset, padding)
            })
        }
        "topk" => {
            let (val_dst, idx_dst) = (a.tile("val_dst")?, a.tile("idx_dst")?);
            let src = a.tile("src")?;
            let n = a.int32("n")?;
            let n = usize::try_from(n).map_err(|_| {
                a.value_error(format!("n is the number of elements in the snake, got {n}"))
            })?;
            a.finish()?;
            tracer.at(file, line, || isa::topk(val_dst, idx_dst, src, n))
        }
        "tensor_copy_predicated" => {
            // A tile src is a whole tile of dst's shape here, not a (P, 1) column.
            let (dst, src) = (a.tile("dst")?, scalar(a.scalar("src")?));
            let (predicate, reverse) = (a.tile("predicate")?, a.flag("reverse_pred")?);
            a.finish()?;
            tracer.at(file, line, || {
                isa::tensor_copy_predicated(dst, src, predicate, reverse)
            })
        }
        "affine_select" => {
            let dst = a.tile("dst")?;
            let step = iota_step(a, dst.nf)?;
            let multiplier = a.int32("channel_multiplier")?;
            let on_true = a.tile("on_true_tile")?;
            let on_false = a.number("on_false_value")? as f32;
            let (cmp, offset) = (binop(a, "cmp_op")?, a.int32("offset")?);
            a.finish()?;
            tracer.at(file, line, || {
                isa::affine_select(dst, step, multiplier, on_true, on_false, cmp, offset)
            })
        }
        "iota" => {
            let dst = a.tile("dst")?;
            let step = iota_step(a, dst.nf)?;
            let (offset, multiplier) = (a.int32("offset")?, a.int32("channel_multiplier")?);
            a.finish()?;
            tracer.at(file, line, || isa::iota(dst, offset, multiplier, step))
        }
        "range_select" => {
            let (dst, on_true) = (a.tile("dst")?, a.tile("on_true_tile")?);
            let (comp0, comp1) = (binop(a, "comp_op0")?, binop(a, "comp_op1")?);
            let (bound0, bound1) = (a.tile("bound0")?, a.tile("bound1")?);
            let reduce = reduction(a)?;
            let range_start = a.number("range_start")?;
            // NKI writes `on_false_value=...`; its documented default value is 0.0.
            let on_false = a.opt_number("on_false_value")?.unwrap_or(0.0);
            a.finish()?;
            let (res, op) = match reduce {
                Some((op, res)) => (Some(res), op),
                None => (None, BinOp::Maximum),
            };
            tracer.at(file, line, || {
                isa::range_select(
                    dst,
                    on_true,
                    comp0,
                    comp1,
                    bound0,
                    bound1,
                    res,
                    op,
                    range_start as f32,
                    on_false as f32,
                )
            })
        }
        _ => Err(a.unsupported("...")),
    }
}
