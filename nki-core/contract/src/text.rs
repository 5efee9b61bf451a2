//! Contracts rendered to text, in the notation of the `#[kernel]` attribute: every message,
//! the manifest's `contract_text`, the CLI and the macro's `require` text print through here.

use crate::{CmpOp, Contract, DimExpr, DimPattern, OutDim, OutputDtype, Requirement};
use std::fmt;

impl fmt::Display for DimExpr {
    /// Prints the expression with only the parentheses its meaning needs (`(K + 127) / 128`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimExpr::Sym { name } => f.write_str(name),
            DimExpr::Const { value } => write!(f, "{value}"),
            DimExpr::Binary { op, lhs, rhs } => {
                let prec = |e: &DimExpr| match e {
                    DimExpr::Binary { op, .. } => op.precedence(),
                    _ => u8::MAX,
                };
                if prec(lhs) < op.precedence() {
                    write!(f, "({lhs})")?;
                } else {
                    write!(f, "{lhs}")?;
                }
                write!(f, " {} ", op.symbol())?;
                if prec(rhs) <= op.precedence() {
                    write!(f, "({rhs})")
                } else {
                    write!(f, "{rhs}")
                }
            }
        }
    }
}

impl fmt::Display for DimPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimPattern::Sym { name } => f.write_str(name),
            DimPattern::Const { value } => write!(f, "{value}"),
            DimPattern::Rest { name } => write!(f, "..{name}"),
        }
    }
}

impl fmt::Display for OutDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutDim::Expr { expr } => write!(f, "{expr}"),
            OutDim::Rest { name } => write!(f, "..{name}"),
        }
    }
}

impl fmt::Display for CmpOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.symbol())
    }
}

impl fmt::Display for Requirement {
    /// `D <= 16384`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.lhs, self.op, self.rhs)
    }
}

/// `[N, D]`.
pub(crate) fn list_text<T: fmt::Display>(items: &[T]) -> String {
    let parts: Vec<String> = items.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// A pattern as written: `[..B, D]`.
pub(crate) fn pattern_text(dims: &[DimPattern]) -> String {
    list_text(dims)
}

impl fmt::Display for Contract {
    /// The shape contract as the attribute writes it, with output dtypes and requirements:
    /// `x[..B, D], weight[D] -> (y[..B, D], saved rstd[..B]), require(D <= 16384)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ins: Vec<String> = self
            .inputs
            .iter()
            .map(|i| format!("{}{}", i.param, pattern_text(i.dims)))
            .collect();
        let outs: Vec<String> = self
            .outputs
            .iter()
            .map(|o| {
                let saved = if o.saved { "saved " } else { "" };
                match &o.by_choice {
                    None => format!("{saved}{}{}", o.name, list_text(o.shape)),
                    Some(m) => {
                        let arms: Vec<String> = m
                            .cases
                            .iter()
                            .map(|c| {
                                let values: Vec<String> =
                                    c.values.iter().map(|v| format!("{v:?}")).collect();
                                format!("{} => {}", values.join(" | "), list_text(c.shape))
                            })
                            .chain([format!("_ => {}", list_text(o.shape))])
                            .collect();
                        format!(
                            "{saved}{} = match {} {{ {} }}",
                            o.name,
                            m.param,
                            arms.join(", ")
                        )
                    }
                }
            })
            .collect();
        write!(f, "{} -> ", ins.join(", "))?;
        if outs.len() == 1 {
            f.write_str(&outs[0])?;
        } else {
            write!(f, "({})", outs.join(", "))?;
        }
        for r in self.requires {
            write!(f, ", require({r})")?;
        }
        Ok(())
    }
}

impl Contract {
    /// The dtype contract as the attribute writes it: `x in {f32, bf16}, weight = x -> (x, f32)`.
    pub fn dtype_text(&self) -> String {
        let rules: Vec<String> = self
            .dtypes
            .iter()
            .map(|r| match r.rule {
                crate::DtypeRule::OneOf { allowed } => {
                    let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
                    format!("{} in {{{}}}", r.param, names.join(", "))
                }
                crate::DtypeRule::SameAs { param } => format!("{} = {param}", r.param),
            })
            .collect();
        let outs: Vec<String> = self
            .outputs
            .iter()
            .map(|o| match o.dtype {
                OutputDtype::SameAs { param } => param.to_string(),
                OutputDtype::Fixed { dtype } => dtype.name().to_string(),
            })
            .collect();
        let outs = if outs.len() == 1 {
            outs[0].clone()
        } else {
            format!("({})", outs.join(", "))
        };
        format!("{} -> {outs}", rules.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use crate::*;

    static TWO_D: DimExpr = DimExpr::Binary {
        op: DimOp::Mul,
        lhs: &DimExpr::Const { value: 2 },
        rhs: &DimExpr::Sym { name: "D" },
    };

    #[test]
    fn expressions_print_with_minimal_parentheses() {
        static SUM: DimExpr = DimExpr::Binary {
            op: DimOp::Add,
            lhs: &DimExpr::Sym { name: "K" },
            rhs: &DimExpr::Const { value: 127 },
        };
        static CEIL: DimExpr = DimExpr::Binary {
            op: DimOp::Div,
            lhs: &SUM,
            rhs: &DimExpr::Const { value: 128 },
        };
        static NESTED: DimExpr = DimExpr::Binary {
            op: DimOp::Sub,
            lhs: &DimExpr::Sym { name: "N" },
            rhs: &SUM,
        };
        assert_eq!(TWO_D.to_string(), "2 * D");
        assert_eq!(CEIL.to_string(), "(K + 127) / 128");
        assert_eq!(NESTED.to_string(), "N - (K + 127)");
    }

    #[test]
    fn contracts_print_as_the_attribute_writes_them() {
        static C: Contract = Contract {
            inputs: &[
                InputShape {
                    param: "x",
                    dims: &[
                        DimPattern::Rest { name: "B" },
                        DimPattern::Sym { name: "D" },
                    ],
                },
                InputShape {
                    param: "w",
                    dims: &[DimPattern::Const { value: 4 }],
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
                    param: "w",
                    rule: DtypeRule::SameAs { param: "x" },
                },
            ],
            outputs: &[
                OutputSpec {
                    name: "y",
                    saved: false,
                    by_choice: None,
                    shape: &[OutDim::Rest { name: "B" }, OutDim::Expr { expr: TWO_D }],
                    dtype: OutputDtype::SameAs { param: "x" },
                },
                OutputSpec {
                    name: "r",
                    saved: true,
                    by_choice: None,
                    shape: &[OutDim::Rest { name: "B" }],
                    dtype: OutputDtype::Fixed { dtype: DType::F32 },
                },
            ],
            requires: &[Requirement {
                lhs: DimExpr::Sym { name: "D" },
                op: CmpOp::Le,
                rhs: DimExpr::Const { value: 16 },
            }],
        };
        assert_eq!(
            C.to_string(),
            "x[..B, D], w[4] -> (y[..B, 2 * D], saved r[..B]), require(D <= 16)"
        );
        assert_eq!(C.dtype_text(), "x in {f32, bf16}, w = x -> (x, f32)");
    }
}
