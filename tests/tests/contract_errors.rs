//! The words a caller sees when arguments break a kernel's contract (the same messages surface
//! as Python `ValueError`/`TypeError`), for every kernel with samples: its first sample is
//! broken in four ways (a dimension dropped, a dimension changed, an unsupported dtype, mixed
//! dtypes) and each message is snapshotted. A perturbation the contract accepts is listed as
//! such. A new kernel appears here without editing this file.

use nki_core::kernel_def::{Signature, TensorSig};
use nki_core::{DType, Target};
use nki_kernels as _;
use nki_registry::Registry;

/// Named ways to break a valid signature.
fn perturbations(sig: &Signature) -> Vec<(&'static str, Signature)> {
    let mut out = Vec::new();
    let n = sig.tensors.len();
    if n == 0 {
        return out;
    }
    fn first(s: &mut Signature) -> &mut TensorSig {
        s.tensors[0]
            .as_mut()
            .expect("samples give the first tensor")
    }
    fn last(s: &mut Signature) -> Option<&mut TensorSig> {
        s.tensors.last_mut()?.as_mut()
    }
    let mut s = sig.clone();
    first(&mut s).shape.pop();
    out.push(("first tensor loses its last dimension", s));
    let mut s = sig.clone();
    if let Some(d) = last(&mut s).and_then(|t| t.shape.last_mut()) {
        *d += 1;
        out.push(("last tensor's last dimension + 1", s));
    }
    let mut s = sig.clone();
    first(&mut s).dtype = DType::F8E4M3;
    out.push(("first tensor in f8e4m3", s));
    if n > 1 {
        let mut s = sig.clone();
        let other = if first(&mut s).dtype == DType::BF16 {
            DType::F16
        } else {
            DType::BF16
        };
        if let Some(t) = last(&mut s) {
            t.dtype = other;
            out.push(("last tensor in another dtype", s));
        }
    }
    out
}

#[test]
fn contract_error_messages() {
    let reg = Registry::global().unwrap();
    let mut lines = Vec::new();
    for def in reg.kernels() {
        let Some(sample) = def.samples.first() else {
            continue;
        };
        let dtype = sample.dtypes_for(&def.contract)[0];
        let sig = sample
            .signature(def, dtype, Target::Trn2)
            .expect("samples give every argument");
        def.check(&sig)
            .expect("the first sample satisfies the contract");
        for (what, bad) in perturbations(&sig) {
            let msg = match def.check(&bad) {
                Ok(_) => "accepted".to_string(),
                Err(e) => e.to_string(),
            };
            lines.push(format!("{} / {what}:\n  {msg}", def.name));
        }
    }
    nki_tests::assert_snapshot!(lines.join("\n"));
}
