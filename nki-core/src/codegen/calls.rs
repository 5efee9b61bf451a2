//! Each instruction as its `nisa.*` call: the keywords codegen passes, in the order of the
//! instruction's NKI signature, with the values spelled as NKI reads them.

use super::{Emitter, float, register_value};
use crate::ir::{DgeMode, DmaOperand, ElementwiseEngine, OobMode, Op, ScalarOperand, TileRegion};

impl Emitter<'_> {
    /// `nisa.<name>(dst=..., ...)` for one instruction.
    pub(super) fn call(&self, op: &Op) -> String {
        let r = |t: &TileRegion| self.region(t);
        let args: Vec<(&str, String)> = match op {
            Op::DmaCopy { dst, src } => vec![("dst", self.dma(dst)), ("src", self.dma(src))],
            Op::DmaTranspose {
                dst,
                src,
                dims,
                priority,
                dge_mode,
                oob_mode,
            } => {
                let axes = crate::isa::dma_transpose_axes(dims.len()).unwrap_or(&[]);
                let out: Vec<usize> = axes.iter().map(|&a| dims[a]).collect();
                let axes: Vec<String> = axes.iter().map(usize::to_string).collect();
                let dst = DmaOperand::Tile {
                    region: dst.clone(),
                };
                let mut v = vec![
                    ("dst", self.dma_dims(&dst, &out)),
                    ("src", self.dma_dims(src, dims)),
                    ("axes", format!("({})", axes.join(", "))),
                ];
                if let Some(p) = priority {
                    v.push(("priority", p.to_string()));
                }
                if *dge_mode != DgeMode::Unknown {
                    v.push(("dge_mode", format!("nisa.dge_mode.{}", dge_mode.nki_name())));
                }
                if *oob_mode != OobMode::Error {
                    v.push(("oob_mode", format!("nisa.oob_mode.{}", oob_mode.nki_name())));
                }
                v
            }
            Op::TensorTensor {
                dst,
                a,
                b,
                op,
                engine,
            } => {
                let mut v = vec![
                    ("dst", r(dst)),
                    ("data1", r(a)),
                    ("data2", r(b)),
                    ("op", op.nki_name().into()),
                ];
                if *engine != ElementwiseEngine::Vector {
                    v.push(("engine", format!("nisa.engine.{}", engine.nki_name())));
                }
                v
            }
            Op::TensorScalar {
                dst,
                data,
                op0,
                operand0,
                op1,
            } => {
                let mut v = vec![
                    ("dst", r(dst)),
                    ("data", r(data)),
                    ("op0", op0.nki_name().into()),
                    ("operand0", self.scalar(operand0)),
                ];
                if let Some((op1, operand1)) = op1 {
                    v.push(("op1", op1.nki_name().into()));
                    v.push(("operand1", self.scalar(operand1)));
                }
                v
            }
            Op::ScalarTensorTensor {
                dst,
                data,
                op0,
                operand0,
                op1,
                operand1,
                reduce,
            } => {
                let mut v = vec![
                    ("dst", r(dst)),
                    ("data", r(data)),
                    ("op0", op0.nki_name().into()),
                    ("operand0", self.scalar(operand0)),
                    ("op1", op1.nki_name().into()),
                    ("operand1", r(operand1)),
                ];
                // NKI's reduce_cmd defaults to reset_reduce here (2.33), what the IR means.
                if let Some((op, res)) = reduce {
                    v.push(("reduce_op", op.nki_name().into()));
                    v.push(("reduce_res", r(res)));
                }
                v
            }
            Op::Activation {
                dst,
                func,
                data,
                scale,
                bias,
                reduce,
            } => {
                let mut v = vec![
                    ("dst", r(dst)),
                    ("op", func.nki_name().into()),
                    ("data", r(data)),
                ];
                if let Some(b) = bias {
                    v.push(("bias", r(b)));
                }
                if *scale != (ScalarOperand::Imm { value: 1.0 }) {
                    v.push(("scale", self.scalar(scale)));
                }
                if let Some((op, res)) = reduce {
                    v.push(("reduce_op", op.nki_name().into()));
                    v.push(("reduce_res", r(res)));
                }
                v
            }
            Op::Activate2 {
                dst,
                func,
                data,
                stage0,
                reverse0,
                stage1,
                reverse1,
                relu_param,
                reduce,
            } => {
                // imm0 / imm1 are required keywords: 0.0 where the stage is nl.bypass.
                let stage = |s: &Option<(crate::ir::BinOp, ScalarOperand)>| match s {
                    Some((op, v)) => (op.nki_name().to_string(), self.scalar(v)),
                    None => ("nl.bypass".to_string(), "0.0".to_string()),
                };
                let ((op0, imm0), (op1, imm1)) = (stage(stage0), stage(stage1));
                let mut v = vec![
                    ("dst", r(dst)),
                    ("op", func.nki_name().into()),
                    ("data", r(data)),
                    ("imm0", imm0),
                    ("imm1", imm1),
                    ("op0", op0),
                    ("op1", op1),
                ];
                if *relu_param != (ScalarOperand::Imm { value: 0.0 }) {
                    v.push(("relu_param", self.scalar(relu_param)));
                }
                if *reverse0 {
                    v.push(("reverse0", "True".into()));
                }
                if *reverse1 {
                    v.push(("reverse1", "True".into()));
                }
                // reduce_cmd defaults to idle here: the reduction is reset_reduce, said.
                if let Some((op, res)) = reduce {
                    v.push(("reduce_op", op.nki_name().into()));
                    v.push(("reduce_res", r(res)));
                    v.push(("reduce_cmd", "nisa.reduce_cmd.reset_reduce".into()));
                }
                v
            }
            Op::TensorReduce {
                dst,
                op,
                data,
                negate,
            } => {
                let mut v = vec![
                    ("dst", r(dst)),
                    ("op", op.nki_name().into()),
                    ("data", r(data)),
                    // Every free dim of `data` as spelled (a walk's `.ap` has one per entry).
                    ("axis", free_axes(data)),
                ];
                if *negate {
                    v.push(("negate", "True".into()));
                }
                v.push(("keepdims", "True".into()));
                v
            }
            Op::TensorCopy { dst, src } => vec![("dst", r(dst)), ("src", r(src))],
            Op::Reciprocal { dst, data } => vec![("dst", r(dst)), ("data", r(data))],
            Op::AffineSelect {
                dst,
                step,
                channel_multiplier,
                on_true,
                on_false,
                cmp,
                offset,
            } => vec![
                ("dst", r(dst)),
                ("pattern", format!("[[{step}, {}]]", dst.nf)),
                ("channel_multiplier", channel_multiplier.to_string()),
                ("on_true_tile", r(on_true)),
                ("on_false_value", float(*on_false)),
                ("cmp_op", cmp.nki_name().into()),
                ("offset", offset.to_string()),
            ],
            Op::TensorCopyPredicated {
                dst,
                src,
                imm,
                predicate,
                reverse,
            } => {
                let src = src.as_ref().map_or_else(|| float(*imm), r);
                let mut v = vec![("dst", r(dst)), ("src", src), ("predicate", r(predicate))];
                if *reverse {
                    v.push(("reverse_pred", "True".into()));
                }
                v
            }
            Op::TensorTensorScan {
                dst,
                data0,
                data1,
                initial,
                op0,
                op1,
                reverse0,
                reverse1,
            } => {
                let mut v = vec![
                    ("dst", r(dst)),
                    ("data0", r(data0)),
                    ("data1", r(data1)),
                    ("initial", self.scalar(initial)),
                    ("op0", op0.nki_name().into()),
                    ("op1", op1.nki_name().into()),
                ];
                if *reverse0 {
                    v.push(("reverse0", "True".into()));
                }
                if *reverse1 {
                    v.push(("reverse1", "True".into()));
                }
                v
            }
            Op::NcStreamShuffle { dst, src, mask } => {
                let mask: Vec<String> = mask.iter().map(u8::to_string).collect();
                vec![
                    ("dst", r(dst)),
                    ("src", r(src)),
                    ("shuffle_mask", format!("[{}]", mask.join(", "))),
                ]
            }
            Op::LocalGather {
                dst,
                src,
                index,
                num_elem_per_idx,
                num_valid_indices,
            } => {
                let mut v = vec![
                    ("dst", r(dst)),
                    ("src_buffer", r(src)),
                    ("index", r(index)),
                    ("num_elem_per_idx", num_elem_per_idx.to_string()),
                ];
                if let Some(n) = num_valid_indices {
                    v.push(("num_valid_indices", n.to_string()));
                }
                v
            }
            Op::NcNGather { dst, data, indices } => {
                vec![("dst", r(dst)), ("data", r(data)), ("indices", r(indices))]
            }
            Op::TensorPartitionReduce { dst, op, data } => vec![
                ("dst", r(dst)),
                ("op", op.nki_name().into()),
                ("data", r(data)),
            ],
            Op::SelectReduce {
                dst,
                predicate,
                on_true,
                on_false,
                reduce_res,
                reverse_pred,
            } => {
                let mut v = vec![
                    ("dst", r(dst)),
                    ("predicate", r(predicate)),
                    ("on_true", r(on_true)),
                    ("on_false", self.scalar(on_false)),
                ];
                // reduce_cmd defaults to idle: a reduction is reset_reduce's.
                if let Some(res) = reduce_res {
                    v.push(("reduce_res", r(res)));
                    v.push(("reduce_cmd", "nisa.reduce_cmd.reset_reduce".into()));
                    v.push(("reduce_op", "nl.maximum".into()));
                }
                if *reverse_pred {
                    v.push(("reverse_pred", "True".into()));
                }
                v
            }
            Op::TensorScalarCumulative {
                dst,
                src,
                op0,
                op1,
                imm0,
                imm1,
            } => {
                let mut v = vec![
                    ("dst", r(dst)),
                    ("src", r(src)),
                    ("op0", op0.nki_name().into()),
                    ("op1", op1.nki_name().into()),
                    ("imm0", self.scalar(imm0)),
                ];
                // reduce_cmd defaults to reset_reduce here.
                if let Some(init) = imm1 {
                    v.push(("imm1", self.scalar(init)));
                    v.push(("reduce_cmd", "nisa.reduce_cmd.load_reduce".into()));
                }
                v
            }
            Op::SequenceBounds { dst, segment_ids } => {
                vec![("dst", r(dst)), ("segment_ids", r(segment_ids))]
            }
            Op::NonzeroWithCount {
                dst,
                src,
                index_offset,
                padding_val,
            } => vec![
                ("dst", r(dst)),
                ("src", r(src)),
                ("index_offset", index_offset.to_string()),
                ("padding_val", padding_val.to_string()),
            ],
            Op::Topk {
                val_dst,
                idx_dst,
                src,
                n,
            } => vec![
                ("val_dst", r(val_dst)),
                ("idx_dst", r(idx_dst)),
                ("src", r(src)),
                ("n", n.to_string()),
            ],
            Op::Max8 { dst, src } => vec![("dst", r(dst)), ("src", r(src))],
            Op::NcFindIndex8 { dst, data, vals } => {
                vec![("dst", r(dst)), ("data", r(data)), ("vals", r(vals))]
            }
            Op::NcMatchReplace8 {
                dst,
                data,
                vals,
                imm,
                dst_idx,
            } => {
                let mut v = vec![
                    ("dst", r(dst)),
                    ("data", r(data)),
                    ("vals", r(vals)),
                    ("imm", float(*imm)),
                ];
                if let Some(idx) = dst_idx {
                    v.push(("dst_idx", r(idx)));
                }
                v
            }
            Op::TensorScalarReduce {
                dst,
                data,
                op0,
                operand0,
                reduce_op,
                reduce_res,
                reduce_init,
                negate,
            } => {
                let mut v = vec![
                    ("dst", r(dst)),
                    ("data", r(data)),
                    ("op0", op0.nki_name().into()),
                    ("operand0", self.scalar(operand0)),
                    ("reduce_op", reduce_op.nki_name().into()),
                    ("reduce_res", r(reduce_res)),
                ];
                // reduce_cmd defaults to reset_reduce here.
                if let Some(init) = reduce_init {
                    v.push(("reduce_cmd", "nisa.reduce_cmd.load_reduce".into()));
                    v.push(("reduce_init", self.scalar(init)));
                }
                if *negate {
                    v.push(("reduce_res_negate", "True".into()));
                }
                v
            }
            Op::Exponential {
                dst,
                src,
                max_value,
                reduce_res,
                reduce_init,
            } => {
                let mut v = vec![("dst", r(dst)), ("src", r(src))];
                if *max_value != (ScalarOperand::Imm { value: 0.0 }) {
                    v.push(("max_value", self.scalar(max_value)));
                }
                if let Some(res) = reduce_res {
                    v.push(("reduce_res", r(res)));
                    // NKI's default reduce_cmd (idle) would not write it.
                    if *reduce_init == (ScalarOperand::Imm { value: 0.0 }) {
                        v.push(("reduce_cmd", "nisa.reduce_cmd.reset_reduce".into()));
                    } else {
                        v.push(("reduce_cmd", "nisa.reduce_cmd.load_reduce".into()));
                        v.push(("reduce_init", self.scalar(reduce_init)));
                    }
                }
                v
            }
            Op::BnStats { dst, data } | Op::BnAggr { dst, data } => {
                vec![("dst", r(dst)), ("data", r(data))]
            }
            Op::Memset { dst, value } => vec![("dst", r(dst)), ("value", float(*value))],
            // The engine always spelled out: rng's default (vector) and the state
            // instructions' (gpsimd) differ.
            Op::Rng { dst, engine } | Op::RandGetState { dst, engine } => vec![
                ("dst", r(dst)),
                ("engine", format!("nisa.engine.{}", engine.nki_name())),
            ],
            Op::RandSetState { src_seeds, engine } => vec![
                ("src_seeds", r(src_seeds)),
                ("engine", format!("nisa.engine.{}", engine.nki_name())),
            ],
            Op::SetRngSeed { src_seeds } => vec![("src_seeds", r(src_seeds))],
            Op::Rand2 { dst, min, max } => vec![
                ("dst", r(dst)),
                ("min", self.scalar(min)),
                ("max", self.scalar(max)),
            ],
            Op::Dropout { dst, data, prob } => vec![
                ("dst", r(dst)),
                ("data", r(data)),
                ("prob", self.scalar(prob)),
            ],
            Op::Iota {
                dst,
                offset,
                channel_multiplier,
                step,
            } => vec![
                ("dst", r(dst)),
                ("pattern", format!("[[{step}, {}]]", dst.nf)),
                ("offset", offset.to_string()),
                ("channel_multiplier", channel_multiplier.to_string()),
            ],
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
                let mut v = vec![
                    ("dst", r(dst)),
                    ("on_true_tile", r(on_true)),
                    ("comp_op0", comp0.nki_name().into()),
                    ("comp_op1", comp1.nki_name().into()),
                    ("bound0", r(bound0)),
                    ("bound1", r(bound1)),
                ];
                if let Some((op, res)) = reduce {
                    // Explicit: the default differs between NKI releases (idle in some, which
                    // would fold this row into whatever the accumulator held).
                    v.push(("reduce_cmd", "nisa.reduce_cmd.reset_reduce".into()));
                    v.push(("reduce_res", r(res)));
                    v.push(("reduce_op", op.nki_name().into()));
                }
                // Both explicit too: `on_false_value`'s default differs between releases.
                // NKI 0.7 declares `range_start` an int.
                let start = if range_start.fract() == 0.0 && range_start.abs() < 1e9 {
                    format!("{}", *range_start as i64)
                } else {
                    float(*range_start)
                };
                v.push(("range_start", start));
                v.push(("on_false_value", float(*on_false)));
                v
            }
            Op::NcTranspose { dst, data } => vec![("dst", r(dst)), ("data", r(data))],
            Op::QuantizeMx {
                dst,
                src,
                dst_scale,
            } => vec![
                ("dst", r(dst)),
                ("src", r(src)),
                ("dst_scale", r(dst_scale)),
            ],
            Op::NcMatmulMx {
                dst,
                stationary,
                moving,
                stationary_scale,
                moving_scale,
                tile_position,
                tile_size,
                accumulate,
            } => {
                let pair = |v: &[usize]| format!("({}, {})", v[0], v[1]);
                let mut v = vec![
                    ("dst", r(dst)),
                    ("stationary", r(stationary)),
                    ("moving", r(moving)),
                    ("stationary_scale", r(stationary_scale)),
                    ("moving_scale", r(moving_scale)),
                ];
                if tile_position.len() == 2 && tile_size.len() == 2 {
                    v.push(("tile_position", pair(tile_position)));
                    v.push(("tile_size", pair(tile_size)));
                }
                // Explicit either way, as nc_matmul's.
                let acc = if *accumulate { "True" } else { "False" };
                v.push(("accumulate", acc.into()));
                v
            }
            Op::RegisterAlloc { init, .. } => match init {
                Some(x) => vec![("x", x.to_string())],
                None => vec![],
            },
            Op::RegisterMove { dst, src } => {
                vec![("dst", format!("r{}", dst.0)), ("src", register_value(src))]
            }
            Op::RegisterLoad { dst, src } => {
                vec![("dst", format!("r{}", dst.0)), ("src", self.dma(src))]
            }
            Op::RegisterStore { dst, src } => {
                vec![("dst", self.dma(dst)), ("src", format!("r{}", src.0))]
            }
            Op::DmaCompute {
                dst,
                srcs,
                reduce_op,
                scales,
                unique_indices,
                oob_mode,
            } => {
                let srcs: Vec<String> = srcs.iter().map(|s| self.dma(s)).collect();
                let mut v = vec![
                    ("dst", self.dma(dst)),
                    ("srcs", format!("[{}]", srcs.join(", "))),
                    ("reduce_op", reduce_op.nki_name().into()),
                ];
                if scales.iter().any(|s| *s != 1.0) {
                    let s: Vec<String> = scales.iter().map(|s| float(*s)).collect();
                    v.push(("scales", format!("[{}]", s.join(", "))));
                }
                if !unique_indices {
                    v.push(("unique_indices", "False".into()));
                }
                if *oob_mode != OobMode::Error {
                    v.push(("oob_mode", format!("nisa.oob_mode.{}", oob_mode.nki_name())));
                }
                v
            }
            Op::NcMatmul {
                dst,
                stationary,
                moving,
                accumulate,
            } => {
                // Explicit either way: NKI's default (`None`) decides from whether the PSUM
                // location was written before, which is not what an overwrite in a loop means.
                let acc = if *accumulate { "True" } else { "False" };
                vec![
                    ("dst", r(dst)),
                    ("stationary", r(stationary)),
                    ("moving", r(moving)),
                    ("accumulate", acc.into()),
                ]
            }
        };
        let kwargs: Vec<String> = args.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("nisa.{}({})", op_name(op), kwargs.join(", "))
    }
}

/// The `nisa` function an instruction is emitted as.
fn op_name(op: &Op) -> &'static str {
    match op {
        Op::Activation {
            reduce: Some(_), ..
        } => "activation_reduce",
        other => other.name(),
    }
}

/// `axis=` naming every free dim of a region as the generated source spells it: `1` for a
/// rectangle, `(1, ..., k)` for a walk with `k` free entries.
fn free_axes(r: &TileRegion) -> String {
    match &r.pattern {
        Some(p) if p.free.len() > 1 => {
            let axes: Vec<String> = (1..=p.free.len()).map(|a| a.to_string()).collect();
            format!("({})", axes.join(", "))
        }
        _ => "1".into(),
    }
}
