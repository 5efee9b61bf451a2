//! The packed MX data types (`float8_e5m2_x4`, `float8_e4m3fn_x4`, `float4_e2m1fn_x4`): four
//! small floats (lanes) in one 32- or 16-bit element, the operands of `quantize_mx` and
//! `nc_matmul_mx`.
//!
//! Layout (the MX deep dive and the Trainium3 guide: four contraction elements packed back to
//! back along the free dimension): lane `k` of an element is the `k`-th of the four values,
//! held in byte `k` of the little-endian 32-bit word for the fp8 types and in nibble `k` (bits
//! `4k..4k+4`) of the little-endian 16-bit word for fp4. So a `[P, F]` x4 tensor has the bytes
//! of a `[P, 4F]` fp8 tensor (or of `[P, 2F]` bytes of fp4 pairs, low nibble first).
//!
//! A packed element is not a number: the simulator's tiles keep each one as its bit pattern
//! (`f32::from_bits` of the word, an fp4 word in the low 16 bits), which copies move
//! unchanged and only the MX instructions take apart ([`unpack`]) or build ([`pack`]).

use super::DType;
use super::codec;

/// The format of one lane of a packed MX element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    /// OCP fp8 e5m2 (IEEE-style: infinities, NaNs; largest finite 57344).
    E5M2,
    /// OCP fp8 e4m3fn (no infinities; S.1111.111 is NaN; largest finite 448).
    E4M3FN,
    /// OCP fp4 e2m1 (every encoding a number; largest 6).
    E2M1,
}

/// Lanes per packed element.
pub const LANES: usize = 4;

/// The 8 magnitudes of fp4 e2m1, by the low 3 bits of the encoding (bit 3 is the sign).
pub const E2M1_MAGNITUDES: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

impl Lane {
    /// Bits of one lane.
    pub const fn bits(self) -> u32 {
        match self {
            Lane::E5M2 | Lane::E4M3FN => 8,
            Lane::E2M1 => 4,
        }
    }

    /// The largest unbiased exponent of a normal value (`E_max` in `quantize_mx`'s scale
    /// formula): 15 for e5m2, 8 for e4m3fn, 2 for e2m1.
    pub const fn max_exponent(self) -> i32 {
        match self {
            Lane::E5M2 => 15,
            Lane::E4M3FN => 8,
            Lane::E2M1 => 2,
        }
    }

    /// The value of lane bits `b` (the low [`Lane::bits`] bits).
    pub fn decode(self, b: u8) -> f32 {
        match self {
            Lane::E5M2 => codec::E5M2.decode(b),
            Lane::E4M3FN => float8::F8E4M3::from_bits(b).to_f32(),
            Lane::E2M1 => {
                let m = E2M1_MAGNITUDES[(b & 7) as usize];
                if b & 8 != 0 { -m } else { m }
            }
        }
    }

    /// The bits of `v` rounded to this format (nearest, ties to even). e5m2 overflows to
    /// ±infinity, e4m3fn and e2m1 saturate to their largest value; NaN is e5m2's and e4m3fn's
    /// NaN and, fp4 having none, fp4's +0.
    pub fn encode(self, v: f32) -> u8 {
        match self {
            Lane::E5M2 => codec::E5M2.encode(v),
            Lane::E4M3FN => float8::F8E4M3::from_f32(v).to_bits(),
            Lane::E2M1 => encode_e2m1(v),
        }
    }

    /// `v` rounded to this format, as fp32.
    pub fn round(self, v: f32) -> f32 {
        self.decode(self.encode(v))
    }
}

fn encode_e2m1(v: f32) -> u8 {
    if v.is_nan() {
        return 0;
    }
    let sign = if v.is_sign_negative() { 8u8 } else { 0 };
    let a = v.abs();
    // Nearest magnitude; a tie goes to the even encoding (the one with mantissa bit 0).
    let mut best = 0u8;
    for (i, m) in E2M1_MAGNITUDES.iter().enumerate().skip(1) {
        let (d_new, d_best) = ((a - m).abs(), (a - E2M1_MAGNITUDES[best as usize]).abs());
        if d_new < d_best || (d_new == d_best && i % 2 == 0) {
            best = i as u8;
        }
    }
    sign | best
}

impl DType {
    /// The lane format of a packed MX dtype, `None` for every other dtype.
    pub const fn lane(self) -> Option<Lane> {
        match self {
            DType::F8E5M2X4 => Some(Lane::E5M2),
            DType::F8E4M3FNX4 => Some(Lane::E4M3FN),
            DType::F4E2M1FNX4 => Some(Lane::E2M1),
            _ => None,
        }
    }

    /// Whether this is a packed MX dtype (four values per element).
    pub const fn is_packed(self) -> bool {
        self.lane().is_some()
    }
}

/// The packed element of `lane` format holding `values` (each rounded to the lane format), as
/// the simulator stores it: the word's bit pattern as an `f32`.
pub fn pack(lane: Lane, values: [f32; LANES]) -> f32 {
    let mut word = 0u32;
    for (k, v) in values.into_iter().enumerate() {
        word |= (lane.encode(v) as u32) << (k as u32 * lane.bits());
    }
    f32::from_bits(word)
}

/// The four lane values of a stored packed element of `lane` format.
pub fn unpack(lane: Lane, element: f32) -> [f32; LANES] {
    let word = element.to_bits();
    let mask = (1u32 << lane.bits()) - 1;
    std::array::from_fn(|k| lane.decode(((word >> (k as u32 * lane.bits())) & mask) as u8))
}

/// The stored element of a packed dtype of `bytes` bytes read from `b` (little-endian).
pub(super) fn read_word(b: &[u8]) -> f32 {
    match b.len() {
        2 => f32::from_bits(u16::from_le_bytes([b[0], b[1]]) as u32),
        _ => f32::from_bits(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
    }
}

/// Writes a stored packed element into `out` (its 2 or 4 little-endian bytes).
pub(super) fn write_word(out: &mut [u8], element: f32) {
    let word = element.to_bits();
    match out.len() {
        2 => out.copy_from_slice(&(word as u16).to_le_bytes()),
        _ => out.copy_from_slice(&word.to_le_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e2m1_has_sixteen_values_and_rounds_to_nearest_even() {
        let table: [f32; 16] = [
            0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
        ];
        for (b, want) in table.iter().enumerate() {
            let got = Lane::E2M1.decode(b as u8);
            assert_eq!(got.to_bits(), want.to_bits(), "{b:#x}");
            assert_eq!(Lane::E2M1.encode(got), b as u8);
        }
        let cases = [
            (0.25, 0.0),
            (0.3, 0.5),
            (0.75, 1.0),
            (1.25, 1.0),
            (1.75, 2.0),
            (2.5, 2.0),
            (3.5, 4.0),
            (5.0, 4.0),
            (5.5, 6.0),
            (100.0, 6.0),
            (-2.5, -2.0),
        ];
        for (v, want) in cases {
            assert_eq!(Lane::E2M1.round(v), want, "{v}");
        }
    }

    #[test]
    fn pack_puts_lane_k_in_byte_or_nibble_k() {
        let e = pack(Lane::E4M3FN, [1.0, 2.0, -1.0, 448.0]);
        assert_eq!(e.to_bits(), 0x7EB8_4038);
        assert_eq!(unpack(Lane::E4M3FN, e), [1.0, 2.0, -1.0, 448.0]);
        let e = pack(Lane::E2M1, [0.5, 1.0, -6.0, 3.0]);
        assert_eq!(e.to_bits(), 0x5F21);
        assert_eq!(unpack(Lane::E2M1, e), [0.5, 1.0, -6.0, 3.0]);
        let mut bytes = [0u8; 4];
        write_word(&mut bytes, pack(Lane::E5M2, [1.0, -2.0, 0.5, 57344.0]));
        assert_eq!(bytes, [0x3C, 0xC0, 0x38, 0x7B]);
        assert_eq!(
            unpack(Lane::E5M2, read_word(&bytes)),
            [1.0, -2.0, 0.5, 57344.0]
        );
    }
}
