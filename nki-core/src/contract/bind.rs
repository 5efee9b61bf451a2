//! Checking actual arguments against a [`Contract`]: binding dimension symbols from input
//! shapes, reporting the first mismatch in words, and computing output shapes and dtypes.

use super::{Contract, DimPattern, DtypeRule, InputShape, OutDim, OutputDtype};
use crate::dtype::DType;
use std::collections::BTreeMap;

/// Symbols bound from actual input shapes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bindings {
    /// Single-dimension symbols.
    pub dims: BTreeMap<&'static str, u64>,
    /// `..S` sequence symbols.
    pub rests: BTreeMap<&'static str, Vec<u64>>,
    /// Where each symbol was bound: `(param, pattern text, actual shape)`.
    origin: BTreeMap<&'static str, (&'static str, String, Vec<u64>)>,
}

/// Which Python exception a contract violation maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViolationKind {
    /// A shape, rank or requirement problem (`ValueError`).
    Shape,
    /// A dtype problem (`TypeError`).
    Dtype,
}

/// A contract violation, worded for the person who called the op.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("neuron::{op}: {message}")]
pub struct ContractViolation {
    /// The op's name.
    pub op: String,
    /// Shape or dtype.
    pub kind: ViolationKind,
    /// What was wrong, naming the argument and what the contract expected.
    pub message: String,
}

/// An actual tensor argument, as the contract sees it.
#[derive(Clone, Copy, Debug)]
pub struct TensorMeta<'a> {
    /// Its shape.
    pub shape: &'a [u64],
    /// Its dtype.
    pub dtype: DType,
}

fn shape_text(shape: &[u64]) -> String {
    format!("{shape:?}")
}

fn pattern_text(dims: &[DimPattern]) -> String {
    let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

/// The outputs a contract computes for given inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputMeta {
    /// Output shape.
    pub shape: Vec<u64>,
    /// Output dtype.
    pub dtype: DType,
}

impl Contract {
    /// Checks actual tensor arguments (in the order of [`Contract::inputs`]) and returns the
    /// bindings, or the first violation in words.
    pub fn bind(
        &self,
        op: &str,
        tensors: &[TensorMeta<'_>],
    ) -> Result<Bindings, ContractViolation> {
        let fail = |kind, message: String| ContractViolation {
            op: op.to_string(),
            kind,
            message,
        };
        if tensors.len() != self.inputs.len() {
            return Err(fail(
                ViolationKind::Shape,
                format!(
                    "expected {} tensor arguments, got {}",
                    self.inputs.len(),
                    tensors.len()
                ),
            ));
        }
        let mut b = Bindings::default();
        for (spec, t) in self.inputs.iter().zip(tensors) {
            bind_shape(spec, t.shape, &mut b).map_err(|m| fail(ViolationKind::Shape, m))?;
        }
        for rule in self.dtypes {
            let idx = self.index_of(rule.param);
            let actual = tensors[idx].dtype;
            match rule.rule {
                DtypeRule::OneOf { allowed } => {
                    if !allowed.contains(&actual) {
                        let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
                        return Err(fail(
                            ViolationKind::Dtype,
                            format!(
                                "{} has dtype {actual}, but the contract allows {} in {{{}}}",
                                rule.param,
                                rule.param,
                                names.join(", ")
                            ),
                        ));
                    }
                }
                DtypeRule::SameAs { param } => {
                    let other = tensors[self.index_of(param)].dtype;
                    if other != actual {
                        return Err(fail(
                            ViolationKind::Dtype,
                            format!(
                                "{} has dtype {actual}, but the contract needs {} = {param} ({param} has dtype {other})",
                                rule.param, rule.param
                            ),
                        ));
                    }
                }
            }
        }
        for r in self.requires {
            let (a, c) = (r.lhs.eval(&b), r.rhs.eval(&b));
            let ok = matches!((a, c), (Some(a), Some(c)) if r.op.holds(a, c));
            if !ok {
                let symbols: Vec<String> =
                    b.dims.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                return Err(fail(
                    ViolationKind::Shape,
                    format!(
                        "the contract requires {}, but {}",
                        r.text,
                        symbols.join(", ")
                    ),
                ));
            }
        }
        Ok(b)
    }

    /// Output shapes and dtypes for bound inputs.
    pub fn outputs(
        &self,
        op: &str,
        b: &Bindings,
        tensors: &[TensorMeta<'_>],
    ) -> Result<Vec<OutputMeta>, ContractViolation> {
        self.outputs
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let mut shape = Vec::new();
                for d in o.shape {
                    match d {
                        OutDim::Expr { expr } => {
                            let v = expr.eval(b).filter(|v| *v >= 0).ok_or_else(|| ContractViolation {
                                op: op.to_string(),
                                kind: ViolationKind::Shape,
                                message: format!("output {i} dimension {expr} is not a valid size for these inputs"),
                            })?;
                            shape.push(v as u64);
                        }
                        OutDim::Rest { name } => shape.extend(b.rests.get(name).into_iter().flatten()),
                    }
                }
                let dtype = match o.dtype {
                    OutputDtype::SameAs { param } => tensors[self.index_of(param)].dtype,
                    OutputDtype::Fixed { dtype } => dtype,
                };
                Ok(OutputMeta { shape, dtype })
            })
            .collect()
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

    fn index_of(&self, param: &str) -> usize {
        // The macro only emits rules naming declared tensor parameters.
        self.inputs
            .iter()
            .position(|s| s.param == param)
            .expect("contract names a declared tensor parameter")
    }
}

fn bind_shape(spec: &InputShape, shape: &[u64], b: &mut Bindings) -> Result<(), String> {
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
    let pat = pattern_text(spec.dims);
    if !rank_ok {
        let need = if rest_at.is_some() {
            format!("rank >= {fixed}")
        } else {
            format!("rank {fixed}")
        };
        return Err(format!(
            "{} has rank {} (shape {}), but the contract {}{pat} needs {need}",
            spec.param,
            shape.len(),
            shape_text(shape),
            spec.param
        ));
    }
    let rest_len = shape.len() - fixed;
    let mut pos = 0;
    for d in spec.dims {
        match *d {
            DimPattern::Rest { name } => {
                let seq = shape[pos..pos + rest_len].to_vec();
                pos += rest_len;
                if let Some(prev) = b.rests.get(name) {
                    if *prev != seq {
                        let (p, ppat, pshape) = &b.origin[name];
                        return Err(format!(
                            "{} has shape {}, but the contract {}{pat} needs ..{name} = {} (bound by {p}{ppat} = {})",
                            spec.param,
                            shape_text(shape),
                            spec.param,
                            shape_text(prev),
                            shape_text(pshape)
                        ));
                    }
                } else {
                    b.rests.insert(name, seq);
                    b.origin
                        .insert(name, (spec.param, pat.clone(), shape.to_vec()));
                }
            }
            DimPattern::Const { value } => {
                if shape[pos] != value {
                    return Err(format!(
                        "{} has shape {}, but the contract {}{pat} needs dimension {pos} = {value}",
                        spec.param,
                        shape_text(shape),
                        spec.param
                    ));
                }
                pos += 1;
            }
            DimPattern::Sym { name } => {
                let v = shape[pos];
                pos += 1;
                if let Some(&prev) = b.dims.get(name) {
                    if prev != v {
                        let (p, ppat, pshape) = &b.origin[name];
                        return Err(format!(
                            "{} has shape {}, but the contract {}{pat} needs {name} = {prev} (bound by {p}{ppat} = {})",
                            spec.param,
                            shape_text(shape),
                            spec.param,
                            shape_text(pshape)
                        ));
                    }
                } else {
                    b.dims.insert(name, v);
                    b.origin
                        .insert(name, (spec.param, pat.clone(), shape.to_vec()));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::*;

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
            text: "D <= 16",
        }],
    };

    fn meta(shape: &[u64], dtype: DType) -> TensorMeta<'_> {
        TensorMeta { shape, dtype }
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
        assert_eq!(e.kind, ViolationKind::Dtype);
        assert_eq!(
            e.to_string(),
            "neuron::rms: x has dtype f16, but the contract allows x in {f32, bf16}"
        );
        let e = RMS
            .check("rms", &[meta(&[8, 4], DType::F32), meta(&[4], DType::BF16)])
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "neuron::rms: weight has dtype bf16, but the contract needs weight = x (x has dtype f32)"
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
