//! Runs a fixture case through the production path: registry lookup, compile cache (trace +
//! validate), CPU simulator.

use crate::Error;
use crate::fixtures::{Case, ScalarJson};
use crate::prng;
use nki_core::KernelDef;
use nki_core::contract::Bindings;
use nki_core::kernel_def::{ParamKind, ScalarValue, TensorSig};
use nki_core::sim::{HostTensor, HostTensorMut};
use nki_core::{DType, Signature, Target};
use nki_registry::{CompileCache, Registry};

/// The target every accuracy case is compiled for.
pub const TARGET: Target = Target::Trn2;

/// The outputs of one case's kernel run, with what the contract bound.
pub struct CaseRun {
    /// Every kernel output by contract name, as `f32` (exact; the kernel wrote it in its dtype).
    pub outputs: Vec<(&'static str, Vec<f32>)>,
    /// The contract's bindings for the case's inputs.
    pub bindings: Bindings,
    /// The kernel.
    pub def: &'static KernelDef,
}

/// Runs `case`'s kernel on its PRNG inputs and returns every output.
///
/// Parameter names in the fixture must match the kernel's, in order (an optional tensor left
/// out is simply not listed); scalar values are converted to the kind the kernel declares
/// (float, int or bool).
pub fn run_case(case: &Case) -> Result<CaseRun, Error> {
    let def = Registry::global()?.get(&case.op)?;
    let present: Vec<&str> = def
        .tensor_params()
        .filter(|p| case.inputs.iter().any(|i| i.name == p.name))
        .map(|p| p.name)
        .collect();
    let input_names: Vec<&str> = case.inputs.iter().map(|i| i.name.as_str()).collect();
    let scalar_params: Vec<_> = def.scalar_params().collect();
    let scalar_names: Vec<&str> = case.scalars.iter().map(|s| s.name.as_str()).collect();
    let missing_required = def
        .tensor_params()
        .any(|p| p.kind == ParamKind::Tensor && !present.contains(&p.name));
    if present != input_names
        || missing_required
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
        .map(|(p, s)| match (p.kind, &s.value) {
            (_, None) => Ok(ScalarValue::None),
            (_, Some(ScalarJson::Bool(b))) => Ok(ScalarValue::Bool(*b)),
            (ParamKind::Int { .. }, Some(ScalarJson::Number(v))) => Ok(ScalarValue::Int(*v as i64)),
            (_, Some(ScalarJson::Number(v))) => Ok(ScalarValue::Float(*v)),
            (ParamKind::Str { choices, .. }, Some(ScalarJson::Str(v))) => choices
                .iter()
                .find(|c| *c == v)
                .map(|c| ScalarValue::Str(c))
                .ok_or_else(|| {
                    Error::Fixture(format!("{}: `{}` has no choice {v:?}", case.name, p.name))
                }),
            (_, Some(ScalarJson::Str(v))) => Err(Error::Fixture(format!(
                "{}: `{}` is not a str parameter, but the fixture passes {v:?}",
                case.name, p.name
            ))),
        })
        .collect::<Result<_, _>>()?;
    let sig = Signature {
        tensors: def
            .tensor_params()
            .map(|p| {
                case.inputs
                    .iter()
                    .find(|i| i.name == p.name)
                    .map(|i| TensorSig {
                        shape: i.shape.iter().map(|&d| d as u64).collect(),
                        dtype: def.contract.fixed_dtype(p.name).unwrap_or(case.dtype),
                    })
            })
            .collect(),
        scalars,
        target: TARGET,
    };
    let metas = sig.metas();
    let bindings = def
        .contract
        .bind_call(def.name, &metas, &def.choices(&sig.scalars))
        .map_err(nki_core::NkiError::from)?;
    let compiled = CompileCache::global().get_or_compile(def, &sig)?;
    // Present inputs in order, with their dtypes and the index domain the kernel declares.
    let decls: Vec<_> = compiled.program().inputs().map(|(_, d)| d).collect();
    let data: Vec<(DType, Vec<u8>)> = case
        .inputs
        .iter()
        .zip(&decls)
        .map(|(spec, decl)| {
            let values = prng::input_values(spec.seed, decl);
            (decl.dtype, prng::encode(&values, decl.dtype))
        })
        .collect();
    let inputs: Vec<HostTensor<'_>> = case
        .inputs
        .iter()
        .zip(&data)
        .map(|(spec, (dtype, bytes))| HostTensor {
            dtype: *dtype,
            shape: &spec.shape,
            data: bytes,
        })
        .collect();
    let shapes: Vec<Vec<usize>> = compiled
        .outputs()
        .iter()
        .map(|m| m.shape.iter().map(|&d| d as usize).collect())
        .collect();
    let mut bufs: Vec<Vec<u8>> = compiled
        .outputs()
        .iter()
        .zip(&shapes)
        .map(|(m, s)| vec![0u8; s.iter().product::<usize>() * m.dtype.size_bytes()])
        .collect();
    let mut outputs: Vec<HostTensorMut<'_>> = compiled
        .outputs()
        .iter()
        .zip(&shapes)
        .zip(bufs.iter_mut())
        .map(|((m, s), b)| HostTensorMut {
            dtype: m.dtype,
            shape: s,
            data: b,
        })
        .collect();
    compiled.simulate(&inputs, &mut outputs, true)?;
    let outputs = def
        .contract
        .outputs
        .iter()
        .zip(compiled.outputs())
        .zip(&bufs)
        .map(|((spec, meta), b)| (spec.name, prng::decode(b, meta.dtype)))
        .collect();
    Ok(CaseRun {
        outputs,
        bindings,
        def,
    })
}
