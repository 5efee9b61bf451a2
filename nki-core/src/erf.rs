//! The error function the simulator's exact GELU uses, `libm::erf` (f64), evaluated over a row
//! of arguments with the same bits, vectorised.
//!
//! `libm::erf` is FreeBSD's `s_erf.c` (Sun Microsystems, 1993: "Permission to use, copy, modify,
//! and distribute this software is freely granted, provided that this notice is preserved"),
//! and its exponential is FreeBSD's `e_exp.c`. Both pick one of several branches per argument,
//! so the compiler cannot vectorise them, and one call costs about 12 ns: most of the exact
//! GELU's time. [`erf_row`] evaluates the same branches with the same rational approximations,
//! the same constants and the same sequence of IEEE-754 double operations (no fused
//! multiply-adds), each branch written without branches so its loop vectorises: every argument
//! takes the cheap branches, and the arguments of each costlier one (two exponentials and five
//! divisions for `1.25 ≤ |x| < 6`) are gathered and evaluated together. The bits are those of
//! `libm::erf` for every argument; the tests compare them over each branch, its boundaries, the
//! special values and (run with `--ignored`) every fp32 GELU argument.
//!
//! Where the two branch structures differ in form but not in value, the reason is noted at
//! the line (the exponential's `k = 0` reduction, the final scaling by `2^k`, the padded
//! coefficients).

// The constants are the C source's decimal literals, digit for digit (each rounds to the double
// the source's hex comment gives), so they can be checked against it.
#![allow(clippy::excessive_precision)]

// erf on [0, 0.84375]: x + x·P(x²)/Q(x²).
const EFX8: f64 = 1.027_033_336_764_100_690_53e0;
const PP: [f64; 5] = [
    1.283_791_670_955_125_585_61e-1,
    -3.250_421_072_470_014_993_70e-1,
    -2.848_174_957_559_851_047_66e-2,
    -5.770_270_296_489_441_591_57e-3,
    -2.376_301_665_665_016_260_84e-5,
];
const QQ: [f64; 5] = [
    3.979_172_239_591_553_528_19e-1,
    6.502_224_998_876_729_444_85e-2,
    5.081_306_281_875_765_627_76e-3,
    1.324_947_380_043_216_445_26e-4,
    -3.960_228_278_775_368_123_20e-6,
];
// erf on [0.84375, 1.25]: erx + P(s)/Q(s), s = |x| − 1.
const ERX: f64 = 8.450_629_115_104_675_292_97e-1;
const PA: [f64; 7] = [
    -2.362_118_560_752_659_440_77e-3,
    4.148_561_186_837_483_316_66e-1,
    -3.722_078_760_357_013_238_47e-1,
    3.183_466_199_011_617_536_74e-1,
    -1.108_946_942_823_966_774_76e-1,
    3.547_830_432_561_823_593_71e-2,
    -2.166_375_594_868_790_843_00e-3,
];
const QA: [f64; 6] = [
    1.064_208_804_008_442_282_86e-1,
    5.403_979_177_021_710_489_37e-1,
    7.182_865_441_419_626_628_68e-2,
    1.261_712_198_087_616_421_12e-1,
    1.363_708_391_202_905_073_62e-2,
    1.198_449_984_679_910_741_70e-2,
];
// erfc on [1.25, 1/0.35] (RA/SA) and [1/0.35, 6] (RB/SB, padded with a zero top coefficient:
// `c + s · 0` is `c` for the finite `s` of these branches, so the padding changes no bit).
const RA: [f64; 8] = [
    -9.864_944_034_847_148_227_05e-3,
    -6.938_585_727_071_817_643_72e-1,
    -1.055_862_622_532_329_098_14e1,
    -6.237_533_245_032_600_603_96e1,
    -1.623_966_694_625_734_703_55e2,
    -1.846_050_929_067_110_359_94e2,
    -8.128_743_550_630_659_342_46e1,
    -9.814_329_344_169_145_485_92e0,
];
const SA: [f64; 8] = [
    1.965_127_166_743_925_712_92e1,
    1.376_577_541_435_190_426_00e2,
    4.345_658_774_752_292_288_21e2,
    6.453_872_717_332_678_803_36e2,
    4.290_081_400_275_678_333_86e2,
    1.086_350_055_417_794_351_34e2,
    6.570_249_770_319_281_701_35e0,
    -6.042_441_521_485_809_874_38e-2,
];
const RB: [f64; 8] = [
    -9.864_942_924_700_099_285_97e-3,
    -7.992_832_376_805_230_065_74e-1,
    -1.775_795_491_775_475_198_89e1,
    -1.606_363_848_558_219_160_62e2,
    -6.375_664_433_683_896_277_22e2,
    -1.025_095_131_611_077_249_54e3,
    -4.835_191_916_086_513_970_19e2,
    0.0,
];
const SB: [f64; 8] = [
    3.033_806_074_348_245_829_24e1,
    3.257_925_129_965_739_188_26e2,
    1.536_729_586_084_436_959_94e3,
    3.199_858_219_508_595_539_08e3,
    2.553_050_406_433_164_425_83e3,
    4.745_285_412_069_553_672_15e2,
    -2.244_095_244_658_581_833_62e1,
    0.0,
];

/// High words (of `|x|`) where the branches change.
const HI_NONFINITE: u64 = 0x7ff0_0000;
const HI_TINY: u64 = 0x3e30_0000; // 2^-28
const HI_SMALL: u64 = 0x3feb_0000; // 0.84375
const HI_NEAR_ONE: u64 = 0x3ff4_0000; // 1.25
const HI_MIDDLE: u64 = 0x4006_db6d; // 1/0.35
const HI_SATURATED: u64 = 0x4018_0000; // 6

/// The high word of `|x|` (in a u64, so the lanes stay 64 bits wide and vectorise).
#[inline(always)]
fn high_word(x: f64) -> u64 {
    (x.to_bits() >> 32) & 0x7fff_ffff
}

/// `-y` for a negative `x`, else `y`.
#[inline(always)]
fn with_sign_of(x: f64, y: f64) -> f64 {
    if x.is_sign_negative() { -y } else { y }
}

/// `c[0] + s · (c[1] + s · (... + s · c[n-1]))`, innermost first, as the C source nests it.
#[inline(always)]
fn horner(s: f64, c: &[f64]) -> f64 {
    let (last, rest) = c.split_last().expect("a polynomial has a coefficient");
    rest.iter().rev().fold(*last, |acc, &k| k + s * acc)
}

/// `1 + s · (c[0] + s · (c[1] + ...))`: the denominators, whose constant term is 1.
#[inline(always)]
fn one_plus(s: f64, c: &[f64]) -> f64 {
    1.0 + s * horner(s, c)
}

/// `libm::exp(x)` for `x` in `[-708, 708]`, branch-free (what `e_exp.c` computes there; other
/// arguments give a garbage value, which a caller's lane then discards).
#[inline(always)]
fn exp_lane(x: f64) -> f64 {
    const LN2HI: f64 = 6.931_471_803_691_238_164_90e-1;
    const LN2LO: f64 = 1.908_214_929_270_587_700_02e-10;
    // 1/ln 2: the source's 0x3ff71547_652b82fe, which is std's `LOG2_E`.
    const INVLN2: f64 = std::f64::consts::LOG2_E;
    const P: [f64; 5] = [
        1.666_666_666_666_660_190_37e-1,
        -2.777_777_777_701_559_338_42e-3,
        6.613_756_321_437_934_361_17e-5,
        -1.653_390_220_546_525_153_90e-6,
        4.138_136_797_057_238_460_39e-8,
    ];
    // 2^52 + 1023: an integer k added to it leaves k + 1023 in the low mantissa bits.
    const EXPONENT_IN_MANTISSA: f64 = 4_503_599_627_371_519.0;
    let x = x.clamp(-708.0, 708.0);
    let hx = high_word(x);
    // The C source's `(int)(invln2 · x ± 0.5)` (truncation), `1 − 2·sign` or 0, as a double.
    let k = if hx >= 0x3ff0_a2b2 {
        (INVLN2 * x + with_sign_of(x, 0.5)).trunc()
    } else if hx > 0x3fd6_2e42 {
        with_sign_of(x, 1.0)
    } else {
        0.0
    };
    // With k = 0 the C source keeps `hi = x`, `lo = 0`, `x` unchanged: the same values the
    // general reduction gives (`x − 0`, `0 · LN2LO`, `x − 0`).
    let hi = x - k * LN2HI;
    let lo = k * LN2LO;
    let r = hi - lo;
    let rr = r * r;
    let c = r - rr * horner(rr, &P);
    let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
    // `scalbn(y, k)` for k in [-1022, 1023] is one multiplication by 2^k (exact, by 1 for k = 0).
    let two_to_k = f64::from_bits((k + EXPONENT_IN_MANTISSA).to_bits() << 52);
    if hx <= HI_TINY { 1.0 + x } else { y * two_to_k }
}

/// `libm::erf` where it needs no exponential: `|x| < 0.84375` (below 2^-28 too), `|x| ≥ 6`
/// and nonfinite `x`; any other argument gives a value [`erf_row`] replaces.
#[inline(always)]
fn erf_cheap(v: f64) -> f64 {
    let h = high_word(v);
    let z = v * v;
    let small = v + v * (horner(z, &PP) / one_plus(z, &QQ));
    let tiny = 0.125 * (8.0 * v + EFX8 * v);
    // `1 − 2·sign + 1/x` without the division: `1/x` is `±0` for `±inf` and the NaN for a NaN.
    let reciprocal = if v.is_nan() { v } else { with_sign_of(v, 0.0) };
    let nonfinite = 1.0 - (if v.is_sign_negative() { 2.0 } else { 0.0 }) + reciprocal;
    let saturated = with_sign_of(v, 1.0 - f64::from_bits(0x0010_0000_0000_0000));
    if h >= HI_NONFINITE {
        nonfinite
    } else if h >= HI_SATURATED {
        saturated
    } else if h < HI_TINY {
        tiny
    } else {
        small
    }
}

/// `libm::erf` for `0.84375 ≤ |x| < 1.25`: `1 − erfc1(x)`, `erfc1 = (1 − erx) − P/Q`.
#[inline(always)]
fn erf_near_one(v: f64) -> f64 {
    let s = v.abs() - 1.0;
    let erfc = 1.0 - ERX - horner(s, &PA) / one_plus(s, &QA);
    with_sign_of(v, 1.0 - erfc)
}

/// `libm::erf` for `1.25 ≤ |x| < 6`: `1 − erfc2(x)`, `erfc2 = exp(−z² − 0.5625) ·
/// exp((z − a)(z + a) + R/S) / a` with `a = |x|` and `z` = `a` with its low word cleared.
#[inline(always)]
fn erf_tail(v: f64) -> f64 {
    let a = v.abs();
    let s = 1.0 / (a * a);
    let (r, big_s) = if high_word(v) < HI_MIDDLE {
        (horner(s, &RA), one_plus(s, &SA))
    } else {
        (horner(s, &RB), one_plus(s, &SB))
    };
    let z = f64::from_bits(a.to_bits() & 0xffff_ffff_0000_0000);
    let erfc = exp_lane(-z * z - 0.5625) * exp_lane((z - a) * (z + a) + r / big_s) / a;
    with_sign_of(v, 1.0 - erfc)
}

/// Arguments handled together: the costlier branches' arguments are gathered per block.
const BLOCK: usize = 256;

/// `out[i] = libm::erf(x[i])`, with its bits. Every argument gets the branch-free cheap
/// branches; the arguments of each costlier branch are gathered into a block of their own,
/// evaluated together (so the loop vectorises and computes no branch an argument does not
/// take: the divisions dominate) and put back.
#[inline(always)]
pub fn erf_row(x: &[f64], out: &mut [f64]) {
    type Branch = fn(f64) -> f64;
    let costlier: [(u64, u64, Branch); 2] = [
        (HI_SMALL, HI_NEAR_ONE, erf_near_one),
        (HI_NEAR_ONE, HI_SATURATED, erf_tail),
    ];
    let mut at = [0u16; BLOCK];
    let mut args = [0.0f64; BLOCK];
    for (xs, os) in x.chunks(BLOCK).zip(out.chunks_mut(BLOCK)) {
        // Its own loop, so it vectorises.
        for (o, &v) in os.iter_mut().zip(xs) {
            *o = erf_cheap(v);
        }
        for (lo, hi, branch) in costlier {
            // Each argument written at the next free place, kept when in the branch's range.
            let mut n = 0;
            for (i, &v) in xs.iter().enumerate() {
                at[n] = i as u16;
                args[n] = v;
                n += usize::from((lo..hi).contains(&high_word(v)));
            }
            for a in &mut args[..n] {
                *a = branch(*a);
            }
            for (&i, &e) in at[..n].iter().zip(&args[..n]) {
                os[usize::from(i)] = e;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every argument of `xs` against `libm::erf`, bit for bit.
    fn check(xs: &[f64]) {
        let mut got = vec![0.0; xs.len()];
        erf_row(xs, &mut got);
        for (v, g) in xs.iter().zip(got) {
            let want = libm::erf(*v);
            assert!(
                g.to_bits() == want.to_bits(),
                "erf({v:e}) = {g:e} ({:#x}), libm {want:e} ({:#x})",
                g.to_bits(),
                want.to_bits()
            );
        }
    }

    /// The value with high word `h` and low word `l`.
    fn from_words(h: u64, l: u32) -> f64 {
        f64::from_bits((h << 32) | u64::from(l))
    }

    #[test]
    fn special_values_and_branch_boundaries() {
        let mut xs = vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            f64::from_bits(1),
            f64::MAX,
            28.0,
            1e300,
        ];
        for h in [
            HI_TINY,
            HI_SMALL,
            HI_NEAR_ONE,
            HI_MIDDLE,
            HI_SATURATED,
            0x3ff0_a2b2,
            0x3fd6_2e42,
        ] {
            for l in [0, 1, 0x8000_0000, u32::MAX] {
                for hh in [h - 1, h, h + 1] {
                    xs.push(from_words(hh, l));
                }
            }
        }
        let negated: Vec<f64> = xs.iter().map(|v| -v).collect();
        xs.extend(negated);
        check(&xs);
    }

    #[test]
    fn every_branch_over_a_sweep() {
        // Evenly spaced over [-7, 7] (every branch, both signs), with lanes of one chunk in
        // different branches, then a geometric sweep down to 2^-40.
        let mut xs: Vec<f64> = (0..60_000)
            .map(|i| -7.0 + f64::from(i) * 14.0 / 60_000.0)
            .collect();
        xs.extend((0..4_000).map(|i| (-40.0 + f64::from(i) / 100.0).exp2()));
        check(&xs);
    }

    #[test]
    fn the_gelu_arguments_of_spread_fp32_values() {
        // What the exact GELU passes: an fp32 value over √2, in f64; a stride through every
        // fp32 bit pattern (both signs, all exponents).
        let xs: Vec<f64> = (0..u32::MAX / 40_009)
            .map(|i| f64::from(f32::from_bits(i * 40_009)) * std::f64::consts::FRAC_1_SQRT_2)
            .collect();
        check(&xs);
    }

    /// Every fp32 value's GELU argument (`x/√2` in f64), in release builds about a minute on
    /// two cores: `cargo test --release -p nki-core --lib erf -- --ignored`.
    #[test]
    #[ignore = "exhaustive over 2^32 arguments: run it in release builds"]
    fn every_fp32_gelu_argument() {
        use rayon::prelude::*;
        (0..=u32::MAX >> 16).into_par_iter().for_each(|hi| {
            let xs: Vec<f64> = (0..=u16::MAX)
                .map(|lo| {
                    let x = f32::from_bits((hi << 16) | u32::from(lo));
                    f64::from(x) * std::f64::consts::FRAC_1_SQRT_2
                })
                .collect();
            check(&xs);
        });
    }
}
