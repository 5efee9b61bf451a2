//! The portable PRNG that makes accuracy inputs on both sides of the ATen comparison.
//!
//! Element `i` of an input with seed `s` is `z = splitmix64(s + i)` (wrapping `u64` arithmetic);
//! its top 24 bits map to `(z >> 40) / 2^23 - 1` in `[-1, 1)` (exact in `f32`), which is then
//! rounded to nearest even into the case dtype. `tests/reference/generate.py` implements the same
//! function and pins the same values, so inputs never need to be stored in fixtures.

use nki_core::DType;

/// The splitmix64 output function of `z` (wrapping arithmetic throughout).
pub fn splitmix64(z: u64) -> u64 {
    let mut z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Element `index` of the stream of `seed`, in `[-1, 1)`, before any dtype rounding.
pub fn value(seed: u64, index: u64) -> f32 {
    let top = (splitmix64(seed.wrapping_add(index)) >> 40) as u32; // < 2^24: exact in f32
    top as f32 / (1u32 << 23) as f32 - 1.0
}

/// Elements `0..n` of the stream of `seed`, rounded to nearest even into `dtype` (and held as
/// `f32`, exactly).
pub fn values(seed: u64, n: usize, dtype: DType) -> Vec<f32> {
    (0..n as u64).map(|i| dtype.round(value(seed, i))).collect()
}

/// The index range of an integer input with no declared domain (`DEFAULT_INDEX_DOMAIN` in
/// `torch_nki.testing`).
pub const DEFAULT_INDEX_DOMAIN: IndexDomain = IndexDomain {
    lo: 0,
    hi: 100,
    except: None,
};

/// The values an integer input is drawn from: `lo..hi`, and `except` at every fourth element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexDomain {
    /// Smallest index.
    pub lo: i64,
    /// One past the largest.
    pub hi: i64,
    /// The value at every flat position `i % 4 == 3` (an `ignore_index`).
    pub except: Option<i64>,
}

/// Elements `0..n` of an integer input (as `f32`, exact below 2^24): the stream of `seed` mapped
/// to `lo + floor((u + 1) / 2 · (hi − lo))` in `f64`, and `except` at every `i % 4 == 3`, as
/// `torch_nki.testing.index_values` computes them.
pub fn indices(seed: u64, n: usize, d: IndexDomain) -> Vec<f32> {
    (0..n as u64)
        .map(|i| match d.except {
            Some(e) if i % 4 == 3 => e as f32,
            _ => {
                let u = f64::from(value(seed, i));
                let v = d.lo + ((u + 1.0) / 2.0 * (d.hi - d.lo) as f64).floor() as i64;
                v.min(d.hi - 1) as f32
            }
        })
        .collect()
}

/// The values of kernel input `decl` from the stream of `seed`: [`indices`] from its declared
/// domain (or [`DEFAULT_INDEX_DOMAIN`]) for an `i32` input, [`values`] otherwise.
pub fn input_values(seed: u64, decl: &nki_core::ir::HbmDecl) -> Vec<f32> {
    if decl.dtype != DType::I32 {
        return values(seed, decl.numel(), decl.dtype);
    }
    let d = decl
        .domain
        .as_ref()
        .map_or(DEFAULT_INDEX_DOMAIN, |d| IndexDomain {
            lo: d.lo,
            hi: d.hi,
            except: d.except,
        });
    indices(seed, decl.numel(), d)
}

/// `values` as a little-endian buffer of `dtype`, as the simulator takes it.
pub fn encode(values: &[f32], dtype: DType) -> Vec<u8> {
    let mut bytes = vec![0u8; values.len() * dtype.size_bytes()];
    for (i, &v) in values.iter().enumerate() {
        dtype.write(&mut bytes, i, v);
    }
    bytes
}

/// Decodes a little-endian buffer of `dtype` to `f32` (exact).
pub fn decode(bytes: &[u8], dtype: DType) -> Vec<f32> {
    (0..bytes.len() / dtype.size_bytes())
        .map(|i| dtype.read(bytes, i))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `torch_nki.testing.index_values` on the stream of seed 12345 gives these (computed there).
    #[test]
    fn index_values_match_the_python_rule() {
        let d = |lo, hi, except| IndexDomain { lo, hi, except };
        assert_eq!(
            indices(12345, 8, d(0, 10, Some(-100))),
            [1.0, 7.0, 3.0, -100.0, 1.0, 5.0, 6.0, -100.0]
        );
        assert_eq!(
            indices(12345, 8, d(3, 1000, None)),
            [135.0, 795.0, 321.0, 541.0, 163.0, 562.0, 644.0, 973.0]
        );
    }

    /// The same literals as `PINNED` in `tests/reference/generate.py`.
    #[test]
    fn pinned_values_match_the_generator() {
        let first4 = |seed| [0, 1, 2, 3].map(|i| value(seed, i));
        assert_eq!(
            first4(0),
            [0.7666216_f32, 0.13312304, 0.18237936, -0.7730994]
        );
        assert_eq!(
            first4(12345),
            [-0.7338407_f32, 0.5897893, -0.3618058, 0.08120763]
        );
    }

    #[test]
    fn seed_plus_index_wraps() {
        assert_eq!(value(u64::MAX, 1).to_bits(), value(0, 0).to_bits());
    }

    #[test]
    fn values_cover_the_unit_interval_exactly() {
        let v = values(7, 10_000, DType::F32);
        assert!(v.iter().all(|&x| (-1.0..1.0).contains(&x)));
        assert!(
            v.iter().all(|&x| (x * (1u32 << 23) as f32).fract() == 0.0),
            "multiples of 2^-23"
        );
    }

    #[test]
    fn narrow_dtypes_round_to_nearest_even_and_roundtrip() {
        for dtype in [DType::F32, DType::BF16, DType::F16] {
            let v = values(12345, 64, dtype);
            assert!(
                v.iter().all(|&x| dtype.round(x) == x),
                "{dtype}: already rounded"
            );
            assert_eq!(decode(&encode(&v, dtype), dtype), v, "{dtype}");
        }
        // 1 + 2^-8 is a bf16 tie between 1 and 1 + 2^-7: even wins.
        assert_eq!(DType::BF16.round(1.0 + 1.0 / 256.0), 1.0);
    }
}
