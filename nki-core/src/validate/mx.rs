//! The rules of MX data and of `quantize_mx` / `nc_matmul_mx` their NKI 0.7 docstrings, the
//! Trainium3 architecture guide and the MX deep dive state. Their availability (NeuronCore-v4+)
//! is `isa-target`'s (the `nki_spec` table).
//!
//! A packed tile or tensor (`float8_e5m2_x4`, ...) holds packed elements, not numbers, so only
//! `dma_copy` (between two of the same dtype), `quantize_mx` (its `dst`) and `nc_matmul_mx`
//! (`stationary`, `moving`) take one: `mx-packed-operand` and `mx-packed-dma`.

use super::violation;
use crate::dtype::DType;
use crate::error::NkiError;
use crate::ir::{Buffer, DmaOperand, Instruction, Op, OperandUse, Program, TileRegion};
use crate::isa::MX_SCALE_OFFSETS;

/// The dtypes an MX scale tile may have (float8_e8m0fnu, or uint8 "for backward
/// compatibility").
const SCALE_DTYPES: [DType; 2] = [DType::F8E8M0, DType::U8];

/// Checks one instruction against the rules of this module.
pub(super) fn check(program: &Program, inst: &Instruction) -> Result<(), NkiError> {
    check_packed_operands(program, inst)?;
    match &inst.op {
        Op::QuantizeMx {
            dst,
            src,
            dst_scale,
        } => {
            let c = Checker { program, inst };
            c.dtype(
                "quantize-mx-dtype",
                ("src", src),
                &[DType::F16, DType::BF16],
            )?;
            c.dtype(
                "quantize-mx-dtype",
                ("dst", dst),
                &[DType::F8E5M2X4, DType::F8E4M3FNX4],
            )?;
            c.dtype("quantize-mx-dtype", ("dst_scale", dst_scale), &SCALE_DTYPES)?;
            for r in [("src", src), ("dst", dst), ("dst_scale", dst_scale)] {
                c.buffer(r, Buffer::Sbuf)?;
            }
            c.partitions(("src", src))?;
            c.scale_offset(("dst_scale", dst_scale))
        }
        Op::NcMatmulMx {
            dst,
            stationary,
            moving,
            stationary_scale,
            moving_scale,
            tile_position,
            tile_size,
            ..
        } => {
            let c = Checker { program, inst };
            let packed = [DType::F8E5M2X4, DType::F8E4M3FNX4, DType::F4E2M1FNX4];
            let rule = "nc-matmul-mx-dtype";
            c.dtype(rule, ("stationary", stationary), &packed)?;
            c.dtype(rule, ("moving", moving), &packed)?;
            c.dtype(rule, ("stationary_scale", stationary_scale), &SCALE_DTYPES)?;
            c.dtype(rule, ("moving_scale", moving_scale), &SCALE_DTYPES)?;
            c.dtype(rule, ("dst", dst), &[DType::F32, DType::BF16])?;
            for r in [
                ("stationary", stationary),
                ("moving", moving),
                ("stationary_scale", stationary_scale),
                ("moving_scale", moving_scale),
            ] {
                c.buffer(r, Buffer::Sbuf)?;
            }
            c.buffer(("dst", dst), Buffer::Psum)?;
            c.partitions(("stationary", stationary))?;
            c.scale_offset(("stationary_scale", stationary_scale))?;
            c.scale_offset(("moving_scale", moving_scale))?;
            c.sizes(dst, stationary, moving)?;
            c.tiling(stationary.np, tile_position, tile_size)
        }
        _ => Ok(()),
    }
}

/// The first operand of `inst` holding packed data where the instruction takes none: the
/// tile's or tensor's name and dtype.
fn packed_problem(program: &Program, inst: &Instruction) -> Option<(String, DType)> {
    let allowed: Vec<&TileRegion> = match &inst.op {
        Op::DmaCopy { .. } => return None,
        Op::QuantizeMx { dst, .. } => vec![dst],
        Op::NcMatmulMx {
            stationary, moving, ..
        } => vec![stationary, moving],
        _ => vec![],
    };
    let mut found = None;
    inst.op.visit_operands(&mut |u| {
        if found.is_some() {
            return;
        }
        let (name, dtype) = match u {
            OperandUse::Tile(r, _) if allowed.iter().any(|a| std::ptr::eq(*a, r)) => return,
            OperandUse::Tile(r, _) => {
                let t = &program.tiles[r.tile.0 as usize];
                (format!("tile {}", t.name), t.dtype)
            }
            OperandUse::Hbm(a, _) => {
                let t = &program.hbm[a.tensor.0 as usize];
                (format!("tensor {}", t.name), t.dtype)
            }
            // A register holds an int32.
            OperandUse::Register(..) => return,
        };
        if dtype.is_packed() {
            found = Some((name, dtype));
        }
    });
    found
}

fn check_packed_operands(program: &Program, inst: &Instruction) -> Result<(), NkiError> {
    let name = inst.op.name();
    if let Some((what, dtype)) = packed_problem(program, inst) {
        return Err(violation(
            "mx-packed-operand",
            "dma_copy, quantize_mx dst, nc_matmul_mx stationary / moving",
            format!("{name} on {what}"),
            name.into(),
            format!(
                "{name}: {what} is {}, a packed MX dtype (four values per element); only \
                 dma_copy, quantize_mx's dst and nc_matmul_mx's stationary and moving take packed \
                 data",
                dtype.nl_name()
            ),
            inst.loc,
        ));
    }
    // A reinterpreting copy (a dtype view's sync) moves bytes, whatever the dtypes.
    if let Op::DmaCopy {
        dst,
        src,
        reinterpret: false,
        ..
    } = &inst.op
    {
        let dtype = |side: &DmaOperand| match side {
            DmaOperand::Tile { region } => program.tiles[region.tile.0 as usize].dtype,
            DmaOperand::Hbm { access } => program.hbm[access.tensor.0 as usize].dtype,
        };
        let (d, s) = (dtype(dst), dtype(src));
        if (d.is_packed() || s.is_packed()) && d != s {
            return Err(violation(
                "mx-packed-dma",
                format!("dst and src both {}", if d.is_packed() { d } else { s }),
                format!("dst {d}, src {s}"),
                name.into(),
                format!(
                    "dma_copy: src is {s} and dst {d}; packed MX data is copied, never converted, \
                     so both sides must have the same packed dtype"
                ),
                inst.loc,
            ));
        }
    }
    Ok(())
}

struct Checker<'a> {
    program: &'a Program,
    inst: &'a Instruction,
}

impl Checker<'_> {
    fn fail(&self, rule: &'static str, limit: String, actual: String, message: String) -> NkiError {
        let name = self.inst.op.name();
        violation(
            rule,
            limit,
            actual,
            name.into(),
            format!("{name}: {message}"),
            self.inst.loc,
        )
    }

    fn tile(&self, r: &TileRegion) -> &crate::ir::TileDecl {
        &self.program.tiles[r.tile.0 as usize]
    }

    fn dtype(
        &self,
        rule: &'static str,
        (role, r): (&str, &TileRegion),
        want: &[DType],
    ) -> Result<(), NkiError> {
        let t = self.tile(r);
        if want.contains(&t.dtype) {
            return Ok(());
        }
        let names: Vec<&str> = want.iter().map(|d| d.nl_name()).collect();
        Err(self.fail(
            rule,
            names.join(" or "),
            t.dtype.nl_name().into(),
            format!(
                "{role} {} is {}; it must be {}",
                t.name,
                t.dtype.nl_name(),
                names.join(" or ")
            ),
        ))
    }

    fn buffer(&self, (role, r): (&str, &TileRegion), want: Buffer) -> Result<(), NkiError> {
        let t = self.tile(r);
        if t.buffer == want {
            return Ok(());
        }
        Err(self.fail(
            "mx-memory",
            want.name().into(),
            t.buffer.name().into(),
            format!(
                "{role} {} is in {}; it must be in {}",
                t.name,
                t.buffer.name(),
                want.name()
            ),
        ))
    }

    /// "The partition dimension size ... must be a multiple of 32 and must not exceed 128."
    fn partitions(&self, (role, r): (&str, &TileRegion)) -> Result<(), NkiError> {
        if r.np.is_multiple_of(32) && (32..=128).contains(&r.np) {
            return Ok(());
        }
        Err(self.fail(
            "mx-partitions",
            "a multiple of 32, at most 128".into(),
            r.np.to_string(),
            format!(
                "{role} has {} partitions; MX data spans whole 32-partition quadrants (a \
                 multiple of 32, at most 128)",
                r.np
            ),
        ))
    }

    /// Scales are read and written at offsets 0, 4, 8 or 12 of a quadrant.
    fn scale_offset(&self, (role, r): (&str, &TileRegion)) -> Result<(), NkiError> {
        if MX_SCALE_OFFSETS.contains(&(r.p0 % 32)) {
            return Ok(());
        }
        Err(self.fail(
            "mx-scale-offset",
            format!("start partition % 32 in {MX_SCALE_OFFSETS:?}"),
            r.p0.to_string(),
            format!(
                "{role} starts at partition {}; MX scales start at offset 0, 4, 8 or 12 of a \
                 32-partition quadrant",
                r.p0
            ),
        ))
    }

    /// The stationary free size is even and at most 128; the moving one at most 4096 for a
    /// float32 dst, 8192 for bfloat16.
    fn sizes(
        &self,
        dst: &TileRegion,
        stationary: &TileRegion,
        moving: &TileRegion,
    ) -> Result<(), NkiError> {
        let m = stationary.nf;
        if !m.is_multiple_of(2) || m > 128 {
            return Err(self.fail(
                "nc-matmul-mx-size",
                "stationary free size even, at most 128".into(),
                m.to_string(),
                format!(
                    "stationary has {m} elements per partition; it must be even and at most 128"
                ),
            ));
        }
        let limit = if self.tile(dst).dtype == DType::BF16 {
            8192
        } else {
            4096
        };
        if moving.nf > limit {
            return Err(self.fail(
                "nc-matmul-mx-size",
                format!("moving free size at most {limit}"),
                moving.nf.to_string(),
                format!(
                    "moving has {} elements per partition; with a {} dst the limit is {limit} \
                     (8 PSUM banks)",
                    moving.nf,
                    self.tile(dst).dtype.nl_name()
                ),
            ));
        }
        Ok(())
    }

    /// Row tiling only: `tile_size` is `(32 | 64 | 128, 128)`, `tile_position` `(row, 0)` with
    /// `row` a multiple of the row size below 128, and the contraction fits the row size.
    fn tiling(&self, k: usize, position: &[usize], size: &[usize]) -> Result<(), NkiError> {
        let (row, col, start, start_col) = match (position, size) {
            ([start, start_col], [row, col]) => (*row, *col, *start, *start_col),
            _ => return Ok(()),
        };
        let problem = if col != 128 {
            Some(format!(
                "tile_size's column_size is {col}; it must be 128 (row tiling only)"
            ))
        } else if ![32, 64, 128].contains(&row) {
            Some(format!(
                "tile_size's row_size is {row}; it must be 32, 64 or 128"
            ))
        } else if start_col != 0 {
            Some(format!(
                "tile_position's start_column is {start_col}; it must be 0"
            ))
        } else if !start.is_multiple_of(row) || start >= 128 {
            Some(format!(
                "tile_position's start_row is {start}; it must be a multiple of row_size {row} \
                 below 128"
            ))
        } else if k > row {
            Some(format!(
                "stationary has {k} partitions, more than the row tile's {row}"
            ))
        } else {
            None
        };
        match problem {
            None => Ok(()),
            Some(message) => Err(self.fail(
                "nc-matmul-mx-tiling",
                "tile_size (32|64|128, 128), tile_position (k·row_size, 0)".into(),
                format!("tile_position {position:?}, tile_size {size:?}"),
                message,
            )),
        }
    }
}
