//! The engine sequencers' register instructions (`register_alloc`, `register_move`,
//! `register_load`, `register_store`) and the DMA engines' `dma_compute`.
//!
//! A register is a runtime int32 ([`Register`]); it reaches memory only through a one-element
//! region of an integer tensor (HBM or SBUF), and decides the iterations of a device loop
//! ([`crate::lang::loops::dynamic_range`], [`crate::lang::loops::while_loop`]).

use super::DmaArg;
use crate::dtype::DType;
use crate::ir::{BinOp, DmaOperand, HbmKind, OobMode, Op, RegisterValue};
use crate::lang::context::{Builder, with_builder};
use crate::lang::register::Register;
use crate::loc::SourceLoc;

/// Most sources one `dma_compute` reduces.
pub const DMA_COMPUTE_MAX_SOURCES: usize = 16;

/// One side of a register or `dma_compute` transfer, checked: the operand, its element count
/// and its dtype; `None` after recording the error.
fn side(
    b: &mut Builder,
    loc: SourceLoc,
    inst: &str,
    role: &str,
    arg: DmaArg,
    write: bool,
) -> Option<(DmaOperand, usize, DType)> {
    match arg {
        DmaArg::Hbm(v) => match v.to_access() {
            Ok(access) => {
                let decl = &b.hbm[access.tensor.0 as usize];
                if write && decl.kind == HbmKind::Input {
                    let name = decl.name.clone();
                    b.fail(
                        loc,
                        format!(
                            "{inst}: kernel input `{name}` is read-only; write to a shared_hbm \
                             output"
                        ),
                    );
                    return None;
                }
                let (n, dtype) = (access.np * access.nf, decl.dtype);
                Some((DmaOperand::Hbm { access }, n, dtype))
            }
            Err(m) => {
                b.fail(loc, format!("{inst} {role}: {m}"));
                None
            }
        },
        DmaArg::Tile(region) => {
            if let Some(m) = b.region_problem(&region) {
                b.fail(loc, format!("{inst} {role}: {m}"));
                return None;
            }
            let (n, dtype) = (region.np * region.nf, b.tiles[region.tile.0 as usize].dtype);
            Some((DmaOperand::Tile { region }, n, dtype))
        }
    }
}

/// Whether `reg` belongs to this trace; records the error otherwise.
fn own(b: &mut Builder, loc: SourceLoc, inst: &str, reg: RegisterValue) -> bool {
    match reg.register() {
        Some(r) if !b.has_register(r) => {
            b.fail(
                loc,
                format!(
                    "{inst}: register #{} does not belong to this kernel's trace (a register \
                     kept from another one?)",
                    r.0
                ),
            );
            false
        }
        _ => true,
    }
}

/// The one-element integer operand of `register_load` / `register_store`.
fn scalar_side(
    b: &mut Builder,
    loc: SourceLoc,
    inst: &str,
    role: &str,
    arg: DmaArg,
    write: bool,
) -> Option<DmaOperand> {
    let (operand, n, dtype) = side(b, loc, inst, role, arg, write)?;
    if n != 1 {
        b.fail(
            loc,
            format!("{inst}: {role} must be one element (shape [1] or [1, 1]), got {n} elements"),
        );
        return None;
    }
    if dtype.is_float() || dtype.size_bytes() > 4 {
        b.fail(
            loc,
            format!(
                "{inst}: {role} is {dtype}; a register holds an integer of up to 32 bits \
                 (use an integer dtype such as int32)"
            ),
        );
        return None;
    }
    Some(operand)
}

/// `nisa.register_alloc(init)`: a new register, holding `init` (or nothing until a
/// [`register_move`] or [`register_load`] writes it).
#[track_caller]
pub fn register_alloc(init: Option<i32>) -> Register {
    let loc = SourceLoc::caller();
    with_builder(|b| {
        let dst = b.add_register("", loc);
        b.push_op(Op::RegisterAlloc { dst, init }, loc);
        Register(dst)
    })
}

/// `nisa.register_move(dst, src)`: `dst` = an immediate or another register's value.
#[track_caller]
pub fn register_move(dst: &Register, src: impl Into<RegisterValue>) {
    let loc = SourceLoc::caller();
    let src = src.into();
    with_builder(|b| {
        if own(b, loc, "register_move", dst.into()) && own(b, loc, "register_move", src) {
            b.push_op(Op::RegisterMove { dst: dst.0, src }, loc);
        }
    });
}

/// `nisa.register_load(dst, src)`: `dst` = the one element of `src`, an integer tensor (up to
/// 32 bits) in HBM or SBUF.
#[track_caller]
pub fn register_load(dst: &Register, src: impl Into<DmaArg>) {
    let loc = SourceLoc::caller();
    let src = src.into();
    with_builder(|b| {
        if !own(b, loc, "register_load", dst.into()) {
            return;
        }
        if let Some(src) = scalar_side(b, loc, "register_load", "src", src, false) {
            b.push_op(Op::RegisterLoad { dst: dst.0, src }, loc);
        }
    });
}

/// `nisa.register_store(dst, src)`: the one element of `dst`, an integer tensor (up to 32 bits)
/// in HBM or SBUF, = `src`'s value (converted to `dst`'s dtype: a narrower one saturates).
#[track_caller]
pub fn register_store(dst: impl Into<DmaArg>, src: &Register) {
    let loc = SourceLoc::caller();
    let dst = dst.into();
    with_builder(|b| {
        if !own(b, loc, "register_store", src.into()) {
            return;
        }
        if let Some(dst) = scalar_side(b, loc, "register_store", "dst", dst, true) {
            b.push_op(Op::RegisterStore { dst, src: src.0 }, loc);
        }
    });
}

/// `dma_compute`'s keywords after `dst` and `srcs`.
#[derive(Clone, Debug, PartialEq)]
pub struct DmaComputeArgs {
    /// How the scaled sources combine (NKI supports `nl.add` only: validation's
    /// `dma-compute-op`).
    pub reduce_op: BinOp,
    /// One factor per source; `None` is all 1.0 (NKI requires 1.0: `dma-compute-scales`).
    pub scales: Option<Vec<f32>>,
    /// Whether scatter indices are unique (indirect accesses only).
    pub unique_indices: bool,
    /// What an out-of-bounds indirect index does.
    pub oob_mode: OobMode,
}

impl DmaComputeArgs {
    /// `reduce_op=nl.add`, the other keywords at NKI's defaults.
    pub fn add() -> DmaComputeArgs {
        DmaComputeArgs {
            reduce_op: BinOp::Add,
            scales: None,
            unique_indices: true,
            oob_mode: OobMode::Error,
        }
    }
}

/// `nisa.dma_compute(dst, srcs, reduce_op, scales, ...)`: `dst = srcs[0]·scales[0] +
/// srcs[1]·scales[1] + ...` element by element (the operands' elements in row-major order), in
/// fp32, rounded to `dst`'s dtype. Every source has `dst`'s element count.
#[track_caller]
pub fn dma_compute(dst: impl Into<DmaArg>, srcs: Vec<DmaArg>, args: DmaComputeArgs) {
    let loc = SourceLoc::caller();
    let dst = dst.into();
    with_builder(|b| {
        if srcs.is_empty() {
            b.fail(
                loc,
                "dma_compute: srcs is empty; give 1 to 16 sources".into(),
            );
            return;
        }
        let Some((dst, n, _)) = side(b, loc, "dma_compute", "dst", dst, true) else {
            return;
        };
        let mut operands = Vec::with_capacity(srcs.len());
        for (i, src) in srcs.into_iter().enumerate() {
            let role = format!("srcs[{i}]");
            let Some((operand, m, _)) = side(b, loc, "dma_compute", &role, src, false) else {
                return;
            };
            if m != n {
                b.fail(
                    loc,
                    format!("dma_compute: {role} has {m} elements, dst {n}; they must match"),
                );
                return;
            }
            operands.push(operand);
        }
        let scales = match args.scales {
            None => vec![1.0; operands.len()],
            Some(s) if s.len() == operands.len() => s,
            Some(s) => {
                b.fail(
                    loc,
                    format!(
                        "dma_compute: {} scales for {} sources; give one per source",
                        s.len(),
                        operands.len()
                    ),
                );
                return;
            }
        };
        b.push_op(
            Op::DmaCompute {
                dst,
                srcs: operands,
                reduce_op: args.reduce_op,
                scales,
                unique_indices: args.unique_indices,
                oob_mode: args.oob_mode,
            },
            loc,
        );
    });
}
