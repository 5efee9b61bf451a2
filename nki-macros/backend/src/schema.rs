//! The torch op schema string of a kernel, e.g.
//! `rmsnorm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor`.
//!
//! Defaults are printed the way Python prints them (`repr`), because torch parses the schema
//! and compares defaults with the values Python passes.

use crate::scalar::ScalarValue;
use crate::signature::{KernelFn, ParamKind, unraw};

/// The schema of `f` as the torch op `name` returning `outputs` tensors.
pub fn schema(f: &KernelFn) -> String {
    schema_as(f, &f.name(), f.outputs)
}

/// The schema of `f` under another op name, returning `outputs` tensors.
pub fn schema_as(f: &KernelFn, name: &str, outputs: usize) -> String {
    let args: Vec<String> = f
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let name = unraw(&p.name);
            // `=None` only where every later parameter has a default too (schemas, like Python,
            // put defaulted parameters last).
            let rest_default = f.params[i + 1..].iter().all(|q| q.kind.has_default());
            match p.kind {
                ParamKind::Tensor => format!("Tensor {name}"),
                ParamKind::OptionalTensor if rest_default => format!("Tensor? {name}=None"),
                ParamKind::OptionalTensor => format!("Tensor? {name}"),
                ParamKind::Scalar {
                    ty,
                    default,
                    optional,
                } => {
                    let ty = ty.class().schema_type();
                    match default {
                        _ if optional && rest_default => format!("{ty}? {name}=None"),
                        _ if optional => format!("{ty}? {name}"),
                        Some(ScalarValue::Choice(c)) => format!("{ty} {name}='{}'", p.choices[c]),
                        Some(v) => format!("{ty} {name}={}", python_value(v)),
                        None => format!("{ty} {name}"),
                    }
                }
            }
        })
        .collect();
    let ret = match outputs {
        1 => "Tensor".to_string(),
        n => format!("({})", vec!["Tensor"; n].join(", ")),
    };
    format!("{name}({}) -> {ret}", args.join(", "))
}

/// A default value as Python's `repr` prints it.
pub fn python_value(v: ScalarValue) -> String {
    match v {
        ScalarValue::Float(x) => python_float_repr(x),
        ScalarValue::Int(i) => i.to_string(),
        ScalarValue::Bool(true) => "True".to_string(),
        ScalarValue::Bool(false) => "False".to_string(),
        ScalarValue::Choice(i) => format!("<choice {i}>"),
    }
}

/// `repr(float)`: the shortest round-tripping digits, in positional notation for decimal
/// exponents from -4 to 15 (always with a `.`), scientific with a signed two-digit exponent
/// otherwise (`1e-06`, `1e+16`).
pub fn python_float_repr(x: f64) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci
        .split_once('e')
        .expect("`{:e}` always prints an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` prints an integer exponent");
    if (-4..16).contains(&exp) {
        let fixed = x.to_string();
        if fixed.contains('.') {
            fixed
        } else {
            format!("{fixed}.0")
        }
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::analyze;

    #[test]
    fn floats_print_like_python_repr() {
        for (x, repr) in [
            (1e-6, "1e-06"),
            (0.5, "0.5"),
            (1.0, "1.0"),
            (-2.5e-5, "-2.5e-05"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e300, "1.5e+300"),
            (0.1, "0.1"),
            (123.456, "123.456"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (3.0, "3.0"),
            (1e-300, "1e-300"),
        ] {
            assert_eq!(python_float_repr(x), repr, "{x}");
        }
    }

    #[test]
    fn builds_torch_schemas() {
        let f = analyze(
            syn::parse_str(
                "/// D.\nfn rmsnorm(x: &Hbm, weight: &Hbm, #[default(1e-6)] eps: f32) -> Hbm { todo!() }",
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            schema(&f),
            "rmsnorm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor"
        );
        let f = analyze(
            syn::parse_str(
                "/// D.\nfn r#split(x: &Hbm, k: usize, #[default(-3)] j: i64, #[default(false)] b: bool, \
                 #[default(2)] s: f64) -> (Hbm, Hbm) { todo!() }",
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            schema(&f),
            "split(Tensor x, int k, int j=-3, bool b=False, float s=2.0) -> (Tensor, Tensor)"
        );
        let f = analyze(
            syn::parse_str(
                "/// D.\nfn attend(q: &Hbm, s: Option<f32>, causal: bool, n: Option<usize>, \
                 #[default(true)] b: bool) -> Hbm { todo!() }",
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            schema(&f),
            "attend(Tensor q, float? s, bool causal, int? n=None, bool b=True) -> Tensor"
        );
    }
}
