//! The documented dtype and size rules of `select_reduce`, `tensor_scalar_cumulative`,
//! `sequence_bounds`, `nonzero_with_count` and `topk` (NKI 0.7's `nki.isa` reference for each).
//! Their buffers are checked with the other instructions' (`gpsimd-psum`, `psum-both-inputs`).

use super::violation;
use crate::dtype::DType;
use crate::error::NkiError;
use crate::ir::{Instruction, Op, Program, ScalarOperand, TileRegion};
use crate::isa::{GPSIMD_CORE_PARTITIONS, TOPK_K_MAX, TOPK_N_MAX, TOPK_N_MIN};

/// `tensor_scalar_cumulative`'s input and output dtypes: "BF16, FP16, FP32, FP8, UINT8, UINT16,
/// INT8, INT16" (no int32 / uint32, an ISA limitation).
const CUMULATIVE_DTYPES: &[DType] = &[
    DType::BF16,
    DType::F16,
    DType::F32,
    DType::F8E4M3,
    DType::F8E4M3FN,
    DType::F8E5M2,
    DType::U8,
    DType::U16,
    DType::I8,
    DType::I16,
];

/// `select_reduce`'s predicate dtypes: "int8, uint8, int16, uint16".
const PREDICATE_DTYPES: &[DType] = &[DType::I8, DType::U8, DType::I16, DType::U16];

/// One operand whose dtype must be one of `allowed`: `(role, region, allowed, how the limit
/// reads)`.
type DtypeRule = (String, TileRegion, Vec<DType>, &'static str);

/// Checks one instruction of this module's five.
pub(super) fn check(program: &Program, inst: &Instruction) -> Result<(), NkiError> {
    let dtype = |r: &TileRegion| program.tiles[r.tile.0 as usize].dtype;
    let column = |s: &ScalarOperand| match s {
        ScalarOperand::Column { region } => Some(region.clone()),
        ScalarOperand::Imm { .. } => None,
    };
    let floats: Vec<DType> = DType::ALL
        .into_iter()
        .filter(|d| d.is_float() && !d.is_packed())
        .collect();
    let not_32bit_int: Vec<DType> = DType::ALL
        .into_iter()
        .filter(|d| ![DType::TF32, DType::I32, DType::U32].contains(d))
        .collect();
    let (rule, rules): (&'static str, Vec<DtypeRule>) = match &inst.op {
        Op::SelectReduce {
            dst: _,
            predicate,
            on_true,
            on_false,
            reduce_res,
            ..
        } => {
            let mut v = vec![
                (
                    "predicate".to_string(),
                    predicate.clone(),
                    PREDICATE_DTYPES.to_vec(),
                    "int8, uint8, int16 or uint16",
                ),
                (
                    "on_true".into(),
                    on_true.clone(),
                    not_32bit_int.clone(),
                    "any dtype but tfloat32, int32, uint32",
                ),
            ];
            if let Some(c) = column(on_false) {
                v.push(("on_false".into(), c, vec![DType::F32], "float32"));
            }
            if let Some(res) = reduce_res {
                v.push((
                    "reduce_res".into(),
                    res.clone(),
                    floats.clone(),
                    "a float dtype",
                ));
            }
            ("select-reduce-dtype", v)
        }
        Op::TensorScalarCumulative {
            dst,
            src,
            imm0,
            imm1,
            ..
        } => {
            let allowed = "bf16, fp16, fp32, fp8, uint8, uint16, int8 or int16";
            let mut v = vec![
                (
                    "src".to_string(),
                    src.clone(),
                    CUMULATIVE_DTYPES.to_vec(),
                    allowed,
                ),
                (
                    "dst".into(),
                    dst.clone(),
                    CUMULATIVE_DTYPES.to_vec(),
                    allowed,
                ),
            ];
            for (role, s) in [("imm0", Some(imm0)), ("imm1", imm1.as_ref())] {
                if let Some(c) = s.and_then(column) {
                    v.push((role.into(), c, vec![DType::F32], "float32"));
                }
            }
            ("cumulative-dtype", v)
        }
        Op::SequenceBounds { dst, segment_ids } => {
            let allowed = vec![DType::F32, DType::I32];
            (
                "sequence-bounds-dtype",
                vec![
                    (
                        "segment_ids".into(),
                        segment_ids.clone(),
                        allowed.clone(),
                        "float32 or int32",
                    ),
                    ("dst".into(), dst.clone(), allowed, "float32 or int32"),
                ],
            )
        }
        Op::NonzeroWithCount { dst, src, .. } => (
            "nonzero-dtype",
            vec![
                (
                    "src".into(),
                    src.clone(),
                    vec![DType::F32, DType::I32],
                    "float32 or int32",
                ),
                ("dst".into(), dst.clone(), vec![DType::I32], "int32"),
            ],
        ),
        Op::Topk {
            val_dst,
            idx_dst,
            src,
            ..
        } => (
            "topk-dtype",
            vec![
                ("src".into(), src.clone(), vec![DType::BF16], "bfloat16"),
                (
                    "val_dst".into(),
                    val_dst.clone(),
                    vec![DType::BF16],
                    "bfloat16",
                ),
                (
                    "idx_dst".into(),
                    idx_dst.clone(),
                    vec![DType::U32],
                    "uint32",
                ),
            ],
        ),
        _ => return Ok(()),
    };
    let name = inst.op.name();
    for (role, r, allowed, limit) in &rules {
        let dt = dtype(r);
        if !allowed.contains(&dt) {
            let t = &program.tiles[r.tile.0 as usize];
            return Err(violation(
                rule,
                limit,
                dt,
                name.into(),
                format!("{name}: {role} {} must be {limit}, got {dt}", t.name),
                inst.loc,
            ));
        }
    }
    check_sizes(inst)
}

/// The size rules: `sequence_bounds`'s one partition and `topk`'s limits.
fn check_sizes(inst: &Instruction) -> Result<(), NkiError> {
    let name = inst.op.name();
    let fail = |rule: &'static str, limit: String, actual: usize, message: String| {
        Err(violation(
            rule,
            limit,
            actual,
            name.into(),
            message,
            inst.loc,
        ))
    };
    match &inst.op {
        Op::SequenceBounds { segment_ids, .. } if segment_ids.np != 1 => fail(
            "sequence-bounds-partitions",
            "1 partition".into(),
            segment_ids.np,
            format!(
                "sequence_bounds: segment_ids must be one partition, (1, N), got {} partitions",
                segment_ids.np
            ),
        ),
        Op::Topk {
            val_dst, src, n, ..
        } => {
            let (n, k, g) = (*n, val_dst.nf, GPSIMD_CORE_PARTITIONS);
            let limits = [
                (
                    (TOPK_N_MIN..=TOPK_N_MAX).contains(&n),
                    format!("{TOPK_N_MIN} <= n < {}", TOPK_N_MAX + 1),
                    n,
                    format!("topk: n is {n}"),
                ),
                (
                    (1..=TOPK_K_MAX).contains(&k),
                    format!("1 <= K < {}", TOPK_K_MAX + 1),
                    k,
                    format!("topk: K (val_dst's free size) is {k}"),
                ),
                (
                    k <= n,
                    format!("K <= n = {n}"),
                    k,
                    format!("topk: K (val_dst's free size) is {k}, more than n = {n}"),
                ),
                (
                    src.nf >= n.div_ceil(g),
                    format!("src free size >= ceil(n / 16) = {}", n.div_ceil(g)),
                    src.nf,
                    format!(
                        "topk: src has {} elements per partition; a snake of n = {n} needs {}",
                        src.nf,
                        n.div_ceil(g)
                    ),
                ),
                (
                    src.np % g == 0,
                    "partitions a multiple of 16".into(),
                    src.np,
                    format!(
                        "topk: src has {} partitions; each snake is 16 partitions",
                        src.np
                    ),
                ),
            ];
            match limits.into_iter().find(|l| !l.0) {
                Some((_, limit, actual, message)) => {
                    let message = format!("{message}; the limit is {limit}");
                    fail("topk-limits", limit, actual, message)
                }
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}
