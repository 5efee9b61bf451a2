//! Checking actual arguments against a [`Contract`]: binding dimension symbols from input
//! shapes, reporting the first mismatch as a [`Violation`], and computing output shapes and
//! dtypes. The binder is generic over what a dimension is, so the same code checks concrete
//! shapes and symbolic ones (see [`crate::symbolic`]).

use crate::dtype::{DType, HostDType};
use crate::text::pattern_text;
use crate::violation::{BoundBy, ContractViolation, Violation};
use crate::{Contract, DimPattern, DtypeRule, InputShape, OutDim, OutputDtype};
use std::collections::BTreeMap;

/// Symbols bound from actual input shapes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bindings {
    /// Single-dimension symbols.
    pub dims: BTreeMap<&'static str, u64>,
    /// `..S` sequence symbols.
    pub rests: BTreeMap<&'static str, Vec<u64>>,
    /// The values of the string parameters the call gave, by parameter name (they choose
    /// between the shapes of a `match` output).
    pub choices: BTreeMap<&'static str, &'static str>,
}

/// An actual tensor argument, as the contract sees it.
#[derive(Clone, Copy, Debug)]
pub struct TensorMeta<'a> {
    /// Its shape.
    pub shape: &'a [u64],
    /// Its dtype.
    pub dtype: DType,
}

/// The outputs a contract computes for given inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputMeta {
    /// Output shape.
    pub shape: Vec<u64>,
    /// Output dtype.
    pub dtype: DType,
}

/// A dimension as the binder sees it: a known size, or a symbolic one.
pub(crate) trait Dim: Clone {
    /// How messages print it.
    fn text(&self) -> String;
    /// Its size, if known.
    fn value(&self) -> Option<u64>;
}

impl Dim for u64 {
    fn text(&self) -> String {
        self.to_string()
    }

    fn value(&self) -> Option<u64> {
        Some(*self)
    }
}

/// Binds symbols; equalities between sizes it cannot decide (symbolic ones) are deferred with
/// the violation to report if they turn out false.
pub(crate) struct Binder<D> {
    pub(crate) dims: BTreeMap<&'static str, D>,
    pub(crate) rests: BTreeMap<&'static str, Vec<D>>,
    origin: BTreeMap<&'static str, BoundBy>,
    /// `(dimension, what it must equal, violation)`; the second is a dimension or a literal.
    pub(crate) deferred: Vec<(D, Result<D, u64>, Box<Violation>)>,
}

fn texts<D: Dim>(shape: &[D]) -> Vec<String> {
    shape.iter().map(Dim::text).collect()
}

impl<D: Dim> Binder<D> {
    pub(crate) fn new() -> Binder<D> {
        Binder {
            dims: BTreeMap::new(),
            rests: BTreeMap::new(),
            origin: BTreeMap::new(),
            deferred: Vec::new(),
        }
    }

    /// `Ok(true)` equal, `Ok(false)` different, `Err(())` undecidable now.
    fn equal(a: &D, b: &D) -> Result<bool, ()> {
        match (a.value(), b.value()) {
            (Some(x), Some(y)) => Ok(x == y),
            _ if a.text() == b.text() => Ok(true),
            _ => Err(()),
        }
    }

    /// Binds every present tensor's shape against its pattern, in parameter order (`None`: an
    /// optional tensor left out, which binds nothing).
    pub(crate) fn bind_shapes(
        &mut self,
        contract: &Contract,
        shapes: &[Option<Vec<D>>],
    ) -> Result<(), Box<Violation>> {
        if shapes.len() != contract.inputs.len() {
            return Err(Box::new(Violation::TensorCount {
                expected: contract.inputs.len(),
                got: shapes.len(),
            }));
        }
        for (spec, shape) in contract.inputs.iter().zip(shapes) {
            if let Some(shape) = shape {
                self.bind_shape(spec, shape)?;
            }
        }
        Ok(())
    }

    fn bind_shape(&mut self, spec: &InputShape, shape: &[D]) -> Result<(), Box<Violation>> {
        let rest_at = spec
            .dims
            .iter()
            .position(|d| matches!(d, DimPattern::Rest { .. }));
        let fixed = spec.dims.len() - usize::from(rest_at.is_some());
        let rank_ok = if rest_at.is_some() {
            shape.len() >= fixed
        } else {
            shape.len() == fixed
        };
        let pattern = pattern_text(spec.dims);
        if !rank_ok {
            return Err(Box::new(Violation::Rank {
                param: spec.param,
                shape: texts(shape),
                pattern,
                rank: fixed,
                at_least: rest_at.is_some(),
            }));
        }
        let here = || BoundBy {
            param: spec.param,
            pattern: pattern.clone(),
            shape: texts(shape),
        };
        let rest_len = shape.len() - fixed;
        let mut pos = 0;
        for d in spec.dims {
            match *d {
                DimPattern::Rest { name } => {
                    let seq = shape[pos..pos + rest_len].to_vec();
                    pos += rest_len;
                    if let Some(prev) = self.rests.get(name).cloned() {
                        let violation = || {
                            Box::new(Violation::Rest {
                                param: spec.param,
                                shape: texts(shape),
                                pattern: pattern.clone(),
                                symbol: name,
                                expected: texts(&prev),
                                bound_by: self.origin[name].clone(),
                            })
                        };
                        if prev.len() != seq.len() {
                            return Err(violation());
                        }
                        for (a, b) in seq.iter().zip(&prev) {
                            match Self::equal(a, b) {
                                Ok(true) => {}
                                Ok(false) => return Err(violation()),
                                Err(()) => {
                                    let v = violation();
                                    self.deferred.push((a.clone(), Ok(b.clone()), v));
                                }
                            }
                        }
                    } else {
                        self.rests.insert(name, seq);
                        self.origin.insert(name, here());
                    }
                }
                DimPattern::Const { value } => {
                    let v = &shape[pos];
                    let violation = || {
                        Box::new(Violation::Literal {
                            param: spec.param,
                            shape: texts(shape),
                            pattern: pattern.clone(),
                            axis: pos,
                            expected: value,
                        })
                    };
                    match v.value() {
                        Some(x) if x != value => return Err(violation()),
                        Some(_) => {}
                        None => self.deferred.push((v.clone(), Err(value), violation())),
                    }
                    pos += 1;
                }
                DimPattern::Sym { name } => {
                    let v = shape[pos].clone();
                    pos += 1;
                    if let Some(prev) = self.dims.get(name).cloned() {
                        let violation = || {
                            Box::new(Violation::Dim {
                                param: spec.param,
                                shape: texts(shape),
                                pattern: pattern.clone(),
                                symbol: name,
                                expected: prev.text(),
                                bound_by: self.origin[name].clone(),
                            })
                        };
                        match Self::equal(&v, &prev) {
                            Ok(true) => {}
                            Ok(false) => return Err(violation()),
                            Err(()) => {
                                let viol = violation();
                                self.deferred.push((v, Ok(prev), viol));
                            }
                        }
                    } else {
                        self.dims.insert(name, v);
                        self.origin.insert(name, here());
                    }
                }
            }
        }
        Ok(())
    }
}

/// A tensor's dtype as the caller passed it, resolved against the kernel dtypes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallerDtype {
    /// A kernel dtype.
    Kernel(DType),
    /// A host dtype computed in a kernel dtype: `f64` runs in `f32` (TorchNeuron's policy), and
    /// `f32` outputs are then returned as `f64`; `int64` (indices, class targets) runs in
    /// `i32`, after a range check on the data at the boundary.
    Downcast {
        /// The kernel dtype it is computed in.
        compute: DType,
    },
    /// A dtype no kernel takes (`int32`, `bool`, ...).
    Unsupported,
}

impl CallerDtype {
    /// Resolves a dtype name as the caller spells it (`f32`, `bf16`, ..., `f64`, `int32`).
    pub fn resolve(name: &str) -> CallerDtype {
        match DType::from_name(name) {
            Some(d) => CallerDtype::Kernel(d),
            None => match HostDType::find(name) {
                Some(h) => CallerDtype::Downcast { compute: h.compute },
                None => CallerDtype::Unsupported,
            },
        }
    }

    /// The dtype the kernel computes in, if any.
    pub fn compute(self) -> Option<DType> {
        match self {
            CallerDtype::Kernel(d) | CallerDtype::Downcast { compute: d } => Some(d),
            CallerDtype::Unsupported => None,
        }
    }
}

impl Contract {
    /// Checks the dtype rules on dtypes as the caller passed them (`names`, in parameter order;
    /// see [`CallerDtype::resolve`]), wording violations with those names. Returns the dtypes
    /// the kernel computes in.
    pub fn check_dtypes(&self, op: &str, names: &[&str]) -> Result<Vec<DType>, ContractViolation> {
        let names: Vec<Option<&str>> = names.iter().copied().map(Some).collect();
        Ok(self
            .check_optional_dtypes(op, &names)?
            .into_iter()
            .map(|d| d.unwrap_or(DType::F32))
            .collect())
    }

    /// [`Contract::check_dtypes`] with optional tensors: `None` is a tensor left out, which no
    /// rule constrains (a rule `w = b` with `b` absent holds).
    pub fn check_optional_dtypes(
        &self,
        op: &str,
        names: &[Option<&str>],
    ) -> Result<Vec<Option<DType>>, ContractViolation> {
        let fail = |violation| ContractViolation {
            op: op.to_string(),
            violation: Box::new(violation),
        };
        if names.len() != self.inputs.len() {
            return Err(fail(Violation::TensorCount {
                expected: self.inputs.len(),
                got: names.len(),
            }));
        }
        let resolved: Vec<Option<DType>> = names
            .iter()
            .map(|n| n.and_then(|n| CallerDtype::resolve(n).compute()))
            .collect();
        for rule in self.dtypes {
            let idx = self.index_of(rule.param);
            let Some(name) = names[idx] else {
                continue; // an optional tensor left out
            };
            let actual = resolved[idx];
            match rule.rule {
                DtypeRule::OneOf { allowed } => {
                    if !actual.is_some_and(|d| allowed.contains(&d)) {
                        return Err(fail(Violation::DtypeNotAllowed {
                            param: rule.param,
                            dtype: name.to_string(),
                            allowed,
                        }));
                    }
                }
                DtypeRule::SameAs { param } => {
                    let j = self.index_of(param);
                    let Some(other_name) = names[j] else {
                        continue;
                    };
                    if actual.is_none() || resolved[j] != actual {
                        return Err(fail(Violation::DtypeMismatch {
                            param: rule.param,
                            dtype: name.to_string(),
                            other: param,
                            other_dtype: other_name.to_string(),
                        }));
                    }
                }
            }
        }
        Ok(resolved)
    }

    /// Checks actual tensor arguments (in the order of [`Contract::inputs`]) and returns the
    /// bindings, or the first violation.
    pub fn bind(
        &self,
        op: &str,
        tensors: &[TensorMeta<'_>],
    ) -> Result<Bindings, ContractViolation> {
        let all: Vec<Option<TensorMeta<'_>>> = tensors.iter().copied().map(Some).collect();
        self.bind_optional(op, &all)
    }

    /// [`Contract::bind`] with optional tensors: `None` is a tensor left out, which binds no
    /// symbol and meets no rule.
    pub fn bind_optional(
        &self,
        op: &str,
        tensors: &[Option<TensorMeta<'_>>],
    ) -> Result<Bindings, ContractViolation> {
        self.bind_call(op, tensors, &[])
    }

    /// [`Contract::bind_optional`] with the call's string parameters as `(name, value)` pairs,
    /// which an output shape written as a `match` needs.
    pub fn bind_call(
        &self,
        op: &str,
        tensors: &[Option<TensorMeta<'_>>],
        choices: &[(&'static str, &'static str)],
    ) -> Result<Bindings, ContractViolation> {
        let fail = |violation: Box<Violation>| ContractViolation {
            op: op.to_string(),
            violation,
        };
        let shapes: Vec<Option<Vec<u64>>> = tensors
            .iter()
            .map(|t| t.map(|t| t.shape.to_vec()))
            .collect();
        let mut b = Binder::<u64>::new();
        b.bind_shapes(self, &shapes).map_err(fail)?;
        let names: Vec<Option<&str>> = tensors.iter().map(|t| t.map(|t| t.dtype.name())).collect();
        self.check_optional_dtypes(op, &names)?;
        let bindings = Bindings {
            dims: b.dims,
            rests: b.rests,
            choices: choices.iter().copied().collect(),
        };
        for r in self.requires {
            let (a, c) = (r.lhs.eval(&bindings), r.rhs.eval(&bindings));
            let ok = matches!((a, c), (Some(a), Some(c)) if r.op.holds(a, c));
            if !ok {
                return Err(fail(Box::new(Violation::Requirement {
                    requirement: r.to_string(),
                    symbols: bindings
                        .dims
                        .iter()
                        .map(|(k, v)| (*k, v.to_string()))
                        .collect(),
                })));
            }
        }
        Ok(bindings)
    }

    /// Output shapes and dtypes for bound inputs.
    pub fn outputs(
        &self,
        op: &str,
        b: &Bindings,
        tensors: &[TensorMeta<'_>],
    ) -> Result<Vec<OutputMeta>, ContractViolation> {
        let all: Vec<Option<TensorMeta<'_>>> = tensors.iter().copied().map(Some).collect();
        self.optional_outputs(op, b, &all)
    }

    /// [`Contract::outputs`] with optional tensors (an output's dtype never follows a tensor
    /// that can be left out: the macro rejects that).
    pub fn optional_outputs(
        &self,
        op: &str,
        b: &Bindings,
        tensors: &[Option<TensorMeta<'_>>],
    ) -> Result<Vec<OutputMeta>, ContractViolation> {
        self.outputs
            .iter()
            .map(|o| {
                let param = o.by_choice.map(|m| m.param);
                let dims = o
                    .shape_for(param.and_then(|p| b.choices.get(p).copied()))
                    .ok_or_else(|| ContractViolation {
                        op: op.to_string(),
                        violation: Box::new(Violation::MissingChoice {
                            output: o.name,
                            param: param.unwrap_or_default(),
                        }),
                    })?;
                let mut shape = Vec::new();
                for d in dims {
                    match d {
                        OutDim::Expr { expr } => {
                            let v = expr.eval(b).filter(|v| *v >= 0).ok_or_else(|| {
                                ContractViolation {
                                    op: op.to_string(),
                                    violation: Box::new(Violation::OutputDim {
                                        output: o.name,
                                        expr: expr.to_string(),
                                    }),
                                }
                            })?;
                            shape.push(v as u64);
                        }
                        OutDim::Rest { name } => {
                            shape.extend(b.rests.get(name).into_iter().flatten())
                        }
                    }
                }
                let dtype =
                    self.output_dtype(o.dtype, &|i| tensors[i].map_or(DType::F32, |t| t.dtype));
                Ok(OutputMeta { shape, dtype })
            })
            .collect()
    }

    /// An output's dtype given the tensors' dtypes by parameter index.
    pub(crate) fn output_dtype(
        &self,
        rule: OutputDtype,
        dtype_of: &dyn Fn(usize) -> DType,
    ) -> DType {
        match rule {
            OutputDtype::SameAs { param } => dtype_of(self.index_of(param)),
            OutputDtype::Fixed { dtype } => dtype,
        }
    }

    /// `bind` followed by `outputs`.
    pub fn check(
        &self,
        op: &str,
        tensors: &[TensorMeta<'_>],
    ) -> Result<Vec<OutputMeta>, ContractViolation> {
        let b = self.bind(op, tensors)?;
        self.outputs(op, &b, tensors)
    }

    /// `bind_call` followed by `optional_outputs`.
    pub fn check_call(
        &self,
        op: &str,
        tensors: &[Option<TensorMeta<'_>>],
        choices: &[(&'static str, &'static str)],
    ) -> Result<Vec<OutputMeta>, ContractViolation> {
        let b = self.bind_call(op, tensors, choices)?;
        self.optional_outputs(op, &b, tensors)
    }

    pub(crate) fn index_of(&self, param: &str) -> usize {
        // The macro only emits rules naming declared tensor parameters.
        self.inputs
            .iter()
            .position(|s| s.param == param)
            .expect("contract names a declared tensor parameter")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    static RMS: Contract = Contract {
        inputs: &[
            InputShape {
                param: "x",
                dims: &[DimPattern::Sym { name: "N" }, DimPattern::Sym { name: "D" }],
            },
            InputShape {
                param: "weight",
                dims: &[DimPattern::Sym { name: "D" }],
            },
        ],
        dtypes: &[
            InputDtype {
                param: "x",
                rule: DtypeRule::OneOf {
                    allowed: &[DType::F32, DType::BF16],
                },
            },
            InputDtype {
                param: "weight",
                rule: DtypeRule::SameAs { param: "x" },
            },
        ],
        outputs: &[OutputSpec {
            name: "out",
            saved: false,
            by_choice: None,
            shape: &[
                OutDim::Expr {
                    expr: DimExpr::Sym { name: "N" },
                },
                OutDim::Expr {
                    expr: DimExpr::Binary {
                        op: DimOp::Mul,
                        lhs: &DimExpr::Const { value: 2 },
                        rhs: &DimExpr::Sym { name: "D" },
                    },
                },
            ],
            dtype: OutputDtype::SameAs { param: "x" },
        }],
        requires: &[Requirement {
            lhs: DimExpr::Sym { name: "D" },
            op: CmpOp::Le,
            rhs: DimExpr::Const { value: 16 },
        }],
    };

    fn meta(shape: &[u64], dtype: DType) -> TensorMeta<'_> {
        TensorMeta { shape, dtype }
    }

    const N: OutDim = OutDim::Expr {
        expr: DimExpr::Sym { name: "N" },
    };

    /// `loss = match reduction { "none" | "keep" => [N], _ => [] }` over `x[N, D]`.
    static REDUCING: Contract = Contract {
        inputs: &[InputShape {
            param: "x",
            dims: &[DimPattern::Sym { name: "N" }, DimPattern::Sym { name: "D" }],
        }],
        dtypes: &[],
        outputs: &[OutputSpec {
            name: "loss",
            saved: false,
            by_choice: Some(crate::ShapeMatch {
                param: "reduction",
                cases: &[crate::ShapeCase {
                    values: &["none", "keep"],
                    shape: &[N],
                }],
            }),
            shape: &[],
            dtype: OutputDtype::SameAs { param: "x" },
        }],
        requires: &[],
    };

    #[test]
    fn a_string_parameter_chooses_a_match_output_shape() {
        let x = [Some(meta(&[6, 3], DType::F32))];
        let shape = |value| {
            REDUCING
                .check_call("ce", &x, &[("reduction", value)])
                .unwrap()[0]
                .shape
                .clone()
        };
        assert_eq!(shape("none"), vec![6]);
        assert_eq!(shape("keep"), vec![6]);
        assert_eq!(shape("mean"), Vec::<u64>::new());
        let err = REDUCING.check_call("ce", &x, &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "neuron::ce: output loss has a shape chosen by reduction, but the call gave no reduction"
        );
        assert_eq!(
            REDUCING.to_string(),
            r#"x[N, D] -> loss = match reduction { "none" | "keep" => [N], _ => [] }"#
        );
        let sym = REDUCING
            .bind_symbolic(
                "ce",
                &[Some(vec![
                    crate::symbolic::SymInput::Named("s0".into()),
                    crate::symbolic::SymInput::Known(3),
                ])],
                &[("reduction", "none")],
            )
            .unwrap();
        assert_eq!(
            sym.shapes,
            vec![vec![crate::symbolic::SymExpr::Dim { tensor: 0, axis: 0 }]]
        );
    }

    #[test]
    fn binds_and_computes_outputs() {
        let out = RMS
            .check("rms", &[meta(&[8, 4], DType::F32), meta(&[4], DType::F32)])
            .unwrap();
        assert_eq!(
            out,
            vec![OutputMeta {
                shape: vec![8, 8],
                dtype: DType::F32
            }]
        );
    }

    #[test]
    fn reports_mismatches_in_words() {
        let e = RMS
            .check("rms", &[meta(&[8, 4], DType::F32), meta(&[5], DType::F32)])
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "neuron::rms: weight has shape [5], but the contract weight[D] needs D = 4 (bound by x[N, D] = [8, 4])"
        );
        let e = RMS
            .check("rms", &[meta(&[8], DType::F32), meta(&[5], DType::F32)])
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "neuron::rms: x has rank 1 (shape [8]), but the contract x[N, D] needs rank 2"
        );
        let e = RMS
            .check("rms", &[meta(&[8, 4], DType::F16), meta(&[4], DType::F16)])
            .unwrap_err();
        assert_eq!(e.kind(), ViolationKind::Dtype);
        assert_eq!(
            e.to_string(),
            "neuron::rms: x has dtype torch.float16 (f16), but the contract allows x in {f32, bf16}"
        );
        let e = RMS
            .check("rms", &[meta(&[8, 4], DType::F32), meta(&[4], DType::BF16)])
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "neuron::rms: weight has dtype torch.bfloat16, but the contract needs weight = x (x has dtype torch.float32)"
        );
        let e = RMS
            .check(
                "rms",
                &[meta(&[8, 32], DType::F32), meta(&[32], DType::F32)],
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "neuron::rms: the contract requires D <= 16, but D = 32, N = 8"
        );
    }

    #[test]
    fn rest_patterns_bind_sequences() {
        static ADD: Contract = Contract {
            inputs: &[
                InputShape {
                    param: "x",
                    dims: &[DimPattern::Rest { name: "S" }],
                },
                InputShape {
                    param: "y",
                    dims: &[DimPattern::Rest { name: "S" }],
                },
            ],
            dtypes: &[],
            outputs: &[OutputSpec {
                name: "out",
                saved: false,
                by_choice: None,
                shape: &[OutDim::Rest { name: "S" }],
                dtype: OutputDtype::Fixed { dtype: DType::F32 },
            }],
            requires: &[],
        };
        let out = ADD
            .check(
                "add",
                &[meta(&[2, 3, 4], DType::F32), meta(&[2, 3, 4], DType::F32)],
            )
            .unwrap();
        assert_eq!(out[0].shape, vec![2, 3, 4]);
        let e = ADD
            .check(
                "add",
                &[meta(&[2, 3], DType::F32), meta(&[3, 2], DType::F32)],
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "neuron::add: y has shape [3, 2], but the contract y[..S] needs ..S = [2, 3] (bound by x[..S] = [2, 3])"
        );
    }
}
