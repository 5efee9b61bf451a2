//! Whether this processor's bf16 dot-product instructions give the simulator's bits for a bf16
//! `nc_matmul`, and how fast they run: `cargo run --release -p nki-core --example
//! bf16_dot_bits`.
//!
//! The simulator sums each output of a product as a chain of fp32 fused multiply-adds over the
//! contraction in order (`sim/gemm.rs`). A bf16 × bf16 product is exact in fp32 (8 by 8
//! significant bits), so for bf16 operands the chain is also an fp32 add per step, rounded each
//! time. Two x86 instructions multiply bf16 pairs into fp32 sums:
//!
//! - AVX-512 BF16's `VDPBF16PS`: Intel's pseudo-code adds a pair's odd element's product,
//!   rounds, then the even one's. With step `l` in the odd slot and `l + 1` in the even one, that
//!   is the chain (with denormals flushed, which the operands here never make).
//! - AMX's `TDPBF16PS` (what ATen's bf16 GEMMs run on such processors): a 16 × 32 by 32 × 16
//!   tile product per instruction.
//!
//! For random bf16 operands (exponents −20..20, so no product or sum is denormal) it prints how
//! many outputs of each differ in any bit from the chain, and each instruction's rate next to
//! fp32 fused multiply-adds' (multiply-adds per second, one thread). The tiles need the kernel's
//! permission (`arch_prctl(ARCH_REQ_XCOMP_PERM)`), which the example asks for.

#[cfg(target_arch = "x86_64")]
fn main() {
    x86::main();
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    println!("bf16_dot_bits: x86-64 instructions only; nothing to measure here");
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use half::bf16;
    use std::arch::asm;
    use std::arch::x86_64::*;
    use std::hint::black_box;
    use std::time::Instant;

    /// Contraction steps per product: one tile's 32 bf16 columns.
    const K: usize = 32;
    /// Output rows and columns per product: one tile's 16 by 16 fp32.
    const N: usize = 16;
    /// Random products compared.
    const PRODUCTS: usize = 4000;

    /// A deterministic xorshift generator.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// A normal bf16 of either sign, exponent −20..20, any significand.
        fn bf16(&mut self) -> bf16 {
            let r = self.next();
            let exponent = (r % 41) as u16 + 127 - 20;
            bf16::from_bits(
                (((r >> 8) & 1) as u16) << 15 | exponent << 7 | ((r >> 16) & 0x7f) as u16,
            )
        }
    }

    /// One product's operands: `a[m][l]` and `b[l][n]`.
    struct Operands {
        a: [[bf16; K]; N],
        b: [[bf16; N]; K],
    }

    impl Operands {
        fn random(rng: &mut Rng) -> Self {
            Operands {
                a: std::array::from_fn(|_| std::array::from_fn(|_| rng.bf16())),
                b: std::array::from_fn(|_| std::array::from_fn(|_| rng.bf16())),
            }
        }

        /// The simulator's sums: for each output, fused multiply-adds from `+0` in order of `l`.
        fn chain(&self) -> [[f32; N]; N] {
            std::array::from_fn(|m| {
                std::array::from_fn(|n| {
                    (0..K).fold(0f32, |s, l| {
                        self.a[m][l].to_f32().mul_add(self.b[l][n].to_f32(), s)
                    })
                })
            })
        }

        /// `b` as pairs of steps: row `l / 2` holds `(b[l][n], b[l + 1][n])` for every `n`,
        /// the first in the low (even) half when `low_first`, else in the high (odd) half.
        fn paired_b(&self, low_first: bool) -> [[u32; N]; K / 2] {
            std::array::from_fn(|p| {
                std::array::from_fn(|n| {
                    let (first, second) =
                        (self.b[2 * p][n].to_bits(), self.b[2 * p + 1][n].to_bits());
                    pair(first, second, low_first)
                })
            })
        }
    }

    /// Two bf16 bits in one 32-bit lane.
    fn pair(first: u16, second: u16, low_first: bool) -> u32 {
        let (low, high) = if low_first {
            (first, second)
        } else {
            (second, first)
        };
        u32::from(low) | u32::from(high) << 16
    }

    /// The 32 bf16 lanes of a 512-bit vector's bits.
    #[target_feature(enable = "avx512f,avx512bf16")]
    fn as_bf16(v: __m512i) -> __m512bh {
        // SAFETY: both are 512 bits of plain data.
        unsafe { std::mem::transmute::<__m512i, __m512bh>(v) }
    }

    /// `VDPBF16PS` over one product, step `l` in each pair's odd (high) half.
    ///
    /// # Safety
    /// The processor has AVX-512 F and BF16.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn vdpbf16ps(ops: &Operands) -> [[f32; N]; N] {
        let b = ops.paired_b(false);
        std::array::from_fn(|m| {
            let mut acc = _mm512_setzero_ps();
            for (p, row) in b.iter().enumerate() {
                let a = pair(
                    ops.a[m][2 * p].to_bits(),
                    ops.a[m][2 * p + 1].to_bits(),
                    false,
                );
                // SAFETY: `row` is 16 lanes of 32 bits.
                let moving = unsafe { _mm512_loadu_si512(row.as_ptr().cast()) };
                let stationary = _mm512_set1_epi32(a as i32);
                acc = _mm512_dpbf16_ps(acc, as_bf16(stationary), as_bf16(moving));
            }
            let mut out = [0f32; N];
            // SAFETY: `out` holds 16 floats.
            unsafe { _mm512_storeu_ps(out.as_mut_ptr(), acc) };
            out
        })
    }

    /// An AMX tile configuration (palette 1).
    #[repr(C, align(64))]
    struct TileConfig([u8; 64]);

    impl TileConfig {
        /// Tiles `0..tiles` of 16 rows by 64 bytes.
        fn full(tiles: usize) -> Self {
            let mut cfg = [0u8; 64];
            cfg[0] = 1;
            for t in 0..tiles {
                cfg[16 + 2 * t..18 + 2 * t].copy_from_slice(&64u16.to_le_bytes());
                cfg[48 + t] = 16;
            }
            TileConfig(cfg)
        }
    }

    /// Whether the processor has AMX tiles and their bf16 product (`CPUID.(7, 0):EDX` bits 24
    /// and 22; Rust's feature detection for them is not stable).
    fn amx_bf16() -> bool {
        let edx = __cpuid_count(7, 0).edx;
        edx & (1 << 24) != 0 && edx & (1 << 22) != 0
    }

    /// Asks Linux for the AMX tile state (`arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)`);
    /// `Err` with the error number when refused.
    fn request_tiles() -> Result<(), i64> {
        const SYS_ARCH_PRCTL: i64 = 158;
        const ARCH_REQ_XCOMP_PERM: i64 = 0x1023;
        const XFEATURE_XTILEDATA: i64 = 18;
        let ret: i64;
        // SAFETY: a system call that only changes this process's permitted register state.
        unsafe {
            asm!("syscall", inlateout("rax") SYS_ARCH_PRCTL => ret,
                in("rdi") ARCH_REQ_XCOMP_PERM, in("rsi") XFEATURE_XTILEDATA,
                lateout("rcx") _, lateout("r11") _, options(nostack));
        }
        if ret == 0 { Ok(()) } else { Err(-ret) }
    }

    /// `TDPBF16PS` over one product (each pair's steps in order, low half first).
    ///
    /// # Safety
    /// The processor has AMX-BF16 and the process holds the tile state ([`request_tiles`]).
    unsafe fn tdpbf16ps(ops: &Operands) -> [[f32; N]; N] {
        let a: [[u16; K]; N] = ops.a.map(|row| row.map(bf16::to_bits));
        let b = ops.paired_b(true);
        let mut out = [[0f32; N]; N];
        let cfg = TileConfig::full(3);
        let stride = 64usize;
        // SAFETY: the tiles read 16 rows of 64 bytes from `a` and `b` and write as many to
        // `out`, which are that size; the caller's contract covers the instructions.
        unsafe {
            asm!(
                "ldtilecfg [{cfg}]",
                "tilezero tmm0",
                "tileloadd tmm1, [{a} + {s}*1]",
                "tileloadd tmm2, [{b} + {s}*1]",
                "tdpbf16ps tmm0, tmm1, tmm2",
                "tilestored [{c} + {s}*1], tmm0",
                "tilerelease",
                cfg = in(reg) cfg.0.as_ptr(),
                a = in(reg) a.as_ptr(),
                b = in(reg) b.as_ptr(),
                c = in(reg) out.as_mut_ptr(),
                s = in(reg) stride,
                options(nostack),
            );
        }
        out
    }

    /// Outputs whose bits differ from the chain's.
    fn differing(got: &[[f32; N]; N], chain: &[[f32; N]; N]) -> usize {
        got.iter()
            .flatten()
            .zip(chain.iter().flatten())
            .filter(|(g, c)| g.to_bits() != c.to_bits())
            .count()
    }

    /// Independent sums in the rate loops: more than either instruction's latency times its
    /// issue rate, so that the rate is its throughput.
    const SUMS: usize = 24;

    /// Multiply-adds per second of `reps` rounds of `step` (`macs` multiply-adds per lane) on
    /// each of [`SUMS`] independent sums of 16 lanes. Inlined into each caller, whose target
    /// features the intrinsics in `step` need.
    #[inline(always)]
    fn sums_rate(reps: usize, macs: usize, step: impl Fn(__m512) -> __m512) -> f64 {
        // SAFETY: every caller enables AVX-512 F.
        let mut acc: [__m512; SUMS] = std::array::from_fn(|i| unsafe { _mm512_set1_ps(i as f32) });
        let t = Instant::now();
        for _ in 0..reps {
            for a in acc.iter_mut() {
                *a = step(*a);
            }
        }
        let secs = t.elapsed().as_secs_f64();
        black_box(acc);
        (reps * SUMS * 16 * macs) as f64 / secs
    }

    /// [`sums_rate`] of fp32 fused multiply-adds.
    #[target_feature(enable = "avx512f")]
    fn fma_rate(reps: usize) -> f64 {
        let (x, y) = (black_box(_mm512_set1_ps(0.999)), _mm512_set1_ps(1.0001));
        sums_rate(reps, 1, |a| _mm512_fmadd_ps(x, y, a))
    }

    /// [`sums_rate`] of `VDPBF16PS` (two multiply-adds per lane).
    #[target_feature(enable = "avx512f,avx512bf16")]
    fn dot_rate(reps: usize) -> f64 {
        let ones = as_bf16(_mm512_set1_epi32(0x3f80_3f80));
        let x = black_box(ones);
        sums_rate(reps, 2, |a| _mm512_dpbf16_ps(a, x, ones))
    }

    /// Multiply-adds per second of `reps` rounds of `TDPBF16PS` into 4 independent tiles of
    /// sums (16 × 16 × 32 multiply-adds each), the operands' tiles zero.
    ///
    /// # Safety
    /// As [`tdpbf16ps`].
    unsafe fn tile_rate(reps: usize) -> f64 {
        let cfg = TileConfig::full(6);
        let t = Instant::now();
        // SAFETY: the caller's contract; the tiles are only zeroed and multiplied.
        unsafe {
            asm!(
                "ldtilecfg [{cfg}]",
                "tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3",
                "tilezero tmm4", "tilezero tmm5",
                "2:",
                "tdpbf16ps tmm0, tmm4, tmm5",
                "tdpbf16ps tmm1, tmm4, tmm5",
                "tdpbf16ps tmm2, tmm4, tmm5",
                "tdpbf16ps tmm3, tmm4, tmm5",
                "dec {n}",
                "jnz 2b",
                "tilerelease",
                cfg = in(reg) cfg.0.as_ptr(),
                n = inout(reg) reps => _,
                options(nostack),
            );
        }
        (reps * 4 * N * N * K) as f64 / t.elapsed().as_secs_f64()
    }

    /// The best of five runs of `rate`.
    fn best(rate: impl Fn() -> f64) -> f64 {
        (0..5).map(|_| rate()).fold(0.0, f64::max)
    }

    pub(super) fn main() {
        let avx512_bf16 =
            is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bf16");
        let amx = amx_bf16();
        let tiles = if amx { request_tiles() } else { Err(0) };
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut outputs, mut dot_diff, mut amx_diff) = (0, 0, 0);
        for _ in 0..PRODUCTS {
            let ops = Operands::random(&mut rng);
            let chain = ops.chain();
            outputs += N * N;
            if avx512_bf16 {
                // SAFETY: checked above.
                dot_diff += differing(&unsafe { vdpbf16ps(&ops) }, &chain);
            }
            if tiles.is_ok() {
                // SAFETY: checked above, and the tiles were granted.
                amx_diff += differing(&unsafe { tdpbf16ps(&ops) }, &chain);
            }
        }
        println!("{outputs} outputs of {PRODUCTS} random 16x32 by 32x16 bf16 products");
        println!(
            "outputs whose bits differ from the simulator's chain of fp32 fused multiply-adds:"
        );
        if avx512_bf16 {
            println!("  VDPBF16PS (AVX-512 BF16, step l in the odd half)  {dot_diff}");
        } else {
            println!("  VDPBF16PS: this processor has no AVX-512 BF16");
        }
        match tiles {
            Ok(()) => println!("  TDPBF16PS (AMX)                                   {amx_diff}"),
            Err(_) if !amx => println!("  TDPBF16PS: this processor has no AMX-BF16"),
            Err(errno) => println!("  TDPBF16PS: Linux refused the tile state (errno {errno})"),
        }
        if !is_x86_feature_detected!("avx512f") {
            return;
        }
        println!("multiply-adds per second, one thread, best of five:");
        let reps = 20_000_000;
        // SAFETY: AVX-512 F is checked above.
        let fma = best(|| unsafe { fma_rate(reps) });
        println!("  fp32 VFMADD231PS  {:>7.1} G", fma / 1e9);
        if avx512_bf16 {
            // SAFETY: checked above.
            let dot = best(|| unsafe { dot_rate(reps) });
            println!(
                "  bf16 VDPBF16PS    {:>7.1} G ({:.2}x the fused multiply-adds)",
                dot / 1e9,
                dot / fma
            );
        }
        if tiles.is_ok() {
            // SAFETY: checked above, and the tiles were granted.
            let tile = best(|| unsafe { tile_rate(reps / 20) });
            println!(
                "  bf16 TDPBF16PS    {:>7.1} G ({:.1}x the fused multiply-adds)",
                tile / 1e9,
                tile / fma
            );
        }
    }
}
