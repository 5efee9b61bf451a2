//! Validation of a traced program against a target's hardware constraints.
//!
//! Every violation names its rule, the limit, the actual value, the instruction and the kernel
//! source line. Unlike NKI's own simulator, capacity (SBUF bytes, PSUM banks) is checked.

mod core_race;
mod dependence;
mod footprint;
mod gather;
mod gpsimd;
mod liveness;
mod matmul_tiling;
mod mx;
mod operands;
mod operators;
mod register;

use crate::dtype::DType;
use crate::error::{NkiError, ValidationError, ValidationWarning};
use crate::ir::{
    BinOp, Buffer, DmaOperand, ElementwiseEngine, Instruction, MatmulPerfMode, Op, Program,
    TileDecl, TileRegion, TransposeEngine,
};
use crate::loc::SourceLoc;
use crate::target::{
    GEMM_MOVING_FMAX, GEMM_STATIONARY_FMAX, PMAX, PSUM_BANK_BYTES, PSUM_BANKS, Target,
};

pub(crate) use core_race::instances_independent;
use liveness::check_liveness;
use operands::{check_hbm_bounds, check_hbm_sizes, check_regions};
use operators::{check_activation_targets, check_operator_targets};

/// The names of every rule, for documentation and tests.
pub const RULES: &[&str] = &[
    "partition-dim",
    "matmul-contraction",
    "matmul-stationary-free",
    "matmul-moving-free",
    "matmul-operand-buffer",
    "matmul-dst-psum",
    "matmul-dst-dtype",
    matmul_tiling::RULE,
    "transpose-vector-size",
    "psum-capacity",
    "psum-bank",
    "psum-banks-live",
    "sbuf-capacity",
    "dma-psum",
    "gpsimd-psum",
    "psum-both-inputs",
    "isa-target",
    "operator-target",
    "activation-target",
    "prng-engine",
    "rand-state-sbuf",
    "range-select-dtype",
    "select-reduce-dtype",
    "cumulative-dtype",
    "sequence-bounds-dtype",
    "sequence-bounds-partitions",
    "nonzero-dtype",
    "topk-dtype",
    "topk-limits",
    "dma-transpose-dtype",
    "dma-transpose-dge-mode",
    "dma-transpose-oob-mode",
    "dma-transpose-indirect",
    "dma-transpose-hwdge",
    "dma-priority-target",
    "gather-dtype",
    "gather-index-dtype",
    "local-gather-partitions",
    "local-gather-elems-per-index",
    "local-gather-indices",
    "mx-packed-operand",
    "mx-packed-dma",
    "quantize-mx-dtype",
    "nc-matmul-mx-dtype",
    "mx-memory",
    "mx-partitions",
    "mx-scale-offset",
    "nc-matmul-mx-size",
    "nc-matmul-mx-tiling",
    "dma-compute-sources",
    "dma-compute-op",
    "dma-compute-scales",
    "hbm-bounds",
    "hbm-size",
    "tile-region",
    "tile-partition-broadcast",
    "tile-scope",
    "affine-range-dependence",
];

/// The largest tile the vector engine transposes, per side (nki.isa.nc_transpose).
const VECTOR_TRANSPOSE_MAX: usize = 32;

fn violation(
    rule: &'static str,
    limit: impl ToString,
    actual: impl ToString,
    instruction: String,
    message: String,
    loc: SourceLoc,
) -> NkiError {
    NkiError::Validation(Box::new(ValidationError {
        rule,
        limit: limit.to_string(),
        actual: actual.to_string(),
        instruction,
        message,
        loc,
    }))
}

fn describe_tile(t: &TileDecl) -> String {
    format!(
        "{} [{}, {}] {} in {}",
        t.name,
        t.partitions,
        t.free,
        t.dtype,
        t.buffer.name()
    )
}

/// Checks `program` against its target; returns the first violation found (the warnings of
/// [`validate_with_warnings`] are dropped).
pub fn validate(program: &Program) -> Result<(), NkiError> {
    validate_with_warnings(program).map(drop)
}

/// Checks `program` against its target: the first violation found is the error; otherwise what
/// a rule could not decide either way (an `affine_range` whose iterations reach a tensor at
/// runtime offsets, or more accesses than the analysis enumerates) comes back as warnings, in
/// program order. The program is accepted either way.
pub fn validate_with_warnings(program: &Program) -> Result<Vec<ValidationWarning>, NkiError> {
    check_hbm_sizes(program)?;
    check_tiles(program)?;
    // Every operand first: the instruction rules index tiles by them.
    each_instruction(program, check_regions)?;
    each_instruction(program, check_instruction)?;
    check_liveness(program)?;
    let mut warnings = dependence::check(program)?;
    warnings.extend(core_race::check(program)?);
    Ok(warnings)
}

/// `check` on every instruction in program order; the first violation.
fn each_instruction(
    program: &Program,
    check: fn(&Program, &Instruction) -> Result<(), NkiError>,
) -> Result<(), NkiError> {
    let mut first: Option<NkiError> = None;
    program.visit_instructions(&mut |inst, _| {
        if first.is_none() {
            first = check(program, inst).err();
        }
    });
    first.map_or(Ok(()), Err)
}

fn check_tiles(program: &Program) -> Result<(), NkiError> {
    for t in &program.tiles {
        if t.partitions > PMAX {
            return Err(violation(
                "partition-dim",
                PMAX,
                t.partitions,
                format!("alloc {}", describe_tile(t)),
                format!(
                    "tile {} has {} partitions; dim 0 of a tile is the partition dim",
                    t.name, t.partitions
                ),
                t.loc,
            ));
        }
        let psum_bytes = program.target.psum_bytes_per_partition();
        if t.buffer == Buffer::Psum && t.bytes_per_partition() > psum_bytes {
            return Err(violation(
                "psum-capacity",
                format!("{psum_bytes} B per partition"),
                format!("{} B", t.bytes_per_partition()),
                format!("alloc {}", describe_tile(t)),
                format!(
                    "PSUM tile {} does not fit a partition's {PSUM_BANKS} banks of 2 KiB",
                    t.name
                ),
                t.loc,
            ));
        }
    }
    Ok(())
}

fn check_instruction(program: &Program, inst: &Instruction) -> Result<(), NkiError> {
    let tile = |r: &TileRegion| &program.tiles[r.tile.0 as usize];
    let name = inst.op.name();
    if let Op::NcTranspose { dst, data, engine } = &inst.op {
        check_transpose(program, inst, dst, data, *engine)?;
    }
    match &inst.op {
        Op::NcMatmul { dst, .. }
        | Op::NcMatmulMx { dst, .. }
        | Op::NcTranspose {
            dst,
            engine: TransposeEngine::Tensor,
            ..
        } => check_one_psum_bank(program, inst, dst)?,
        _ => {}
    }
    if let Op::NcMatmul {
        dst,
        stationary,
        moving,
        is_transpose,
        perf_mode,
        ..
    } = &inst.op
    {
        let mode = (*is_transpose, *perf_mode);
        check_matmul(program, inst, dst, (stationary, moving), mode)?;
    }
    // GpSimd cannot reach PSUM: the operands of the instructions that run there.
    let on_gpsimd: Option<(Vec<(&str, &TileRegion)>, &str)> = match &inst.op {
        Op::TensorTensor {
            dst,
            a,
            b,
            engine: ElementwiseEngine::GpSimd,
            ..
        } => Some((
            vec![("dst", dst), ("data1", a), ("data2", b)],
            "tensor_tensor on GpSimd cannot access PSUM; run it on the vector engine or use SBUF tiles",
        )),
        // nki.isa.tensor_tensor: nl.power runs on GpSimd, so its tiles cannot be in PSUM.
        Op::TensorTensor {
            dst,
            a,
            b,
            op: BinOp::Power,
            ..
        } => Some((
            vec![("dst", dst), ("data1", a), ("data2", b)],
            "tensor_tensor with nl.power runs on GpSimd, which cannot access PSUM; use SBUF tiles",
        )),
        Op::TensorPartitionReduce { dst, data, .. } => Some((
            vec![("dst", dst), ("data", data)],
            "tensor_partition_reduce runs on GpSimd, which cannot access PSUM; use SBUF tiles",
        )),
        Op::Iota { dst, .. } => Some((
            vec![("dst", dst)],
            "iota runs on GpSimd, which cannot access PSUM; write to an SBUF tile",
        )),
        Op::AffineSelect { dst, on_true, .. } => Some((
            vec![("dst", dst), ("on_true_tile", on_true)],
            "affine_select runs on GpSimd, which cannot access PSUM; use SBUF tiles",
        )),
        Op::SequenceBounds { dst, segment_ids } => Some((
            vec![("dst", dst), ("segment_ids", segment_ids)],
            "sequence_bounds runs on GpSimd, which cannot access PSUM; use SBUF tiles",
        )),
        Op::NonzeroWithCount { dst, src, .. } => Some((
            vec![("dst", dst), ("src", src)],
            "nonzero_with_count runs on GpSimd, which cannot access PSUM; use SBUF tiles",
        )),
        Op::Topk {
            val_dst,
            idx_dst,
            src,
            ..
        } => Some((
            vec![("val_dst", val_dst), ("idx_dst", idx_dst), ("src", src)],
            "topk runs on GpSimd, which cannot access PSUM; use SBUF tiles",
        )),
        // nki.isa.rng / rand_get_state: "dst must be in SBUF when using GpSimd Engine".
        Op::Rng {
            dst,
            engine: ElementwiseEngine::GpSimd,
        }
        | Op::RandGetState {
            dst,
            engine: ElementwiseEngine::GpSimd,
        } => Some((
            vec![("dst", dst)],
            "GpSimd cannot access PSUM; write to an SBUF tile or use engine=nisa.engine.vector",
        )),
        Op::LocalGather {
            dst, src, index, ..
        } => Some((
            vec![("dst", dst), ("src_buffer", src), ("index", index)],
            "local_gather runs on GpSimd, which cannot access PSUM; use SBUF tiles",
        )),
        Op::NcNGather { dst, data, indices } => Some((
            vec![("dst", dst), ("data", data), ("indices", indices)],
            "nc_n_gather runs on GpSimd, which cannot access PSUM; use SBUF tiles",
        )),
        _ => None,
    };
    if let Some((operands, why)) = on_gpsimd
        && let Some((role, r)) = operands
            .into_iter()
            .find(|(_, r)| tile(r).buffer == Buffer::Psum)
    {
        return Err(violation(
            "gpsimd-psum",
            "sbuf",
            "psum",
            name.into(),
            format!("{why} ({role} {})", tile(r).name),
            inst.loc,
        ));
    }
    // Instructions that read at most one of two full-size inputs from PSUM:
    // nki.isa.scalar_tensor_tensor ("data and operand1 cannot both reside in PSUM") and
    // nki.isa.tensor_copy_predicated ("Either src or predicate may be in PSUM, but not both").
    let psum_pair = match &inst.op {
        Op::ScalarTensorTensor { data, operand1, .. } => {
            Some((("data", data), ("operand1", operand1)))
        }
        // nki.isa.tensor_tensor_scan: "data0 and data1 cannot both reside in PSUM".
        Op::TensorTensorScan { data0, data1, .. } => Some((("data0", data0), ("data1", data1))),
        // nki.isa.select_reduce: "Either on_true or predicate may be in PSUM, but not both".
        Op::SelectReduce {
            on_true, predicate, ..
        } => Some((("on_true", on_true), ("predicate", predicate))),
        Op::TensorCopyPredicated {
            src: Some(src),
            predicate,
            ..
        } => Some((("src", src), ("predicate", predicate))),
        _ => None,
    };
    if let Some(((a_role, a), (b_role, b))) = psum_pair
        && tile(a).buffer == Buffer::Psum
        && tile(b).buffer == Buffer::Psum
    {
        return Err(violation(
            "psum-both-inputs",
            format!("at most one of {a_role}, {b_role} in psum"),
            "both in psum",
            name.into(),
            format!(
                "{name}: {a_role} {} and {b_role} {} are both in PSUM; at most one of them may be \
                 (tensor_copy one of them to SBUF first)",
                tile(a).name,
                tile(b).name
            ),
            inst.loc,
        ));
    }
    // nc_stream_shuffle: the start partitions follow the number of active partitions,
    // ceil(max(src, dst partitions) / 32) · 32: 0 for 96 or 128, 0 or 64 for 64, a multiple of
    // 32 for 32.
    if let Op::NcStreamShuffle { dst, src, .. } = &inst.op {
        let active = dst.np.max(src.np).div_ceil(32) * 32;
        let step = if active <= 32 {
            32
        } else if active == 64 {
            64
        } else {
            128
        };
        if let Some((role, r)) = [("dst", dst), ("src", src)]
            .into_iter()
            .find(|(_, r)| r.p0 % step != 0)
        {
            return Err(violation(
                "stream-shuffle-start",
                format!("start partition a multiple of {step}"),
                r.p0,
                name.into(),
                format!(
                    "nc_stream_shuffle: {role} {} starts at partition {}; with {active} active \
                     partitions the start partitions must be multiples of {step}",
                    tile(r).name,
                    r.p0
                ),
                inst.loc,
            ));
        }
    }
    check_target(program, inst)?;
    // Packed MX data first: no other rule reads a packed element as a number.
    mx::check(program, inst)?;
    check_operator_targets(program, inst)?;
    check_activation_targets(program, inst)?;
    gpsimd::check(program, inst)?;
    check_prng(program, inst)?;
    gather::check(program, inst)?;
    register::check(program, inst)?;
    matmul_tiling::check(program, inst)?;
    if let Op::RangeSelect {
        on_true,
        bound0,
        bound1,
        ..
    } = &inst.op
    {
        check_range_select(program, inst, on_true, bound0, bound1)?;
    }
    if let Op::DmaCopy { dst, src, .. } = &inst.op {
        for (role, side) in [("dst", dst), ("src", src)] {
            match side {
                DmaOperand::Tile { region } if tile(region).buffer == Buffer::Psum => {
                    return Err(violation(
                        "dma-psum",
                        "hbm <-> sbuf",
                        "psum",
                        name.into(),
                        format!(
                            "DMA cannot access PSUM ({role} {}); tensor_copy to SBUF first",
                            tile(region).name
                        ),
                        inst.loc,
                    ));
                }
                // A runtime offset is bounds-checked row by row when the DMA runs.
                DmaOperand::Hbm { access } if access.dynamic.is_some() => {}
                DmaOperand::Hbm { access } => check_hbm_bounds(program, access, inst)?,
                DmaOperand::Tile { .. } => {}
            }
        }
    }
    Ok(())
}

/// The instruction exists on the program's target, as its `nki_spec` declaration says.
fn check_target(program: &Program, inst: &Instruction) -> Result<(), NkiError> {
    let name = inst.op.name();
    let Some(spec) = nki_spec::instruction(name) else {
        return Err(NkiError::Internal(format!(
            "instruction {name} has no nki_spec declaration"
        )));
    };
    let version = program.target.nc_version();
    if spec.targets.includes(version) {
        return Ok(());
    }
    let since = spec.targets.since;
    let oldest = Target::ALL
        .into_iter()
        .find(|t| t.nc_version() == since)
        .unwrap_or(Target::Trn3);
    Err(violation(
        "isa-target",
        format!("{} ({oldest}) or newer", since.neuron_core()),
        format!("{} ({})", program.target, version.neuron_core()),
        name.into(),
        format!(
            "{name} needs {} ({}) or newer; {} is {}",
            since.neuron_core(),
            since.trainium_title(),
            program.target,
            version.neuron_core()
        ),
        inst.loc,
    ))
}

/// The random-number instructions' engines per target and the memory of `rand_set_state`'s
/// state (NKI 0.7's `nki.isa.rng`: GpSimd on NeuronCore-v3+; `rand_set_state` /
/// `rand_get_state`: the vector engine on NeuronCore-v4+; `rand_set_state`: "src_seeds must be
/// in SBUF").
fn check_prng(program: &Program, inst: &Instruction) -> Result<(), NkiError> {
    let name = inst.op.name();
    let (engine, since) = match &inst.op {
        Op::Rng { engine, .. } => (*engine, nki_spec::NcVersion::Gen3),
        Op::RandSetState { engine, .. } | Op::RandGetState { engine, .. } => {
            (*engine, nki_spec::NcVersion::Gen4)
        }
        _ => return Ok(()),
    };
    let version = program.target.nc_version();
    let restricted = match &inst.op {
        Op::Rng { .. } => ElementwiseEngine::GpSimd,
        _ => ElementwiseEngine::Vector,
    };
    if engine == restricted && version < since {
        let oldest = Target::ALL
            .into_iter()
            .find(|t| t.nc_version() == since)
            .unwrap_or(Target::Trn3);
        return Err(violation(
            "prng-engine",
            format!("{} ({oldest}) or newer", since.neuron_core()),
            format!("{} ({})", program.target, version.neuron_core()),
            name.into(),
            format!(
                "{name} on engine={} needs {} ({}) or newer; {} is {}",
                engine.nki_name(),
                since.neuron_core(),
                since.trainium_title(),
                program.target,
                version.neuron_core()
            ),
            inst.loc,
        ));
    }
    if let Op::RandSetState { src_seeds, .. } = &inst.op {
        let t = &program.tiles[src_seeds.tile.0 as usize];
        if t.buffer != Buffer::Sbuf {
            return Err(violation(
                "rand-state-sbuf",
                "sbuf",
                t.buffer.name(),
                name.into(),
                format!(
                    "rand_set_state reads its state from SBUF; src_seeds {} is in {}",
                    t.name,
                    t.buffer.name()
                ),
                inst.loc,
            ));
        }
    }
    Ok(())
}

/// `range_select` compares against fp32 bounds and selects from a floating-point tile.
fn check_range_select(
    program: &Program,
    inst: &Instruction,
    on_true: &TileRegion,
    bound0: &TileRegion,
    bound1: &TileRegion,
) -> Result<(), NkiError> {
    let tile = |r: &TileRegion| &program.tiles[r.tile.0 as usize];
    let name = inst.op.name();
    for (role, r) in [("bound0", bound0), ("bound1", bound1)] {
        let t = tile(r);
        if t.dtype != DType::F32 {
            return Err(violation(
                "range-select-dtype",
                "f32",
                t.dtype,
                name.into(),
                format!(
                    "range_select compares against fp32 bounds; {role} {} is {}",
                    t.name, t.dtype
                ),
                inst.loc,
            ));
        }
    }
    let t = tile(on_true);
    if !t.dtype.is_float() {
        return Err(violation(
            "range-select-dtype",
            "a float dtype",
            t.dtype,
            name.into(),
            format!(
                "range_select selects from a floating-point on_true_tile; {} is {}",
                t.name, t.dtype
            ),
            inst.loc,
        ));
    }
    Ok(())
}

/// Size limits of a tensor-engine instruction: `(rule, limit, actual, what)`.
fn check_sizes(
    inst: &Instruction,
    sizes: &[(&'static str, usize, usize, &str)],
) -> Result<(), NkiError> {
    let name = inst.op.name();
    for &(rule, limit, actual, what) in sizes {
        if actual > limit {
            return Err(violation(
                rule,
                limit,
                actual,
                name.into(),
                format!("{name} {what} is {actual}"),
                inst.loc,
            ));
        }
    }
    Ok(())
}

/// The tensor engine reads SBUF and writes PSUM: `reads` are `(how the message names the
/// operand, region)`.
fn check_tensor_engine_buffers(
    program: &Program,
    inst: &Instruction,
    reads: &[(&str, &TileRegion)],
    dst: &TileRegion,
) -> Result<(), NkiError> {
    let tile = |r: &TileRegion| &program.tiles[r.tile.0 as usize];
    let name = inst.op.name();
    for &(operand, r) in reads {
        let t = tile(r);
        if t.buffer != Buffer::Sbuf {
            return Err(violation(
                "matmul-operand-buffer",
                "sbuf",
                t.buffer.name(),
                name.into(),
                format!(
                    "{name} reads {operand}from SBUF; {} is in {}",
                    t.name,
                    t.buffer.name()
                ),
                inst.loc,
            ));
        }
    }
    let d = tile(dst);
    if d.buffer != Buffer::Psum {
        return Err(violation(
            "matmul-dst-psum",
            "psum",
            d.buffer.name(),
            name.into(),
            format!(
                "{name} writes to PSUM; {} is in {}",
                d.name,
                d.buffer.name()
            ),
            inst.loc,
        ));
    }
    Ok(())
}

/// A tensor-engine instruction writes one PSUM bank per partition (Trainium/Inferentia2
/// architecture guide: "The output tile of a TensorE matrix multiplication instruction must fit
/// into one PSUM bank per partition"). A PSUM tile may span several banks (nki-library's kernels
/// allocate such tiles, and the vector and scalar engines access PSUM "like a regular SRAM");
/// a tile the compiler places starts on a bank boundary, a placed one at its address.
fn check_one_psum_bank(
    program: &Program,
    inst: &Instruction,
    dst: &TileRegion,
) -> Result<(), NkiError> {
    let t = &program.tiles[dst.tile.0 as usize];
    let (f0, f1) = dst.free_span();
    if t.buffer != Buffer::Psum || f1 <= f0 {
        return Ok(());
    }
    let size = t.dtype.size_bytes();
    let base = t.address.map_or(0, |(_, free)| free);
    let (first, last) = (base + f0 * size, base + f1 * size - 1);
    if first / PSUM_BANK_BYTES == last / PSUM_BANK_BYTES {
        return Ok(());
    }
    Err(violation(
        "psum-bank",
        format!("{PSUM_BANK_BYTES} B bank per partition"),
        format!("bytes {first}..={last}"),
        inst.op.name().into(),
        format!(
            "{} writes {}[:, {f0}:{f1}], which crosses a 2 KiB PSUM bank boundary (512 fp32 per \
             partition per bank)",
            inst.op.name(),
            t.name
        ),
        inst.loc,
    ))
}

/// `nc_matmul`: K, M and N within the tensor engine's tile sizes, operands in SBUF, the
/// accumulator in PSUM, in fp32 (or bf16 where the target allows it, or the stationary's 16-bit
/// dtype in transpose mode).
fn check_matmul(
    program: &Program,
    inst: &Instruction,
    dst: &TileRegion,
    (stationary, moving): (&TileRegion, &TileRegion),
    (is_transpose, perf_mode): (bool, MatmulPerfMode),
) -> Result<(), NkiError> {
    // The contraction's partitions (in double-row mode each holds two of its values).
    let (k, (_, m, n)) = (stationary.np, perf_mode.dims(stationary, moving));
    check_sizes(
        inst,
        &[
            (
                "matmul-contraction",
                PMAX,
                k,
                "contraction (partition) size K",
            ),
            (
                "matmul-stationary-free",
                GEMM_STATIONARY_FMAX,
                m,
                "stationary free size M",
            ),
            (
                "matmul-moving-free",
                GEMM_MOVING_FMAX,
                n,
                "moving free size N",
            ),
        ],
    )?;
    check_tensor_engine_buffers(
        program,
        inst,
        &[
            ("its stationary operand ", stationary),
            ("its moving operand ", moving),
        ],
        dst,
    )?;
    if perf_mode == MatmulPerfMode::DoubleRow {
        check_double_row_dtypes(program, inst, (stationary, moving))?;
    }
    let d = &program.tiles[dst.tile.0 as usize];
    // Transpose mode (recorded only on NeuronCore-v3 and newer) writes "FP16/BF16 PSUM output
    // for FP16/BF16 transpose" (Trainium2 architecture guide, "Built-in Transpose Support").
    let source = program.tiles[stationary.tile.0 as usize].dtype;
    let passes_through =
        is_transpose && matches!(source, DType::BF16 | DType::F16) && d.dtype == source;
    let dtype_ok = d.dtype == DType::F32
        || (d.dtype == DType::BF16 && program.target.matmul_bf16_output())
        || passes_through;
    if !dtype_ok {
        let allowed = match (program.target.matmul_bf16_output(), is_transpose) {
            (true, _) => "f32 or bf16",
            (false, true) => "f32, or the source's 16-bit dtype in transpose mode",
            (false, false) => "f32",
        };
        return Err(violation(
            "matmul-dst-dtype",
            allowed,
            d.dtype,
            inst.op.name().into(),
            format!(
                "nc_matmul accumulates in fp32 PSUM on {}; {} is {}",
                program.target, d.name, d.dtype
            ),
            inst.loc,
        ));
    }
    Ok(())
}

/// `double_row` takes fp8 operands: `float8_e4m3` or `float8_e5m2`, from NeuronCore-v4 also
/// `float8_e4m3fn`, the two may differ but not be `float8_e4m3` and `float8_e4m3fn` together
/// (the `nki.isa.nc_matmul` docs, "Data types").
fn check_double_row_dtypes(
    program: &Program,
    inst: &Instruction,
    (stationary, moving): (&TileRegion, &TileRegion),
) -> Result<(), NkiError> {
    let gen4 = program.target.nc_version() >= nki_spec::NcVersion::Gen4;
    let dtypes = [stationary, moving].map(|r| program.tiles[r.tile.0 as usize].dtype);
    let allowed =
        |d: DType| matches!(d, DType::F8E4M3 | DType::F8E5M2) || (gen4 && d == DType::F8E4M3FN);
    let mixed = dtypes.contains(&DType::F8E4M3) && dtypes.contains(&DType::F8E4M3FN);
    if dtypes.iter().all(|&d| allowed(d)) && !mixed {
        return Ok(());
    }
    let limit = if gen4 {
        "float8_e4m3, float8_e5m2 or float8_e4m3fn (not float8_e4m3 with float8_e4m3fn)"
    } else {
        "float8_e4m3 or float8_e5m2"
    };
    let [s, m] = dtypes.map(DType::nl_name);
    Err(violation(
        "matmul-double-row-dtype",
        limit,
        format!("stationary {s}, moving {m}"),
        inst.op.name().into(),
        format!(
            "nc_matmul with perf_mode=double_row takes {limit} operands on {}; got stationary \
             {s} and moving {m}",
            program.target
        ),
        inst.loc,
    ))
}

/// `nc_transpose` runs on the tensor engine: the same operand and destination rules as
/// `nc_matmul`, with the source as the stationary operand.
fn check_transpose(
    program: &Program,
    inst: &Instruction,
    dst: &TileRegion,
    data: &TileRegion,
    engine: TransposeEngine,
) -> Result<(), NkiError> {
    let [p, f] = data.shape();
    if engine == TransposeEngine::Vector {
        // The vector engine transposes up to 32 × 32, SBUF or PSUM on either side
        // (nki.isa.nc_transpose, "Tile size" and "Memory types").
        check_sizes(
            inst,
            &[
                (
                    "transpose-vector-size",
                    VECTOR_TRANSPOSE_MAX,
                    p,
                    "source partitions on the vector engine",
                ),
                (
                    "transpose-vector-size",
                    VECTOR_TRANSPOSE_MAX,
                    f,
                    "source free size on the vector engine",
                ),
            ],
        )?;
    } else {
        check_sizes(
            inst,
            &[
                ("matmul-contraction", PMAX, p, "source partitions"),
                (
                    "matmul-stationary-free",
                    GEMM_STATIONARY_FMAX,
                    f,
                    "source free size",
                ),
            ],
        )?;
        check_tensor_engine_buffers(program, inst, &[("", data)], dst)?;
    }
    let name = inst.op.name();
    let (s, d) = (
        &program.tiles[data.tile.0 as usize],
        &program.tiles[dst.tile.0 as usize],
    );
    // Unlike nc_matmul, a transpose passes its data through: the destination has the source's
    // dtype (nki.isa.nc_transpose: "The output dst tile must have the same data type as that
    // of data").
    if d.dtype != s.dtype {
        return Err(violation(
            "transpose-dst-dtype",
            s.dtype,
            d.dtype,
            name.into(),
            format!(
                "nc_transpose writes its source's dtype; {} is {} but {} is {}",
                d.name, d.dtype, s.name, s.dtype
            ),
            inst.loc,
        ));
    }
    Ok(())
}
