//! Mistakes a kernel author makes, each caught at trace or validation time with a message in the
//! author's terms and the kernel source line; and every library kernel traced and validated at
//! the extreme shapes its contract admits, on every target.

use nki_core::contract::{DimExpr, DimPattern};
use nki_core::kernel_def::{KernelDef, Signature};
use nki_core::prelude::*;
use nki_core::{NkiError, Target};
use nki_kernels as _;
use nki_registry::Registry;
use std::collections::BTreeMap;

/// Copies `x`, but only the full 128-row tiles: the ragged tail is forgotten.
#[kernel(shape(x = [N, D]) -> y = [N, D], dtype(x in {f32}) -> x)]
pub fn forgets_the_tail(x: &Hbm) -> Hbm {
    let out = shared_hbm(x.shape(), x.dtype()); // the output
    affine_range(x.dim(0) / PMAX, |i| {
        let t = sbuf([PMAX, x.dim(1)], x.dtype());
        dma_copy(&t, x.rows(i.clone() * PMAX, PMAX));
        dma_copy(out.rows(i * PMAX, PMAX), &t);
    });
    out
}

/// Promises `[N, D]` but allocates one column more.
#[kernel(shape(x = [N, D]) -> y = [N, D], dtype(x in {f32}) -> x)]
pub fn wrong_output_shape(x: &Hbm) -> Hbm {
    shared_hbm(&[x.dim(0), x.dim(1) + 1], x.dtype())
}

fn line_of(marker: &str) -> u32 {
    let src = include_str!("author_mistakes.rs");
    src.lines().position(|l| l.contains(marker)).unwrap() as u32 + 1
}

fn sig(shape: &[u64]) -> Signature {
    Signature::new(&[(shape, DType::F32)], &[], Target::Trn2)
}

#[test]
fn an_unwritten_ragged_tail_is_a_trace_error_at_the_allocation() {
    FORGETS_THE_TAIL_KERNEL
        .check(&sig(&[256, 8]))
        .and_then(|c| c.trace())
        .unwrap();
    let err = FORGETS_THE_TAIL_KERNEL
        .check(&sig(&[300, 8]))
        .and_then(|c| c.trace())
        .unwrap_err();
    let NkiError::Trace { message, loc } = &err else {
        panic!("expected a trace error, got {err}");
    };
    assert_eq!(loc.line, line_of("// the output"));
    assert_eq!(
        message,
        "kernel forgets_the_tail: output `y` (shape [300, 8]) is not fully written: 352 of 2400 \
         elements are never stored, the first at [256, 0] (a ragged tail or a tile count that \
         misses the end?)"
    );
}

#[test]
fn an_output_that_breaks_the_contract_names_the_output_and_the_kernel() {
    let err = WRONG_OUTPUT_SHAPE_KERNEL
        .check(&sig(&[4, 8]))
        .and_then(|c| c.trace())
        .unwrap_err();
    let NkiError::Trace { message, loc } = &err else {
        panic!("expected a trace error, got {err}");
    };
    assert_eq!(loc.line, line_of("pub fn wrong_output_shape"));
    assert_eq!(
        message,
        "kernel wrong_output_shape returns output `y` as f32 [4, 9], but its contract promises f32 [4, 8] for these inputs"
    );
}

/// The largest value `require(...)` allows for each symbol bounded by a literal (`D <= 16384`,
/// `D < 8192`).
fn upper_bounds(def: &KernelDef) -> BTreeMap<&'static str, u64> {
    use nki_core::contract::CmpOp;
    let mut out = BTreeMap::new();
    for r in def.contract.requires {
        if let (DimExpr::Sym { name }, DimExpr::Const { value }) = (r.lhs, r.rhs) {
            let max = match r.op {
                CmpOp::Le => value,
                CmpOp::Lt => value - 1,
                _ => continue,
            };
            out.insert(name, max.max(0) as u64);
        }
    }
    out
}

/// `sig` with every bounded symbol set to its bound (other dimensions as the sample has them).
fn at_bounds(def: &KernelDef, sig: &Signature) -> Option<Signature> {
    let bounds = upper_bounds(def);
    if bounds.is_empty() {
        return None;
    }
    let metas = sig.metas();
    let b = def.contract.bind_optional(def.name, &metas).ok()?;
    let mut out = sig.clone();
    for (spec, t) in def.contract.inputs.iter().zip(out.tensors.iter_mut()) {
        let Some(t) = t else { continue };
        let mut shape = Vec::new();
        for d in spec.dims {
            match d {
                DimPattern::Sym { name } => {
                    shape.push(bounds.get(name).copied().unwrap_or(b.dims[name]))
                }
                DimPattern::Const { value } => shape.push(*value),
                DimPattern::Rest { name } => shape.extend(&b.rests[name]),
            }
        }
        t.shape = shape;
    }
    Some(out)
}

#[test]
fn every_kernel_and_its_backward_fit_every_target_at_the_bounds_of_its_contract() {
    let mut checked = 0;
    for def in Registry::global().unwrap().kernels() {
        for sample in def.samples {
            for dtype in sample.dtypes_for(&def.contract) {
                for target in [Target::Trn1, Target::Trn2, Target::Trn3] {
                    let base = sample.signature(def, dtype, target).expect("full sample");
                    let Some(extreme) = at_bounds(def, &base) else {
                        continue;
                    };
                    let mut runs = vec![(def, extreme.clone())];
                    runs.extend(def.backward_signature(&extreme));
                    for (k, s) in runs {
                        let program = k.check(&s).and_then(|c| c.trace()).unwrap_or_else(|e| {
                            panic!("{} at {:?} on {target:?}: {e}", k.name, s.tensors)
                        });
                        nki_core::validate::validate(&program).unwrap_or_else(|e| {
                            panic!("{} at {:?} on {target:?}: {e}", k.name, s.tensors)
                        });
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked > 0, "no kernel declares a bounded require(...)");
}
