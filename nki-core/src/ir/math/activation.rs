//! The scalar engine's activation functions (`nisa.activation(op=...)`,
//! `nki.api.shared.rst`'s "Supported Activation Functions" table), declared once with their
//! `nl` names and their fp32 semantics.
//!
//! The device approximates each with piecewise polynomials that are valid on the input range
//! the `nki_spec` table gives; the simulator computes the functions themselves (in fp32, or in
//! f64 rounded once where fp32 would lose accuracy), on every input. Outside a function's valid
//! range the device gives invalid results (`sin` extrapolates its polynomial); the simulator
//! does not model that.

nl_enum! {
    /// Scalar-engine activation functions.
    pub enum ActFn {
    /// `x`
    Identity = "copy",
    /// `x²`
    Square = "square",
    /// `σ(x) = 1/(1 + e^−x)`
    Sigmoid = "sigmoid",
    /// `max(x, 0)`
    Relu = "relu",
    /// Parametric ReLU: `x` for `x > 0`, else `α·x`, the slope `α` being `activate2`'s
    /// `relu_param` ([`ActFn::apply_with`]); `activation`, which has no `relu_param`, applies it
    /// with `α = 0` (a ReLU).
    Prelu = "prelu",
    /// GELU: `x · Φ(x) = x/2 · (1 + erf(x/√2))`.
    Gelu = "gelu",
    /// The derivative of [`ActFn::Gelu`]: `Φ(x) + x · φ(x)`.
    GeluDx = "gelu_dx",
    /// GELU, tanh approximation: `x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`.
    GeluTanh = "gelu_apprx_tanh",
    /// GELU, sigmoid approximation: `x · σ(1.702 x)` (the docs name it without a formula;
    /// this is the usual one).
    GeluSigmoid = "gelu_apprx_sigmoid",
    /// The derivative of [`ActFn::GeluSigmoid`]: `σ(1.702 x) · (1 + 1.702 x · (1 − σ(1.702 x)))`.
    GeluSigmoidDx = "gelu_apprx_sigmoid_dx",
    /// `x·σ(x)`
    Silu = "silu",
    /// The derivative of [`ActFn::Silu`]: `σ(x) · (1 + x · (1 − σ(x)))`.
    SiluDx = "silu_dx",
    /// `tanh x`
    Tanh = "tanh",
    /// `ln(1 + eˣ)`
    Softplus = "softplus",
    /// `x · tanh(softplus(x))`
    Mish = "mish",
    /// `erf x`
    Erf = "erf",
    /// The derivative of [`ActFn::Erf`]: `2/√π · e^(−x²)`.
    ErfDx = "erf_dx",
    /// `eˣ`
    Exp = "exp",
    /// `ln x`
    Log = "log",
    /// `sin x`
    Sin = "sin",
    /// `arctan x`
    Arctan = "arctan",
    /// `√x`
    Sqrt = "sqrt",
    /// `1/√x`
    Rsqrt = "rsqrt",
    /// `1/x`
    Reciprocal = "reciprocal",
    /// `−1`, `0` or `1` by the sign of `x` (`0` for ±0, NaN for NaN)
    Sign = "sign",
    /// `|x|`
    Abs = "abs",
    }
}

/// `−2u = −2·√(2/π)·(x + 0.044715 x³)`, the exponent of [`ActFn::GeluTanh`]'s `x / (1 + e^−2u)`
/// (one expression, so the row loop and the scalar give the same bits).
#[inline(always)]
pub(crate) fn gelu_tanh_exponent(x: f32) -> f32 {
    const C: f32 = 0.797_884_6; // √(2/π) in fp32
    -2.0 * (C * (x + 0.044_715 * x * x * x))
}

/// `σ(x)` with the simulator's fp32 exponential.
#[inline(always)]
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + crate::engine_math::exp(-x))
}

/// `ln(1 + eˣ)` without overflow: `max(x, 0) + ln(1 + e^−|x|)`, in f64.
fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

impl ActFn {
    /// Applies the function in fp32 with the parameter `relu_param` (`activate2`'s): the
    /// negative slope of [`ActFn::Prelu`]; the other functions take no parameter and ignore it.
    #[inline]
    pub fn apply_with(self, x: f32, relu_param: f32) -> f32 {
        match self {
            ActFn::Prelu if x <= 0.0 => x * relu_param,
            _ => self.apply(x),
        }
    }

    /// The exact GELU (`x/2 · (1 + erf(x/√2))`) and its derivative (`Φ(x) + x·φ(x)`) of
    /// `t = x` in f64 from `erf = erf(t/√2)`, rounded once to fp32 (`NaN` for the other
    /// functions). [`ActFn::apply`] passes `libm::erf`; the simulator's rows pass the same bits
    /// computed eight at a time ([`crate::erf`]).
    #[inline(always)]
    pub(crate) fn given_erf(self, t: f64, erf: f64) -> f32 {
        match self {
            ActFn::Gelu => (0.5 * t * (1.0 + erf)) as f32,
            ActFn::GeluDx => {
                let cdf = 0.5 * (1.0 + erf);
                let pdf = (-0.5 * t * t).exp() / (2.0 * std::f64::consts::PI).sqrt();
                (cdf + t * pdf) as f32
            }
            _ => f32::NAN,
        }
    }

    /// Applies the function in fp32 (a parameterised function with its parameter at 0).
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        const GELU_SIGMOID: f32 = 1.702;
        match self {
            ActFn::Identity => x,
            ActFn::Exp => crate::engine_math::exp(x),
            ActFn::Rsqrt => 1.0 / x.sqrt(),
            ActFn::Sqrt => x.sqrt(),
            ActFn::Silu => x / (1.0 + crate::engine_math::exp(-x)),
            ActFn::Square => x * x,
            ActFn::Relu => x.max(0.0),
            // Without its parameter (0): max(x, 0), with -0 for -0 and NaN for NaN.
            ActFn::Prelu => {
                if x > 0.0 {
                    x
                } else {
                    x * 0.0
                }
            }
            ActFn::Tanh => x.tanh(),
            ActFn::Sigmoid => sigmoid(x),
            ActFn::Reciprocal => 1.0 / x,
            // x/2 · (1 + tanh(u)) = x · σ(2u) = x / (1 + e^−2u): no cancellation in 1 + tanh
            // for negative x, and the simulator's exponential, which runs over a row.
            ActFn::GeluTanh => x / (1.0 + crate::engine_math::exp(gelu_tanh_exponent(x))),
            ActFn::GeluSigmoid => x * sigmoid(GELU_SIGMOID * x),
            ActFn::GeluSigmoidDx => {
                let s = sigmoid(GELU_SIGMOID * x);
                s * (1.0 + GELU_SIGMOID * x * (1.0 - s))
            }
            ActFn::Log => x.ln(),
            ActFn::Gelu | ActFn::GeluDx => {
                let t = f64::from(x);
                self.given_erf(t, libm::erf(t * std::f64::consts::FRAC_1_SQRT_2))
            }
            ActFn::SiluDx => {
                let s = sigmoid(x);
                s * (1.0 + x * (1.0 - s))
            }
            ActFn::Softplus => softplus(x as f64) as f32,
            ActFn::Mish => {
                let x = x as f64;
                (x * softplus(x).tanh()) as f32
            }
            ActFn::Erf => libm::erf(x as f64) as f32,
            ActFn::ErfDx => {
                let x = x as f64;
                (std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp()) as f32
            }
            ActFn::Sin => x.sin(),
            ActFn::Arctan => x.atan(),
            ActFn::Sign => {
                if x.is_nan() || x == 0.0 {
                    x * 0.0
                } else {
                    x.signum()
                }
            }
            ActFn::Abs => x.abs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in ActFn::ALL {
            assert_eq!(ActFn::from_nki_name(f.nl_name()), Some(*f));
        }
        assert_eq!(ActFn::from_nki_name("copy"), Some(ActFn::Identity));
    }

    #[test]
    fn the_new_functions_match_their_definitions() {
        let close = |a: f32, b: f64| (a as f64 - b).abs() <= 1e-6 * b.abs().max(1.0);
        for x in [-6.0f32, -1.5, -0.25, 0.0, 0.5, 2.0, 9.0] {
            let xd = x as f64;
            let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
            assert!(
                close(ActFn::Softplus.apply(x), (1.0 + xd.exp()).ln()),
                "softplus {x}"
            );
            assert!(
                close(ActFn::Mish.apply(x), xd * (1.0 + xd.exp()).ln().tanh()),
                "mish {x}"
            );
            assert!(
                close(ActFn::GeluSigmoid.apply(x), xd * sig(1.702 * xd)),
                "gelu_s {x}"
            );
            // The derivative against a central difference of the function.
            let h = 1e-3;
            let num = (xd + h) * sig(1.702 * (xd + h)) - (xd - h) * sig(1.702 * (xd - h));
            assert!(
                (ActFn::GeluSigmoidDx.apply(x) as f64 - num / (2.0 * h)).abs() < 1e-4,
                "gelu_s_dx {x}"
            );
            let erf_num = (libm::erf(xd + h) - libm::erf(xd - h)) / (2.0 * h);
            assert!(
                (ActFn::ErfDx.apply(x) as f64 - erf_num).abs() < 1e-5,
                "erf_dx {x}"
            );
            assert!(close(ActFn::Erf.apply(x), libm::erf(xd)), "erf {x}");
            assert!(close(ActFn::Sin.apply(x), xd.sin()), "sin {x}");
            assert!(close(ActFn::Arctan.apply(x), xd.atan()), "arctan {x}");
            assert_eq!(ActFn::Abs.apply(x), x.abs());
        }
        assert_eq!(ActFn::Softplus.apply(100.0), 100.0);
        assert_eq!(ActFn::Sign.apply(-3.0), -1.0);
        assert_eq!(ActFn::Sign.apply(0.5), 1.0);
        assert_eq!(ActFn::Sign.apply(0.0), 0.0);
        assert!(ActFn::Sign.apply(f32::NAN).is_nan());
    }

    #[test]
    fn prelu_scales_the_negative_inputs_by_its_parameter() {
        assert_eq!(ActFn::Prelu.apply_with(3.0, 0.25), 3.0);
        assert_eq!(ActFn::Prelu.apply_with(-4.0, 0.25), -1.0);
        assert_eq!(ActFn::Prelu.apply_with(-4.0, 0.0), 0.0);
        assert_eq!(ActFn::Prelu.apply(-4.0), 0.0);
        assert_eq!(ActFn::Prelu.apply(2.5), 2.5);
        assert!(ActFn::Prelu.apply_with(f32::NAN, 0.5).is_nan());
        // The other functions ignore the parameter.
        assert_eq!(ActFn::Relu.apply_with(-4.0, 0.25), 0.0);
        assert_eq!(ActFn::Exp.apply_with(0.0, 9.0), 1.0);
    }
}
