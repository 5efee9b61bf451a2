//! Registers and `dma_compute` on the simulator: the register file (one int32 per register,
//! empty until written), the register instructions, the iterations of a device loop, and the
//! DMA engines' scaled sum of several sources.

use crate::NkiError;
use crate::ir::{DmaOperand, Op, RegisterId, RegisterValue};
use crate::sim::dma::check_hbm_side;
use crate::sim::exec::{Ctx, ExecError};
use crate::sim::rounding::round_into;
use crate::sim::store::TileStore;
use std::sync::Mutex;

/// Device loops stop with a simulation error after this many iterations (a `while` whose
/// condition never clears would otherwise never end).
pub const MAX_DEVICE_ITERATIONS: u64 = 1 << 24;

/// Every register's value, `None` until something writes it.
#[derive(Debug, Default)]
pub(crate) struct RegisterFile(Vec<Option<i32>>);

impl RegisterFile {
    /// A file of `n` unwritten registers.
    pub(crate) fn new(n: usize) -> RegisterFile {
        RegisterFile(vec![None; n])
    }

    /// The value of `reg`, or `None` when nothing wrote it (or it is not declared).
    pub(crate) fn get(&self, reg: RegisterId) -> Option<i32> {
        self.0.get(reg.0 as usize).copied().flatten()
    }

    /// Sets `reg` (`None`: unwritten again, as a fresh `register_alloc()`).
    pub(crate) fn set(&mut self, reg: RegisterId, value: Option<i32>) {
        if let Some(slot) = self.0.get_mut(reg.0 as usize) {
            *slot = value;
        }
    }
}

/// The register file of a running simulation, shared by the statements that use it (they run
/// in program order: never in parallel loops or bands).
pub(crate) type Registers = Mutex<RegisterFile>;

fn lock(registers: &Registers) -> std::sync::MutexGuard<'_, RegisterFile> {
    registers
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The value of `reg`, or an error naming it when nothing wrote it.
pub(crate) fn read(
    registers: &Registers,
    reg: RegisterId,
    what: impl FnOnce() -> NkiError,
) -> Result<i32, NkiError> {
    lock(registers).get(reg).ok_or_else(what)
}

/// Writes `reg`.
pub(crate) fn write(registers: &Registers, reg: RegisterId, value: Option<i32>) {
    lock(registers).set(reg, value);
}

/// Every element of a DMA operand, row-major (partitions, then free elements), as fp32.
fn read_all(
    ctx: &Ctx<'_, '_>,
    store: &TileStore<'_>,
    o: &DmaOperand,
) -> Result<Vec<f32>, ExecError> {
    let mut vals = Vec::new();
    match o {
        DmaOperand::Tile { region } => {
            for r in 0..region.np {
                vals.extend_from_slice(store.row(region, r)?);
            }
        }
        DmaOperand::Hbm { access } => {
            check_hbm_side(ctx, access, false)?;
            let buf = ctx.hbm[access.tensor.0 as usize];
            let base = access.offset.eval(ctx.env);
            for r in 0..access.np as i64 {
                let at = base + r * access.p_stride;
                vals.extend(
                    (0..access.nf as i64).map(|f| buf.read((at + f * access.f_stride) as usize)),
                );
            }
        }
    }
    Ok(vals)
}

/// Writes `vals` (row-major) into a DMA operand, each rounded once to its dtype.
fn write_all(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    o: &DmaOperand,
    vals: &[f32],
) -> Result<(), ExecError> {
    match o {
        DmaOperand::Tile { region } => {
            let dt = store.dtype(region.tile);
            for (p, chunk) in vals.chunks(region.nf.max(1)).enumerate().take(region.np) {
                round_into(store.row_mut(region, p)?, dt, |i| chunk[i]);
            }
        }
        DmaOperand::Hbm { access } => {
            check_hbm_side(ctx, access, true)?;
            let buf = ctx.hbm[access.tensor.0 as usize];
            let base = access.offset.eval(ctx.env);
            let nf = access.nf.max(1);
            for (k, v) in vals.iter().enumerate() {
                let (r, f) = ((k / nf) as i64, (k % nf) as i64);
                let at = base + r * access.p_stride + f * access.f_stride;
                buf.write(at as usize, buf.dtype.round(*v));
            }
        }
    }
    Ok(())
}

fn elements(o: &DmaOperand) -> usize {
    match o {
        DmaOperand::Tile { region } => region.np * region.nf,
        DmaOperand::Hbm { access } => access.np * access.nf,
    }
}

/// Executes a register instruction or `dma_compute`.
pub(crate) fn execute(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    op: &Op,
) -> Result<(), ExecError> {
    if let Op::DmaCompute {
        dst, srcs, scales, ..
    } = op
    {
        return dma_compute(ctx, store, dst, srcs, scales);
    }
    let registers = ctx
        .registers
        .ok_or_else(|| ctx.err("register instructions run in program order only".into()))?;
    let unwritten = |reg: RegisterId| {
        move || {
            ctx.err(format!(
                "register r{} is read before anything wrote it (register_alloc() without a \
                 value, then no register_move / register_load)",
                reg.0
            ))
        }
    };
    match op {
        Op::RegisterAlloc { dst, init } => write(registers, *dst, *init),
        Op::RegisterMove { dst, src } => {
            let v = value(registers, src, unwritten)?;
            write(registers, *dst, Some(v));
        }
        Op::RegisterLoad { dst, src } => {
            let vals = read_all(ctx, store, src)?;
            let [v] = vals[..] else {
                return Err(ctx
                    .err(format!("reads {} elements, not one", vals.len()))
                    .into());
            };
            if !v.is_finite() || v.fract() != 0.0 {
                return Err(ctx
                    .err(format!(
                        "reads {v}, which is not an int32 value (an element nothing wrote?)"
                    ))
                    .into());
            }
            // Integer tiles hold integers (exact up to fp32's 2^24); a uint32 value of 2^31 or
            // more is its 32 bits read as int32 (two's complement), as a 32-bit register holds it.
            let bits = if v < 0.0 { v as i32 } else { (v as u32) as i32 };
            write(registers, *dst, Some(bits));
        }
        Op::RegisterStore { dst, src } => {
            let v = read(registers, *src, unwritten(*src))?;
            if elements(dst) != 1 {
                return Err(ctx
                    .err(format!("writes {} elements, not one", elements(dst)))
                    .into());
            }
            write_all(ctx, store, dst, &[v as f32])?;
        }
        other => {
            return Err(ctx
                .err(format!("{} is not a register instruction", other.name()))
                .into());
        }
    }
    Ok(())
}

/// What a register value reads.
fn value<F: FnOnce() -> NkiError>(
    registers: &Registers,
    v: &RegisterValue,
    unwritten: impl FnOnce(RegisterId) -> F,
) -> Result<i32, NkiError> {
    match v {
        RegisterValue::Imm { value } => Ok(*value),
        RegisterValue::Reg { reg } => read(registers, *reg, unwritten(*reg)),
    }
}

/// `dma_compute`: every source read whole, the scaled sum in fp32 per element, then `dst`
/// written (so a source may be `dst` itself).
fn dma_compute(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    dst: &DmaOperand,
    srcs: &[DmaOperand],
    scales: &[f32],
) -> Result<(), ExecError> {
    let n = elements(dst);
    let mut acc = vec![0.0f32; n];
    for (i, src) in srcs.iter().enumerate() {
        let vals = read_all(ctx, store, src)?;
        if vals.len() != n {
            return Err(ctx
                .err(format!("srcs[{i}] has {} elements, dst {n}", vals.len()))
                .into());
        }
        let scale = scales.get(i).copied().unwrap_or(1.0);
        for (a, v) in acc.iter_mut().zip(vals) {
            *a += v * scale;
        }
    }
    write_all(ctx, store, dst, &acc)
}

/// A device loop's bound: an immediate, or its register's value (unwritten: an error made by
/// `err`).
pub(crate) fn bound(
    registers: &Registers,
    v: &RegisterValue,
    err: &dyn Fn(String) -> NkiError,
) -> Result<i64, NkiError> {
    let unwritten = |reg: RegisterId| {
        move || {
            err(format!(
                "loop bound register r{} is read before anything wrote it",
                reg.0
            ))
        }
    };
    value(registers, v, unwritten).map(i64::from)
}
