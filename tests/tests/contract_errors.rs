//! The words a caller sees when arguments break a library kernel's contract (the same messages
//! surface as Python `ValueError`/`TypeError`).

use nki_core::kernel_def::ScalarValue;
use nki_core::{DType, Signature, Target};
use nki_kernels as _;
use nki_registry::Registry;

fn sig(tensors: &[(&[u64], DType)], scalars: &[ScalarValue]) -> Signature {
    Signature::new(tensors, scalars, Target::Trn2)
}

#[test]
fn contract_error_messages() {
    use DType::{BF16, F8E4M3, F16, F32};
    let eps = [ScalarValue::Float(1e-6)];
    let cases: Vec<(&str, Signature)> = vec![
        ("add", sig(&[(&[4, 5], F32), (&[4, 6], F32)], &[])),
        ("add", sig(&[(&[2, 4, 5], F32), (&[3, 4, 5], F32)], &[])),
        ("add", sig(&[(&[], F32), (&[], F32)], &[])),
        ("add", sig(&[(&[4], BF16), (&[4], F16)], &[])),
        ("rmsnorm", sig(&[(&[8, 1024], F32), (&[512], F32)], &eps)),
        (
            "rmsnorm",
            sig(&[(&[2, 8, 1024], F32), (&[1024], F32)], &eps),
        ),
        ("rmsnorm", sig(&[(&[8, 20000], F32), (&[20000], F32)], &eps)),
        ("rmsnorm", sig(&[(&[8, 64], F8E4M3), (&[64], F8E4M3)], &eps)),
        ("matmul", sig(&[(&[8, 64], F32), (&[65, 16], F32)], &[])),
        ("matmul", sig(&[(&[64], F32), (&[64, 16], F32)], &[])),
        ("matmul", sig(&[(&[8, 64], BF16), (&[64, 16], F32)], &[])),
    ];
    let reg = Registry::global().unwrap();
    let lines: Vec<String> = cases
        .iter()
        .map(|(op, s)| reg.get(op).unwrap().check(s).unwrap_err().to_string())
        .collect();
    insta::assert_snapshot!(lines.join("\n"));
}
