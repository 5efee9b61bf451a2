//! The rules of `dma_transpose`, `local_gather` and `nc_n_gather` their NKI 0.7 docstrings
//! state (`nki.isa.dma_transpose`, `nki.isa.local_gather`, `nki.isa.nc_n_gather`). Their
//! availability per target is `isa-target`'s (the `nki_spec` table), GpSimd's PSUM rule
//! `gpsimd-psum`'s and HBM bounds `hbm-bounds`' (in [`super`]).

use super::operands::check_hbm_bounds;
use super::violation;
use crate::dtype::DType;
use crate::error::NkiError;
use crate::ir::{Buffer, DgeMode, DmaOperand, Instruction, OobMode, Op, Program, TileRegion};
use crate::isa::LOCAL_GATHER_ELEMS_PER_INDEX;
use nki_spec::NcVersion;

/// Checks one instruction against the rules of this module.
pub(super) fn check(program: &Program, inst: &Instruction) -> Result<(), NkiError> {
    match &inst.op {
        Op::DmaTranspose {
            dst,
            src,
            dims,
            priority,
            dge_mode,
            oob_mode,
        } => check_dma_transpose(
            program,
            inst,
            (dst, src, dims),
            *priority,
            *dge_mode,
            *oob_mode,
        ),
        Op::LocalGather {
            dst,
            src,
            index,
            num_elem_per_idx,
            num_valid_indices,
        } => {
            let fail = |rule, limit: String, actual: String, message: String| {
                Err(violation(
                    rule,
                    limit,
                    actual,
                    "local_gather".into(),
                    message,
                    inst.loc,
                ))
            };
            same_dtype(program, inst, ("src_buffer", src), dst)?;
            index_dtype(program, inst, index, DType::U16)?;
            if !src.np.is_multiple_of(16) {
                return fail(
                    "local-gather-partitions",
                    "a multiple of 16".into(),
                    src.np.to_string(),
                    format!(
                        "local_gather: src_buffer and index have {} partitions; each GpSimd core \
                         gathers within 16, so it must be a multiple of 16",
                        src.np
                    ),
                );
            }
            if !LOCAL_GATHER_ELEMS_PER_INDEX.contains(num_elem_per_idx) {
                return fail(
                    "local-gather-elems-per-index",
                    format!("one of {LOCAL_GATHER_ELEMS_PER_INDEX:?}"),
                    num_elem_per_idx.to_string(),
                    format!(
                        "local_gather: num_elem_per_idx is {num_elem_per_idx}; it must be one of \
                         {LOCAL_GATHER_ELEMS_PER_INDEX:?}"
                    ),
                );
            }
            let per_core = 16 * index.nf;
            if let Some(valid) = num_valid_indices
                && *valid > per_core
            {
                return fail(
                    "local-gather-indices",
                    format!("{per_core} (16 partitions x {} of index)", index.nf),
                    valid.to_string(),
                    format!(
                        "local_gather: num_valid_indices is {valid} but each core's 16 \
                         partitions of index hold {per_core}"
                    ),
                );
            }
            let used = num_valid_indices.unwrap_or(per_core);
            if used > 4096 {
                return fail(
                    "local-gather-indices",
                    "4096 per core".into(),
                    used.to_string(),
                    format!(
                        "local_gather: each GpSimd core gathers at most 4096 indices; this one \
                         uses {used}"
                    ),
                );
            }
            Ok(())
        }
        Op::NcNGather { dst, data, indices } => {
            same_dtype(program, inst, ("data", data), dst)?;
            index_dtype(program, inst, indices, DType::U32)
        }
        _ => Ok(()),
    }
}

/// "The output dst tile must have the same data type as data" (`nc_n_gather`); "no data type
/// casting is allowed" (`local_gather`).
fn same_dtype(
    program: &Program,
    inst: &Instruction,
    (role, src): (&str, &TileRegion),
    dst: &TileRegion,
) -> Result<(), NkiError> {
    let tile = |r: &TileRegion| &program.tiles[r.tile.0 as usize];
    let (s, d) = (tile(src), tile(dst));
    if s.dtype == d.dtype {
        return Ok(());
    }
    let name = inst.op.name();
    Err(violation(
        "gather-dtype",
        s.dtype,
        d.dtype,
        name.into(),
        format!(
            "{name} writes {role}'s dtype unconverted; dst {} is {} but {role} {} is {}",
            d.name, d.dtype, s.name, s.dtype
        ),
        inst.loc,
    ))
}

/// `local_gather`'s indices "must be uint16"; `nc_n_gather`'s "must be uint32".
fn index_dtype(
    program: &Program,
    inst: &Instruction,
    index: &TileRegion,
    want: DType,
) -> Result<(), NkiError> {
    let t = &program.tiles[index.tile.0 as usize];
    if t.dtype == want {
        return Ok(());
    }
    let name = inst.op.name();
    let role = if name == "local_gather" {
        "index"
    } else {
        "indices"
    };
    Err(violation(
        "gather-index-dtype",
        want,
        t.dtype,
        name.into(),
        format!(
            "{name}: {role} {} is {}; its indices must be {}",
            t.name,
            t.dtype,
            want.nl_name()
        ),
        inst.loc,
    ))
}

/// The indirect transpose's constraints the docs list that a trace can break here: `dge_mode`
/// unknown or swdge, a 2-byte dtype, the last dim at most 128, rows a multiple of 16, Trn2 or
/// newer. (Its indices are a `vector_offset` tile, checked where the view is made.)
fn check_indirect_transpose(
    program: &Program,
    dims: &[usize],
    dtype: DType,
    dge_mode: DgeMode,
    fail: &dyn Fn(&'static str, String, String, String) -> Result<(), NkiError>,
) -> Result<(), NkiError> {
    if !matches!(dge_mode, DgeMode::Unknown | DgeMode::Swdge) {
        return fail(
            "dma-transpose-dge-mode",
            "unknown or swdge".into(),
            dge_mode.nki_name().into(),
            format!(
                "the indirect dma_transpose (a vector_offset source) takes dge_mode unknown or \
                 swdge, got {}",
                dge_mode.nki_name()
            ),
        );
    }
    let last = dims.last().copied().unwrap_or(0);
    let problem = if dtype.size_bytes() != 2 {
        Some(("2-byte dtype".to_string(), dtype.to_string()))
    } else if last > 128 {
        Some(("last dim of at most 128".into(), format!("last dim {last}")))
    } else if !dims[0].is_multiple_of(16) {
        Some((
            "row count that is a multiple of 16".into(),
            format!("{} rows", dims[0]),
        ))
    } else if program.target.nc_version() < NcVersion::Gen3 {
        Some((
            "Trn2 or newer target".into(),
            program.target.name().to_string(),
        ))
    } else {
        None
    };
    match problem {
        Some((limit, actual)) => fail(
            "dma-transpose-indirect",
            limit.clone(),
            actual.clone(),
            format!(
                "the indirect dma_transpose (a vector_offset source {dims:?}) needs a {limit}; \
                 got {actual}"
            ),
        ),
        None => Ok(()),
    }
}

fn check_dma_transpose(
    program: &Program,
    inst: &Instruction,
    (dst, src, dims): (&TileRegion, &DmaOperand, &[usize]),
    priority: Option<u8>,
    dge_mode: DgeMode,
    oob_mode: OobMode,
) -> Result<(), NkiError> {
    let name = "dma_transpose";
    let fail = |rule, limit: String, actual: String, message: String| {
        Err(violation(
            rule,
            limit,
            actual,
            name.into(),
            message,
            inst.loc,
        ))
    };
    let tile = |r: &TileRegion| &program.tiles[r.tile.0 as usize];
    // Memories: dst "must be a tile in SBUF", src "in HBM or SBUF" (DMA never reaches PSUM).
    let src_tile = match src {
        DmaOperand::Tile { region } => Some(region),
        DmaOperand::Hbm { .. } => None,
    };
    for (role, r) in [("dst", Some(dst)), ("src", src_tile)] {
        if let Some(r) = r
            && tile(r).buffer == Buffer::Psum
        {
            return fail(
                "dma-psum",
                "hbm <-> sbuf".into(),
                "psum".into(),
                format!(
                    "DMA cannot access PSUM ({role} {}); dma_transpose reads HBM or SBUF into SBUF",
                    tile(r).name
                ),
            );
        }
    }
    // The indirect transpose (a `vector_offset` source) is bounds-checked row by row when it
    // runs; a direct source here.
    let indirect = matches!(src, DmaOperand::Hbm { access } if access.dynamic.is_some());
    if let DmaOperand::Hbm { access } = src
        && !indirect
    {
        check_hbm_bounds(program, access, inst)?;
    }
    let src_dtype = match src {
        DmaOperand::Tile { region } => tile(region).dtype,
        DmaOperand::Hbm { access } => program.hbm[access.tensor.0 as usize].dtype,
    };
    let d = tile(dst);
    if src_dtype != d.dtype {
        return fail(
            "dma-transpose-dtype",
            src_dtype.to_string(),
            d.dtype.to_string(),
            format!(
                "dma_transpose does not convert: src is {src_dtype} but dst {} is {}",
                d.name, d.dtype
            ),
        );
    }
    if indirect {
        return check_indirect_transpose(program, dims, src_dtype, dge_mode, &fail);
    }
    // A direct source (no indirect indices): "the only valid dge_modes are unknown
    // and hwdge"; swdge is the indirect transpose. `none` (descriptors made statically, no DGE)
    // is accepted too: the docs do not list it, but AWS's kernel library passes it, and the
    // bytes moved are the same.
    if dge_mode == DgeMode::Swdge {
        return fail(
            "dma-transpose-dge-mode",
            "unknown, hwdge or none".into(),
            dge_mode.nki_name().into(),
            format!(
                "dma_transpose of a direct source takes dge_mode unknown or hwdge (or none), got {} \
                 (swdge is the indirect transpose, whose source has vector_offset indices)",
                dge_mode.nki_name()
            ),
        );
    }
    // "oob_mode.skip ... Only valid when src uses indirect indexing."
    if oob_mode == OobMode::Skip {
        return fail(
            "dma-transpose-oob-mode",
            "error".into(),
            "skip".into(),
            "dma_transpose: oob_mode=skip is only valid for an indirect source; this one is direct"
                .into(),
        );
    }
    if dge_mode == DgeMode::Hwdge {
        check_hwdge(dims, src_dtype, &fail)?;
    }
    // "priority ... (NeuronCore-v4+ only)".
    let version = program.target.nc_version();
    if let Some(p) = priority
        && version < NcVersion::Gen4
    {
        return fail(
            "dma-priority-target",
            "NeuronCore-v4 (trn3) or newer".into(),
            format!("{} ({})", program.target, version.neuron_core()),
            format!(
                "dma_transpose: priority={p} needs NeuronCore-v4 (Trn3) or newer; {} is {}",
                program.target,
                version.neuron_core()
            ),
        );
    }
    Ok(())
}

/// The hardware DGE transpose's limits: a 2-D source has 16 rows; a 3-D / 4-D source's first
/// dim is 1, 2, 4, 8 or 16 and its product with the next-to-last dim a multiple of 16; a 2-byte
/// dtype. (Its "src.shape[-1] <= 128" is `partition-dim`'s: that dim is the destination's
/// partitions.)
fn check_hwdge(
    dims: &[usize],
    dtype: DType,
    fail: &dyn Fn(&'static str, String, String, String) -> Result<(), NkiError>,
) -> Result<(), NkiError> {
    let first = dims[0];
    if dims.len() == 2 && first != 16 {
        return fail(
            "dma-transpose-hwdge",
            "src.shape[0] == 16".into(),
            first.to_string(),
            format!("dma_transpose with dge_mode=hwdge: a 2-D src must have 16 rows, got {dims:?}"),
        );
    }
    if dims.len() > 2 {
        let next_to_last = dims[dims.len() - 2];
        if ![1, 2, 4, 8, 16].contains(&first) || !(first * next_to_last).is_multiple_of(16) {
            return fail(
                "dma-transpose-hwdge",
                "src.shape[0] in {1, 2, 4, 8, 16}, src.shape[0] * src.shape[-2] % 16 == 0".into(),
                format!("{dims:?}"),
                format!(
                    "dma_transpose with dge_mode=hwdge: src {dims:?} needs shape[0] in \
                     {{1, 2, 4, 8, 16}} and shape[0] * shape[-2] a multiple of 16"
                ),
            );
        }
    }
    if dtype.size_bytes() != 2 {
        return fail(
            "dma-transpose-hwdge",
            "a 2-byte dtype".into(),
            dtype.to_string(),
            format!("dma_transpose with dge_mode=hwdge moves 2-byte elements; src is {dtype}"),
        );
    }
    Ok(())
}
