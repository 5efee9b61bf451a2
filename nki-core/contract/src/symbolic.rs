//! Contracts on symbolic shapes (`torch.compile(dynamic=True)`): the same binder as concrete
//! checks, run on dimensions that may be unknown sizes. It returns each output dimension as an
//! expression over input dimensions, and the equalities between unknown sizes that the contract
//! needs, each with the violation message (worded here) to raise if it fails. The caller (the
//! Python fake kernel) only evaluates these on its `SymInt`s; no contract logic lives there.

use crate::bind::{Binder, Dim};
use crate::violation::ContractViolation;
use crate::violation::Violation;
use crate::{CmpOp, Contract, DType, DimExpr, DimOp, OutDim};
use serde::Serialize;

/// A dimension of an actual input under symbolic shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SymInput {
    /// A concrete size.
    Known(u64),
    /// An unknown size, named as the caller prints it (`s0`).
    Named(String),
}

/// An integer expression over input dimensions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SymExpr {
    /// A constant.
    Const {
        /// The value.
        value: i64,
    },
    /// Dimension `axis` of tensor argument `tensor` (tensor parameters in order).
    Dim {
        /// Which tensor argument.
        tensor: usize,
        /// Which dimension.
        axis: usize,
    },
    /// A binary operation (`/` is floor division, `%` its remainder).
    Binary {
        /// The operator.
        op: DimOp,
        /// Left operand.
        lhs: Box<SymExpr>,
        /// Right operand.
        rhs: Box<SymExpr>,
    },
}

/// A comparison the contract needs between sizes that are not known yet: an equality two
/// patterns imply, or a `require(...)` clause.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SymCheck {
    /// The comparison (`eq` for equalities).
    pub op: CmpOp,
    /// Left side.
    pub lhs: SymExpr,
    /// Right side.
    pub rhs: SymExpr,
    /// The violation to raise if they differ, e.g. `neuron::add: y has shape [s0, s2], but ...`.
    pub message: String,
}

/// Output shapes as expressions, and the checks to assert.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SymbolicOutputs {
    /// One shape per output, each dimension an expression over input dimensions.
    pub shapes: Vec<Vec<SymExpr>>,
    /// Equalities between unknown sizes.
    pub checks: Vec<SymCheck>,
}

#[derive(Clone, Debug)]
struct SymDim {
    known: Option<u64>,
    text: String,
    expr: SymExpr,
}

impl Dim for SymDim {
    fn text(&self) -> String {
        self.text.clone()
    }

    fn value(&self) -> Option<u64> {
        self.known
    }
}

fn substitute(e: &DimExpr, dims: &std::collections::BTreeMap<&'static str, SymDim>) -> SymExpr {
    match e {
        DimExpr::Sym { name } => dims[name].expr.clone(),
        DimExpr::Const { value } => SymExpr::Const { value: *value },
        DimExpr::Binary { op, lhs, rhs } => {
            let (l, r) = (substitute(lhs, dims), substitute(rhs, dims));
            if let (SymExpr::Const { value: a }, SymExpr::Const { value: b }) = (&l, &r) {
                let folded = match op {
                    DimOp::Add => a.checked_add(*b),
                    DimOp::Sub => a.checked_sub(*b),
                    DimOp::Mul => a.checked_mul(*b),
                    DimOp::Div => (*b != 0).then(|| a.div_euclid(*b)),
                    DimOp::Rem => (*b != 0).then(|| a.rem_euclid(*b)),
                };
                if let Some(value) = folded {
                    return SymExpr::Const { value };
                }
            }
            SymExpr::Binary {
                op: *op,
                lhs: Box::new(l),
                rhs: Box::new(r),
            }
        }
    }
}

impl Contract {
    /// Binds symbolic input shapes (tensor parameters in order). Violations that the known sizes
    /// already decide are returned as errors; the rest become [`SymCheck`]s, `require(...)`
    /// clauses included (asserted on the unknown sizes, which does not specialise them).
    /// `choices` are the call's string parameters, `(name, value)`, as for
    /// [`Contract::bind_call`].
    pub fn bind_symbolic(
        &self,
        op: &str,
        shapes: &[Option<Vec<SymInput>>],
        choices: &[(&'static str, &'static str)],
    ) -> Result<SymbolicOutputs, ContractViolation> {
        let dims: Vec<Option<Vec<SymDim>>> = shapes
            .iter()
            .enumerate()
            .map(|(t, shape)| {
                let shape = shape.as_ref()?;
                Some(
                    shape
                        .iter()
                        .enumerate()
                        .map(|(axis, d)| match d {
                            SymInput::Known(v) => SymDim {
                                known: Some(*v),
                                text: v.to_string(),
                                expr: SymExpr::Const { value: *v as i64 },
                            },
                            SymInput::Named(name) => SymDim {
                                known: None,
                                text: name.clone(),
                                expr: SymExpr::Dim { tensor: t, axis },
                            },
                        })
                        .collect(),
                )
            })
            .collect();
        let mut b = Binder::<SymDim>::new();
        b.bind_shapes(self, &dims)
            .map_err(|violation| ContractViolation {
                op: op.to_string(),
                violation,
            })?;
        let checks: Vec<SymCheck> = b
            .deferred
            .iter()
            .map(|(a, other, violation)| SymCheck {
                op: CmpOp::Eq,
                lhs: a.expr.clone(),
                rhs: match other {
                    Ok(d) => d.expr.clone(),
                    Err(lit) => SymExpr::Const { value: *lit as i64 },
                },
                message: ContractViolation {
                    op: op.to_string(),
                    violation: violation.clone(),
                }
                .to_string(),
            })
            .collect();
        let shapes = self
            .outputs
            .iter()
            .map(|o| {
                let param = o.by_choice.map(|m| m.param);
                let value = param
                    .and_then(|p| choices.iter().find(|c| c.0 == p))
                    .map(|c| c.1);
                let dims = o.shape_for(value).ok_or_else(|| ContractViolation {
                    op: op.to_string(),
                    violation: Box::new(Violation::MissingChoice {
                        output: o.name,
                        param: param.unwrap_or_default(),
                    }),
                })?;
                let mut shape = Vec::new();
                for d in dims {
                    match d {
                        OutDim::Expr { expr } => shape.push(substitute(expr, &b.dims)),
                        OutDim::Rest { name } => {
                            shape.extend(b.rests[name].iter().map(|d| d.expr.clone()))
                        }
                    }
                }
                Ok(shape)
            })
            .collect::<Result<_, ContractViolation>>()?;
        let mut checks = checks;
        checks.extend(self.symbolic_requirements(op, &b.dims)?);
        Ok(SymbolicOutputs { shapes, checks })
    }

    /// The `require(...)` clauses on symbolic bindings: decided now when both sides are known
    /// (a violation is an error), otherwise a check for the caller to assert on its `SymInt`s.
    fn symbolic_requirements(
        &self,
        op: &str,
        dims: &std::collections::BTreeMap<&'static str, SymDim>,
    ) -> Result<Vec<SymCheck>, ContractViolation> {
        let mut checks = Vec::new();
        for r in self.requires {
            let violation = || ContractViolation {
                op: op.to_string(),
                violation: Box::new(Violation::Requirement {
                    requirement: r.to_string(),
                    symbols: dims.iter().map(|(k, d)| (*k, d.text.clone())).collect(),
                }),
            };
            let (lhs, rhs) = (substitute(&r.lhs, dims), substitute(&r.rhs, dims));
            if let (SymExpr::Const { value: a }, SymExpr::Const { value: c }) = (&lhs, &rhs) {
                if !r.op.holds(*a, *c) {
                    return Err(violation());
                }
                continue;
            }
            checks.push(SymCheck {
                op: r.op,
                lhs,
                rhs,
                message: violation().to_string(),
            });
        }
        Ok(checks)
    }

    /// Output dtypes when the tensor parameters compute in `dtypes` (in order).
    pub fn output_dtypes(&self, dtypes: &[DType]) -> Vec<DType> {
        self.outputs
            .iter()
            .map(|o| self.output_dtype(o.dtype, &|i| dtypes[i]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::*;

    static ADD: Contract = Contract {
        inputs: &[
            InputShape {
                param: "x",
                dims: &[
                    DimPattern::Rest { name: "S" },
                    DimPattern::Sym { name: "D" },
                ],
            },
            InputShape {
                param: "y",
                dims: &[
                    DimPattern::Rest { name: "S" },
                    DimPattern::Const { value: 4 },
                ],
            },
        ],
        dtypes: &[],
        outputs: &[OutputSpec {
            name: "out",
            saved: false,
            by_choice: None,
            shape: &[
                OutDim::Rest { name: "S" },
                OutDim::Expr {
                    expr: DimExpr::Binary {
                        op: DimOp::Mul,
                        lhs: &DimExpr::Const { value: 2 },
                        rhs: &DimExpr::Sym { name: "D" },
                    },
                },
            ],
            dtype: OutputDtype::Fixed { dtype: DType::F32 },
        }],
        requires: &[],
    };

    fn named(s: &str) -> SymInput {
        SymInput::Named(s.to_string())
    }

    #[test]
    fn outputs_are_expressions_over_input_dims_and_unknown_equalities_are_checks() {
        let out = ADD
            .bind_symbolic(
                "add",
                &[
                    Some(vec![named("s0"), SymInput::Known(3), named("s1")]),
                    Some(vec![named("s2"), SymInput::Known(3), named("s3")]),
                ],
                &[],
            )
            .unwrap();
        let dim = |tensor, axis| SymExpr::Dim { tensor, axis };
        assert_eq!(
            out.shapes,
            vec![vec![
                dim(0, 0),
                SymExpr::Const { value: 3 },
                SymExpr::Binary {
                    op: DimOp::Mul,
                    lhs: Box::new(SymExpr::Const { value: 2 }),
                    rhs: Box::new(dim(0, 2)),
                }
            ]]
        );
        let msgs: Vec<(&SymExpr, &SymExpr, &str)> = out
            .checks
            .iter()
            .map(|c| (&c.lhs, &c.rhs, c.message.as_str()))
            .collect();
        assert_eq!(
            msgs,
            vec![
                (
                    &dim(1, 0),
                    &dim(0, 0),
                    "neuron::add: y has shape [s2, 3, s3], but the contract y[..S, 4] needs ..S = [s0, 3] (bound by x[..S, D] = [s0, 3, s1])"
                ),
                (
                    &dim(1, 2),
                    &SymExpr::Const { value: 4 },
                    "neuron::add: y has shape [s2, 3, s3], but the contract y[..S, 4] needs dimension 2 = 4"
                ),
            ]
        );
    }

    #[test]
    fn known_mismatches_are_errors_now() {
        let err = ADD
            .bind_symbolic(
                "add",
                &[
                    Some(vec![named("s0"), SymInput::Known(3)]),
                    Some(vec![named("s0"), SymInput::Known(5)]),
                ],
                &[],
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "neuron::add: y has shape [s0, 5], but the contract y[..S, 4] needs dimension 1 = 4"
        );
        let err = ADD
            .bind_symbolic("add", &[Some(vec![]), Some(vec![])], &[])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "neuron::add: x has rank 0 (shape []), but the contract x[..S, D] needs rank >= 1"
        );
    }

    static REQUIRING: Contract = Contract {
        inputs: ADD.inputs,
        dtypes: &[],
        outputs: ADD.outputs,
        requires: &[Requirement {
            lhs: DimExpr::Sym { name: "D" },
            op: CmpOp::Le,
            rhs: DimExpr::Const { value: 16 },
        }],
    };

    #[test]
    fn requirements_are_checks_on_unknown_sizes_and_errors_on_known_ones() {
        let shapes = |d: SymInput| {
            vec![
                Some(vec![named("s0"), d]),
                Some(vec![named("s0"), SymInput::Known(4)]),
            ]
        };
        let out = REQUIRING
            .bind_symbolic("r", &shapes(named("s1")), &[])
            .unwrap();
        let req = out
            .checks
            .iter()
            .find(|c| c.op == CmpOp::Le)
            .expect("a require check");
        assert_eq!(req.lhs, SymExpr::Dim { tensor: 0, axis: 1 });
        assert_eq!(req.rhs, SymExpr::Const { value: 16 });
        assert_eq!(
            req.message,
            "neuron::r: the contract requires D <= 16, but D = s1"
        );
        assert!(
            REQUIRING
                .bind_symbolic("r", &shapes(SymInput::Known(8)), &[])
                .is_ok()
        );
        let err = REQUIRING
            .bind_symbolic("r", &shapes(SymInput::Known(32)), &[])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "neuron::r: the contract requires D <= 16, but D = 32"
        );
    }
}
