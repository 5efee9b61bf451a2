//! The DMA instructions: `dma_copy` (data movement between HBM and on-chip tiles) and
//! `dma_transpose`.

use super::DmaArg;
use crate::ir::{DgeMode, DmaOperand, DynamicOffset, HbmKind, OobMode, Op, TileRegion};
use crate::lang::context::{Builder, with_builder};
use crate::lang::hbm::{Hbm, HbmView};
use crate::lang::tile::Tile;
use crate::loc::SourceLoc;

/// `nisa.dma_copy(dst, src)`: moves data between HBM and SBUF. Both sides have the same
/// `[rows, cols]` shape; where their dtypes differ the DMA engines convert, through fp32 (as
/// NKI documents: `src.dtype` → float32 → `dst.dtype`, rounding as a tile write does).
#[track_caller]
pub fn dma_copy(dst: impl Into<DmaArg>, src: impl Into<DmaArg>) {
    dma_copy_with(dst, src, DmaCopyArgs::default());
}

/// The keyword arguments of `nisa.dma_copy` beyond `dst` and `src` that change what it does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DmaCopyArgs {
    /// `oob_mode=`: with [`OobMode::Skip`], a row whose runtime offset (`scalar_offset=` /
    /// `vector_offset=`) falls outside its tensor is not transferred, instead of failing the
    /// simulation. A copy without a runtime offset has no such row.
    pub oob_mode: OobMode,
    /// Copies the bytes unchanged, read as `dst`'s dtype, instead of converting each value:
    /// the copy that keeps a dtype view (NKI's `.view(dtype)`, `.ap(dtype=...)`) in step with
    /// the memory it views ([`Op::DmaCopy`]'s `reinterpret`). Both sides are then tiles, or
    /// both HBM, with the same rows and the same bytes per row; the device runs nothing for
    /// it, and the cost model charges nothing.
    pub reinterpret: bool,
}

/// `nisa.dma_copy(dst, src, oob_mode=...)`: [`dma_copy`] with its keyword arguments.
#[track_caller]
pub fn dma_copy_with(dst: impl Into<DmaArg>, src: impl Into<DmaArg>, args: DmaCopyArgs) {
    let loc = SourceLoc::caller();
    let (dst, src) = (dst.into(), src.into());
    with_builder(|b| {
        let mut side = |a: DmaArg, role: &str| -> Option<(DmaOperand, [usize; 2])> {
            match a {
                DmaArg::Hbm(v) => match v.to_access() {
                    Ok(access) => {
                        let decl = &b.hbm[access.tensor.0 as usize];
                        if role == "dst" && decl.kind == HbmKind::Input {
                            let name = decl.name.clone();
                            b.fail(loc, format!("dma_copy: kernel input `{name}` is read-only; write to a shared_hbm output"));
                            return None;
                        }
                        if role == "dst" && decl.kind == HbmKind::Constant {
                            let name = decl.name.clone();
                            b.fail(loc, format!("dma_copy: `{name}` is a shared_constant, which is read-only; write to a shared_hbm output"));
                            return None;
                        }
                        if let Some(m) = access
                            .dynamic
                            .as_deref()
                            .and_then(|d| dynamic_problem(b, d, access.np))
                        {
                            b.fail(loc, format!("dma_copy {role}: {m}"));
                            return None;
                        }
                        let shape = [access.np, access.nf];
                        Some((DmaOperand::Hbm { access }, shape))
                    }
                    Err(m) => {
                        b.fail(loc, format!("dma_copy {role}: {m}"));
                        None
                    }
                },
                DmaArg::Tile(region) => {
                    if let Some(m) = b.region_problem(&region) {
                        b.fail(loc, format!("dma_copy {role}: {m}"));
                        return None;
                    }
                    let shape = region.shape();
                    Some((DmaOperand::Tile { region }, shape))
                }
            }
        };
        let (Some((d, ds)), Some((s, ss))) = (side(dst, "dst"), side(src, "src")) else {
            return;
        };
        let bytes = |o: &DmaOperand, [rows, cols]: [usize; 2]| {
            (rows, cols * b.operand_dtype(o).size_bytes())
        };
        let same_memory = matches!(
            (&d, &s),
            (DmaOperand::Tile { .. }, DmaOperand::Tile { .. })
                | (DmaOperand::Hbm { .. }, DmaOperand::Hbm { .. })
        );
        let problem = if args.reinterpret && !same_memory {
            Some(
                "dma_copy (reinterpreting): a view is the same memory, so both sides are tiles \
                 or both are HBM"
                    .to_string(),
            )
        } else if args.reinterpret {
            (bytes(&d, ds) != bytes(&s, ss)).then(|| {
                let (dt, st) = (b.operand_dtype(&d), b.operand_dtype(&s));
                format!(
                    "dma_copy (reinterpreting): dst {ds:?} {dt:?} and src {ss:?} {st:?} \
                     differ in rows or bytes per row"
                )
            })
        } else {
            (ds != ss).then(|| format!("dma_copy: dst has shape {ds:?} but src has shape {ss:?}"))
        };
        match problem {
            Some(message) => b.fail(loc, message),
            None => {
                b.push_op(
                    Op::DmaCopy {
                        dst: d,
                        src: s,
                        oob_mode: args.oob_mode,
                        reinterpret: args.reinterpret,
                    },
                    loc,
                );
            }
        }
    });
}

/// The permutation `dma_transpose` applies to a source of each rank it takes (2, 3 and 4):
/// dim `i` of the destination is dim `axes[i]` of the source.
pub fn dma_transpose_axes(rank: usize) -> Option<&'static [usize]> {
    match rank {
        2 => Some(&[1, 0]),
        3 => Some(&[2, 1, 0]),
        4 => Some(&[3, 1, 2, 0]),
        _ => None,
    }
}

/// The source of a [`dma_transpose`]: an HBM view (its shape is its dims) or a tile region
/// with its dims (a [`Tile`]'s as allocated; a bare region is 2-D).
#[derive(Clone, Debug)]
pub struct TransposeSrc {
    arg: DmaArg,
    dims: Option<Vec<usize>>,
}

impl TransposeSrc {
    /// A tile region seen with `dims` (the partitions first, the free run split row-major into
    /// the others).
    pub fn tile(region: TileRegion, dims: Vec<usize>) -> TransposeSrc {
        TransposeSrc {
            arg: DmaArg::Tile(region),
            dims: Some(dims),
        }
    }
}

/// An HBM view, seen with its shape.
impl From<HbmView> for TransposeSrc {
    fn from(v: HbmView) -> TransposeSrc {
        TransposeSrc {
            arg: DmaArg::Hbm(v),
            dims: None,
        }
    }
}

/// A whole HBM tensor, seen with its shape.
impl From<&Hbm> for TransposeSrc {
    fn from(h: &Hbm) -> TransposeSrc {
        h.view().into()
    }
}

/// A tile region, 2-D.
impl From<TileRegion> for TransposeSrc {
    fn from(r: TileRegion) -> TransposeSrc {
        TransposeSrc {
            arg: DmaArg::Tile(r),
            dims: None,
        }
    }
}

/// A tile region, 2-D.
impl From<&TileRegion> for TransposeSrc {
    fn from(r: &TileRegion) -> TransposeSrc {
        r.clone().into()
    }
}

/// A whole tile, seen with its dims as allocated.
impl From<&Tile> for TransposeSrc {
    fn from(t: &Tile) -> TransposeSrc {
        TransposeSrc::tile(t.region(), t.dims())
    }
}

/// A whole tile, seen with its dims as allocated.
impl From<Tile> for TransposeSrc {
    fn from(t: Tile) -> TransposeSrc {
        (&t).into()
    }
}

/// The keywords of [`dma_transpose`] besides its operands, NKI's defaults by [`Default`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DmaTransposeArgs {
    /// `axes=`: when given, the permutation of the source's rank ([`dma_transpose_axes`]).
    pub axes: Option<Vec<usize>>,
    /// `priority=`: the DMA queue priority 0..=3, lower first (NeuronCore-v4 and newer).
    pub priority: Option<u8>,
    /// `dge_mode=`.
    pub dge_mode: DgeMode,
    /// `oob_mode=`.
    pub oob_mode: OobMode,
}

/// `nisa.dma_transpose(dst, src, axes, priority, dge_mode, oob_mode)`: on the DMA engines,
/// `dst` (an SBUF tile region) takes `src` (HBM or SBUF, 2-D, 3-D or 4-D) transposed: a `[a, b]`
/// source becomes `[b, a]`, `[a, b, c]` becomes `[c, b, a]` and `[a, b, c, d]` becomes
/// `[d, b, c, a]`, the first dim of the result its partitions. `dst`'s shape must be that
/// (its free run the other dims, row-major). Checked here: the rank, `axes` (the rank's
/// permutation), `priority` (0..=3) and the shapes; the dtype, memory, `dge_mode` / `oob_mode`
/// and target rules by [`crate::validate`].
#[track_caller]
pub fn dma_transpose(
    dst: impl Into<TileRegion>,
    src: impl Into<TransposeSrc>,
    args: DmaTransposeArgs,
) {
    let loc = SourceLoc::caller();
    let (dst, src) = (dst.into(), src.into());
    let inst = "dma_transpose";
    with_builder(|b| {
        let fail = |b: &mut Builder, m: String| b.fail(loc, format!("{inst}: {m}"));
        let (operand, dims) = match src.arg {
            DmaArg::Hbm(v) => match v.to_access() {
                // The indirect transpose: `vector_offset` rows gathered, then transposed.
                Ok(access)
                    if access
                        .dynamic
                        .as_deref()
                        .is_some_and(|d| !matches!(d, DynamicOffset::Vector { .. })) =>
                {
                    return fail(
                        b,
                        "src: the indirect transpose gathers rows by vector_offset; a \
                         scalar_offset source is a dma_copy feature (transpose the copied tile)"
                            .into(),
                    );
                }
                Ok(access)
                    if let Some(m) = access
                        .dynamic
                        .as_deref()
                        .and_then(|d| dynamic_problem(b, d, access.np)) =>
                {
                    return fail(b, format!("src: {m}"));
                }
                Ok(access) if access.free_dims.is_some() => {
                    return fail(
                        b,
                        format!(
                            "src: the {:?} view's free dims do not merge into one stride",
                            v.shape()
                        ),
                    );
                }
                Ok(access) => (DmaOperand::Hbm { access }, v.shape()),
                Err(m) => return fail(b, format!("src: {m}")),
            },
            DmaArg::Tile(region) => {
                if let Some(m) = b.region_problem(&region) {
                    return fail(b, format!("src: {m}"));
                }
                let dims = src.dims.unwrap_or_else(|| region.shape().to_vec());
                let free: usize = dims.iter().skip(1).product();
                if dims.first() != Some(&region.np) || free != region.nf {
                    return fail(
                        b,
                        format!(
                            "src dims {dims:?} do not cover its region of {:?}",
                            region.shape()
                        ),
                    );
                }
                (DmaOperand::Tile { region }, dims)
            }
        };
        let Some(axes) = dma_transpose_axes(dims.len()) else {
            return fail(
                b,
                format!("src has shape {dims:?}; dma_transpose takes a 2-D, 3-D or 4-D source"),
            );
        };
        if let Some(given) = &args.axes
            && given[..] != axes[..]
        {
            return fail(
                b,
                format!(
                    "axes={given:?} for a {}-D src; the supported permutation is {axes:?}",
                    dims.len()
                ),
            );
        }
        if let Some(p) = args.priority
            && p > 3
        {
            return fail(b, format!("priority is {p}; DMA priorities are 0..=3"));
        }
        let want: Vec<usize> = axes.iter().map(|&a| dims[a]).collect();
        let want_shape = [want[0], want[1..].iter().product()];
        if dst.shape() != want_shape {
            return fail(
                b,
                format!(
                    "dst has shape {:?} but src {dims:?} transposed is {want:?} ({want_shape:?})",
                    dst.shape()
                ),
            );
        }
        b.push_op(
            Op::DmaTranspose {
                dst,
                src: operand,
                dims,
                priority: args.priority,
                dge_mode: args.dge_mode,
                oob_mode: args.oob_mode,
            },
            loc,
        );
    });
}

/// What is wrong with a runtime offset's index tile, if anything: it must be a region of this
/// trace's tiles, of an integer dtype, `(1, 1)` for `scalar_offset` and `(rows, 1)` for
/// `vector_offset`.
fn dynamic_problem(b: &Builder, d: &DynamicOffset, rows: usize) -> Option<String> {
    let Some(index) = d.index() else {
        // A register is an int32 of this trace (the recorder hands them out).
        return None;
    };
    if let Some(m) = b.region_problem(index) {
        return Some(format!("the offset index: {m}"));
    }
    let (kind, want) = match d {
        DynamicOffset::Scalar { .. } => ("scalar_offset", [1, 1]),
        DynamicOffset::Vector { .. } => ("vector_offset", [rows, 1]),
        DynamicOffset::Register { .. } => unreachable!("a register has no index tile"),
    };
    let dtype = b.tiles[index.tile.0 as usize].dtype;
    if dtype.is_float() {
        return Some(format!("{kind} must be an integer tile, got {dtype}"));
    }
    (index.shape() != want).then(|| {
        format!(
            "{kind} must be a {want:?} tile region (one index{}), got {:?}",
            if want[0] == 1 { "" } else { " per row" },
            index.shape()
        )
    })
}
