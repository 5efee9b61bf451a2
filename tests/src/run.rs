//! Runs a fixture case through the production path: registry lookup, compile cache (trace +
//! validate), CPU simulator.

use crate::Error;
use crate::fixtures::Case;
use crate::prng;
use nki_core::kernel_def::{ParamKind, ScalarValue, TensorSig};
use nki_core::sim::{HostTensor, HostTensorMut, SimOptions, simulate};
use nki_core::{Signature, Target};
use nki_registry::{CompileCache, Registry};

/// The target every accuracy case is compiled for.
pub const TARGET: Target = Target::Trn2;

/// Runs `case`'s kernel on its PRNG inputs and returns the whole output as `f32` (exact; the
/// kernel wrote it in the case dtype).
///
/// Parameter names in the fixture must match the kernel's, in order; scalar values are
/// converted to the kind the kernel declares (float, int or bool).
pub fn run_case(case: &Case) -> Result<Vec<f32>, Error> {
    let def = Registry::global()?.get(&case.op)?;
    let tensor_names: Vec<&str> = def.tensor_params().map(|p| p.name).collect();
    let input_names: Vec<&str> = case.inputs.iter().map(|i| i.name.as_str()).collect();
    let scalar_params: Vec<_> = def.scalar_params().collect();
    let scalar_names: Vec<&str> = case.scalars.iter().map(|s| s.name.as_str()).collect();
    if tensor_names != input_names
        || scalar_params
            .iter()
            .map(|p| p.name)
            .ne(scalar_names.iter().copied())
    {
        return Err(Error::Fixture(format!(
            "{}: fixture passes tensors {input_names:?} and scalars {scalar_names:?}, but `{}` takes {}",
            case.name, def.name, def.schema
        )));
    }
    let scalars = scalar_params
        .iter()
        .zip(&case.scalars)
        .map(|(p, s)| match p.kind {
            ParamKind::Int { .. } => ScalarValue::Int(s.value as i64),
            ParamKind::Bool { .. } => ScalarValue::Bool(s.value != 0.0),
            _ => ScalarValue::Float(s.value),
        })
        .collect();
    let sig = Signature {
        tensors: case
            .inputs
            .iter()
            .map(|i| TensorSig {
                shape: i.shape.iter().map(|&d| d as u64).collect(),
                dtype: case.dtype,
            })
            .collect(),
        scalars,
        target: TARGET,
    };
    let compiled = CompileCache::global().get_or_compile(def, &sig)?;
    let [out_meta] = compiled.outputs.as_slice() else {
        return Err(Error::Fixture(format!(
            "{}: `{}` has {} outputs, expected 1",
            case.name,
            def.name,
            compiled.outputs.len()
        )));
    };
    let out_shape: Vec<usize> = out_meta.shape.iter().map(|&d| d as usize).collect();
    if out_shape != case.output.shape || out_meta.dtype != case.dtype {
        return Err(Error::Fixture(format!(
            "{}: kernel output is {} {out_shape:?}, the fixture expects {} {:?}",
            case.name, out_meta.dtype, case.dtype, case.output.shape
        )));
    }

    let data: Vec<Vec<u8>> = case
        .input_values()
        .iter()
        .map(|v| prng::encode(v, case.dtype))
        .collect();
    let inputs: Vec<HostTensor<'_>> = case
        .inputs
        .iter()
        .zip(&data)
        .map(|(spec, bytes)| HostTensor {
            dtype: case.dtype,
            shape: &spec.shape,
            data: bytes,
        })
        .collect();
    let mut out = vec![0u8; case.output.numel() * out_meta.dtype.size_bytes()];
    let mut outputs = [HostTensorMut {
        dtype: out_meta.dtype,
        shape: &out_shape,
        data: &mut out,
    }];
    simulate(
        &compiled.program,
        &inputs,
        &mut outputs,
        SimOptions::default(),
    )?;
    Ok(prng::decode(&out, out_meta.dtype))
}
