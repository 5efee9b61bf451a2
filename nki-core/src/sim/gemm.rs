//! The simulator's fp32 GEMM for `nc_matmul`: `c (+)= stationaryᵀ · moving`, each output
//! element a chain of fused multiply-adds over the contraction in order from `+0`, then added
//! to `c` (or to `+0`).
//!
//! Those are the bits the general-purpose GEMM (matrixmultiply) gives on the same processors
//! (its kernels run the whole contraction, at most 128 partitions, in one pass of fused
//! multiply-adds), so this is a faster route to the same result, not a new semantics. It is
//! faster for the shapes `nc_matmul` has (`K ≤ 128`, `M ≤ 128`, `N ≤ 512`, operands in tile
//! rows) because it packs little: the stationary operand's row `l` already holds the `M`
//! factors that step `l` broadcasts, contiguous, and is read in place; the moving operand's row
//! `l` holds the `N` factors it streams, and each block of its columns is copied into a
//! contiguous panel once, before the row blocks read it (its rows are far apart in the tile:
//! 2 KiB for 512 columns, which maps them all to a few L1 sets, or a whole input row when the
//! tile reads a kernel input in place). While it packs one block it fetches the next block's
//! rows into L2. A micro-kernel keeps a block of `rows × (vectors · lanes)`
//! sums in registers through the whole contraction; the column blocks' ragged ends are masked
//! (a block of one vector's columns or fewer runs on a one-vector kernel), whole vectors are
//! read and written unmasked (AVX2's masked moves were a tenth of a linear's time on a Zen 3
//! core), the packed panel always (its columns past the block are zero), and the rows are cut
//! into near-equal blocks (20 rows are two blocks of 10, not 14 and 6).
//!
//! Written once ([`fused_gemm_kernels`], over the primitives [`fused_gemm_isa`] declares from
//! each instruction set's intrinsics) and compiled for AVX-512 and for AVX2 with FMA;
//! processors with neither decline ([`fused_gemm`] returns `false`) and the caller uses the
//! general GEMM, whose kernels there do not fuse.

/// A row-major operand: row `r` starts at `data[r * stride]`.
#[derive(Clone, Copy)]
pub(crate) struct Operand<'a> {
    /// The elements, from row 0's first.
    pub(crate) data: &'a [f32],
    /// Elements from one row's start to the next's.
    pub(crate) stride: usize,
}

impl Operand<'_> {
    /// Row `r`'s first `n` elements.
    pub(crate) fn row(&self, r: usize, n: usize) -> &[f32] {
        &self.data[r * self.stride..r * self.stride + n]
    }
}

/// One product: `c[i][j] = (c[i][j] or +0) + Σ_l stationary[l][i] · moving[l][j]` for `i < m`,
/// `j < n`, `l < k`, the sum a chain of fused multiply-adds from `+0` in order of `l`.
#[derive(Clone, Copy)]
struct Product {
    m: usize,
    n: usize,
    k: usize,
    astride: usize,
    bstride: usize,
    cstride: usize,
    accumulate: bool,
}

/// `c (+)= stationaryᵀ · moving` for a `[k, m]` stationary and a `[k, n]` moving operand into
/// the `[m, n]` rows of `c` (see the module doc for the bits). Returns `false`, with `c`
/// untouched, on a processor without fused multiply-add vectors.
///
/// # Panics
/// When an operand or `c` is shorter than its shape and stride say (a bug in the caller).
#[allow(clippy::too_many_arguments)]
pub(crate) fn fused_gemm(
    c: &mut [f32],
    cstride: usize,
    stationary: Operand<'_>,
    m: usize,
    moving: Operand<'_>,
    k: usize,
    n: usize,
    accumulate: bool,
) -> bool {
    let Some(isa) = Isa::detect() else {
        return false;
    };
    run(isa, c, cstride, (stationary, m), (moving, n), k, accumulate);
    true
}

/// Whether this processor has fused multiply-add vectors, so that [`fused_gemm`] runs (and the
/// banded matmul, which continues the same chains band by band, gives its bits). The general
/// GEMM's own kernels fuse on these processors too (AVX-512, AVX2 with FMA), not on the others.
pub(crate) fn fused_multiply_add() -> bool {
    Isa::detect().is_some()
}

/// The instruction sets the kernels are compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Isa {
    Avx512,
    Avx2Fma,
}

impl Isa {
    /// The widest this processor runs, if any.
    fn detect() -> Option<Isa> {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") {
                return Some(Isa::Avx512);
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                return Some(Isa::Avx2Fma);
            }
        }
        None
    }
}

/// [`fused_gemm`] on kernels for `isa`, which this processor must support.
fn run(
    isa: Isa,
    c: &mut [f32],
    cstride: usize,
    (stationary, m): (Operand<'_>, usize),
    (moving, n): (Operand<'_>, usize),
    k: usize,
    accumulate: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    let fits = |len: usize, rows: usize, stride: usize, cols: usize| {
        rows == 0 || (rows - 1) * stride + cols <= len
    };
    assert!(
        fits(stationary.data.len(), k, stationary.stride, m)
            && fits(moving.data.len(), k, moving.stride, n)
            && fits(c.len(), m, cstride, n),
        "GEMM operands inside their slices"
    );
    let product = Product {
        m,
        n,
        k,
        astride: stationary.stride,
        bstride: moving.stride,
        cstride,
        accumulate,
    };
    let (a, b, c) = (
        stationary.data.as_ptr(),
        moving.data.as_ptr(),
        c.as_mut_ptr(),
    );
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the assert above keeps every access inside the slices (the kernels read and
    // write only rows `< k` / `< m` and columns `< m` / `< n`, masking ragged ends), `c` is a
    // `&mut` so it aliases neither operand, and `isa` is supported (`Isa::detect`).
    unsafe {
        match isa {
            Isa::Avx512 => avx512::gemm(product, a, b, c),
            Isa::Avx2Fma => avx2::gemm(product, a, b, c),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa, product, a, b, c);
        unreachable!("no GEMM kernels for this architecture");
    }
}

/// Scratch for [`fused_gemm_kernels`]' packed panel, 64-byte aligned (a panel row is whole
/// cache lines): on the stack up to `nc_matmul`'s 128 rows of 32 columns, uninitialised (the
/// kernels write every element they read).
struct Panel {
    stack: std::mem::MaybeUninit<[Line; PANEL_LINES]>,
    heap: Vec<Line>,
}

/// One cache line of floats.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

/// Lines of the on-stack panel: 128 rows of 32 floats.
const PANEL_LINES: usize = 128 * 2;

impl Panel {
    /// Room for `len` floats.
    fn new(len: usize) -> Self {
        let lines = len.div_ceil(16);
        Panel {
            stack: std::mem::MaybeUninit::uninit(),
            heap: if lines > PANEL_LINES {
                vec![Line([0.0; 16]); lines]
            } else {
                Vec::new()
            },
        }
    }

    /// The panel's first float (written before it is read).
    fn as_mut_ptr(&mut self) -> *mut f32 {
        if self.heap.is_empty() {
            self.stack.as_mut_ptr().cast()
        } else {
            self.heap.as_mut_ptr().cast()
        }
    }
}

/// How many rows each block of `m` rows cut into near-equal blocks of at most `most` takes,
/// first to last: `20` by `14` is `[10, 10]`, `128` by `14` is eight of 13 and two of 12.
fn row_blocks(m: usize, most: usize) -> impl Iterator<Item = usize> {
    let blocks = m.div_ceil(most);
    let (base, extra) = (m / blocks.max(1), m % blocks.max(1));
    (0..blocks).map(move |b| base + usize::from(b < extra))
}

/// The GEMM driver and micro-kernel over one instruction set's primitives, which the invoking
/// module defines ([`fused_gemm_isa`] does): `Vector`, `Mask`, `LANES`, `mask(len)` (the first `len` lanes), `zero()`,
/// `splat(*const f32)`, `load(*const f32, Mask)` (masked-off lanes read as zero and touch no
/// memory), `store(*mut f32, Mask, Vector)`, `load_all(*const f32)`, `store_all(*mut f32,
/// Vector)` (every lane), `fma(a, b, acc)` and `add(a, b)`, each a `#[target_feature]` function
/// of that set.
#[cfg(target_arch = "x86_64")]
macro_rules! fused_gemm_kernels {
    (feature: $feature:literal, rows: $rows:literal, vectors: $vectors:literal, dispatch: [$($r:literal)*]) => {
        /// Output rows per micro-kernel, at most.
        const ROWS: usize = $rows;
        /// Vectors of output columns per micro-kernel.
        const VECTORS: usize = $vectors;

        /// [`super::fused_gemm`] on this instruction set.
        ///
        /// # Safety
        /// The processor supports it, and `a`, `b`, `c` hold the `product`'s operands and
        /// output at its strides.
        #[target_feature(enable = $feature)]
        pub(super) unsafe fn gemm(product: super::Product, a: *const f32, b: *const f32, c: *mut f32) {
            let width = LANES * VECTORS;
            // Each block of the moving operand's columns is packed before the micro-kernels
            // read it (see `pack`).
            let mut panel = super::Panel::new(product.k * width);
            let packed = super::Product { bstride: width, ..product };
            let b_tile = b;
            let mut j = 0;
            while j < product.n {
                let cols = (product.n - j).min(width);
                // Each vector's columns: `None` where all its lanes are in the block (plain
                // loads and stores, cheaper than masked ones).
                let masks: [Option<Mask>; VECTORS] = std::array::from_fn(|v| {
                    let lanes = cols.saturating_sub(v * LANES).min(LANES);
                    (lanes < LANES).then(|| mask(lanes))
                });
                // The next block's first column, whose rows `pack` fetches into cache as it
                // goes (they are far apart, which the hardware does not follow).
                // SAFETY: only an address, computed inside `b`'s rows (columns `< n`).
                let next = (j + width < product.n).then(|| unsafe { b_tile.add(j + width) });
                // SAFETY: rows `< k` and columns `j..j + cols` of `b` are inside the product,
                // and the panel holds `k` rows of `width`.
                unsafe { pack(product, b_tile.add(j), panel.as_mut_ptr(), masks, next) };
                let b = panel.as_mut_ptr().cast_const();
                let mut i = 0;
                for rows in super::row_blocks(product.m, ROWS) {
                    // SAFETY: rows `i..i + rows` and columns `j..j + cols` are inside the
                    // product (the caller's contract).
                    let (a, c) = unsafe { (a.add(i), c.add(i * product.cstride + j)) };
                    // A block of one vector's columns or fewer (a ragged end) runs on the
                    // one-vector kernel: the others' lanes would all be masked off.
                    match (rows, cols <= LANES) {
                        // SAFETY: as above; the panel's columns past `cols` are zero and never
                        // stored.
                        $(($r, true) => unsafe {
                            micro::<$r, 1>(packed, a, b, c, [masks[0]])
                        },
                        ($r, false) => unsafe {
                            micro::<$r, VECTORS>(packed, a, b, c, masks)
                        },)*
                        _ => unreachable!("row blocks hold 1..=ROWS rows"),
                    }
                    i += rows;
                }
                j += width;
            }
        }

        /// The lanes of `p` under `mask`, every lane where it is `None`.
        ///
        /// # Safety
        /// Those lanes are readable.
        #[target_feature(enable = $feature)]
        #[inline]
        unsafe fn load_columns(p: *const f32, mask: Option<Mask>) -> Vector {
            // SAFETY: the caller's.
            unsafe { mask.map_or_else(|| load_all(p), |m| load(p, m)) }
        }

        /// Stores the lanes of `v` under `mask` to `p`, every lane where it is `None`.
        ///
        /// # Safety
        /// Those lanes are writable.
        #[target_feature(enable = $feature)]
        #[inline]
        unsafe fn store_columns(p: *mut f32, mask: Option<Mask>, v: Vector) {
            // SAFETY: the caller's.
            unsafe { mask.map_or_else(|| store_all(p, v), |m| store(p, m, v)) }
        }

        /// Copies rows `< k` of the moving operand's block of columns at `b`, masked to the
        /// block's columns, into `panel`, `LANES * VECTORS` apart (masked-off columns zero).
        /// The tile's own rows are a multiple of 2 KiB apart for 512 columns, which maps every
        /// row to the same few L1 sets: read in place, each row block's micro-kernel would miss
        /// L1 on every row; packed, the block is read from memory once and from L1 after.
        ///
        /// # Safety
        /// `b` holds the block's rows at the product's stride; `panel` holds `k` packed rows;
        /// `next` is only an address (the next block's first column, prefetched).
        #[target_feature(enable = $feature)]
        #[inline]
        unsafe fn pack(
            product: super::Product,
            mut b: *const f32,
            mut panel: *mut f32,
            masks: [Option<Mask>; VECTORS],
            mut next: Option<*const f32>,
        ) {
            for _ in 0..product.k {
                for (v, &m) in masks.iter().enumerate() {
                    // SAFETY: row `l < k` of the block, masked to its columns; the panel row.
                    unsafe { store_all(panel.add(v * LANES), load_columns(b.add(v * LANES), m)) };
                }
                if let Some(row) = next {
                    // Into L2, for the next `pack` after this block's micro-kernels: a hint,
                    // which reads nothing the program can see and never faults.
                    for v in 0..VECTORS {
                        _mm_prefetch::<_MM_HINT_T1>(row.wrapping_add(v * LANES).cast());
                    }
                    next = Some(row.wrapping_add(product.bstride));
                }
                // SAFETY: the next row of each (one past the last at the end, not read).
                unsafe {
                    b = b.add(product.bstride);
                    panel = panel.add(LANES * VECTORS);
                }
            }
        }

        /// `R` output rows by `V` masked vectors of columns (`VECTORS`, or one for a narrow
        /// block): the sums stay in registers through the whole contraction, then go to `c`
        /// once.
        ///
        /// # Safety
        /// As [`gemm`], for the block at `a` (its first column), `b` (its first column) and
        /// `c` (its first element).
        #[target_feature(enable = $feature)]
        #[inline]
        unsafe fn micro<const R: usize, const V: usize>(
            product: super::Product,
            mut a: *const f32,
            mut b: *const f32,
            c: *mut f32,
            masks: [Option<Mask>; V],
        ) {
            // Nothing but the sums' arithmetic in this loop, over indices: with a prefetch in
            // it (`pack` prefetches now), or the sums walked with `iter_mut` and `zip`, rustc
            // kept every sum on the stack as well as in its register, a 64-byte store per
            // fused multiply-add, at half the speed (docs/bench.md, "The GEMM's sums").
            let mut acc = [[zero(); V]; R];
            for _ in 0..product.k {
                // SAFETY: row `l < k` of each operand (the panel's rows are whole vectors).
                unsafe {
                    let moving: [Vector; V] = std::array::from_fn(|v| load_all(b.add(v * LANES)));
                    #[allow(clippy::needless_range_loop)] // indices, as said above
                    for i in 0..R {
                        let x = splat(a.add(i));
                        for v in 0..V {
                            acc[i][v] = fma(x, moving[v], acc[i][v]);
                        }
                    }
                    a = a.add(product.astride);
                    b = b.add(product.bstride);
                }
            }
            for (i, sums) in acc.iter().enumerate() {
                for (v, &sum) in sums.iter().enumerate() {
                    // SAFETY: row `i < R` of the block, masked to its columns.
                    unsafe {
                        let out = c.add(i * product.cstride + v * LANES);
                        let start =
                            if product.accumulate { load_columns(out, masks[v]) } else { zero() };
                        store_columns(out, masks[v], add(sum, start));
                    }
                }
            }
        }
    };
}

/// One instruction set's primitives for [`fused_gemm_kernels`], each a `#[target_feature]`
/// wrapper of the intrinsic it names, then the kernels over them.
#[cfg(target_arch = "x86_64")]
macro_rules! fused_gemm_isa {
    (
        feature: $feature:literal, vector: $vector:ty, mask: $mask:ty, lanes: $lanes:literal,
        mask_of: $mask_of:expr, zero: $zero:ident, splat: $splat:ident,
        load: |$lp:ident, $lm:ident| $load:expr, store: |$sp:ident, $sm:ident, $sv:ident| $store:expr,
        load_all: $load_all:ident, store_all: $store_all:ident,
        fma: $fma:ident, add: $add:ident,
        rows: $rows:literal, vectors: $vectors:literal, dispatch: [$($r:literal)*]
    ) => {
        use std::arch::x86_64::*;

        type Vector = $vector;
        type Mask = $mask;
        const LANES: usize = $lanes;

        #[target_feature(enable = $feature)]
        #[inline]
        fn mask(len: usize) -> Mask {
            $mask_of(len)
        }
        #[target_feature(enable = $feature)]
        #[inline]
        fn zero() -> Vector {
            $zero()
        }
        #[target_feature(enable = $feature)]
        #[inline]
        unsafe fn splat(p: *const f32) -> Vector {
            // SAFETY: the caller's pointer is readable.
            $splat(unsafe { *p })
        }
        #[target_feature(enable = $feature)]
        #[inline]
        unsafe fn load($lp: *const f32, $lm: Mask) -> Vector {
            // SAFETY: the caller's lanes under the mask are readable; the others are not
            // touched.
            unsafe { $load }
        }
        #[target_feature(enable = $feature)]
        #[inline]
        unsafe fn store($sp: *mut f32, $sm: Mask, $sv: Vector) {
            // SAFETY: the caller's lanes under the mask are writable; the others are not
            // touched.
            unsafe { $store }
        }
        #[target_feature(enable = $feature)]
        #[inline]
        unsafe fn load_all(p: *const f32) -> Vector {
            // SAFETY: the caller's lanes are readable.
            unsafe { $load_all(p) }
        }
        #[target_feature(enable = $feature)]
        #[inline]
        unsafe fn store_all(p: *mut f32, v: Vector) {
            // SAFETY: the caller's lanes are writable.
            unsafe { $store_all(p, v) }
        }
        #[target_feature(enable = $feature)]
        #[inline]
        fn fma(a: Vector, b: Vector, acc: Vector) -> Vector {
            $fma(a, b, acc)
        }
        #[target_feature(enable = $feature)]
        #[inline]
        fn add(a: Vector, b: Vector) -> Vector {
            $add(a, b)
        }

        fused_gemm_kernels!(feature: $feature, rows: $rows, vectors: $vectors,
            dispatch: [$($r)*]);
    };
}

/// The kernels on AVX-512: 16 lanes, 14 rows by two vectors (28 of the 32 registers hold sums).
#[cfg(target_arch = "x86_64")]
mod avx512 {
    fused_gemm_isa!(
        feature: "avx512f", vector: __m512, mask: __mmask16, lanes: 16,
        mask_of: |len: usize| ((1u32 << len) - 1) as __mmask16,
        zero: _mm512_setzero_ps, splat: _mm512_set1_ps,
        load: |p, m| _mm512_maskz_loadu_ps(m, p), store: |p, m, v| _mm512_mask_storeu_ps(p, m, v),
        load_all: _mm512_loadu_ps, store_all: _mm512_storeu_ps,
        fma: _mm512_fmadd_ps, add: _mm512_add_ps,
        rows: 14, vectors: 2, dispatch: [1 2 3 4 5 6 7 8 9 10 11 12 13 14]
    );
}

/// The kernels on AVX2 with FMA: 8 lanes, 6 rows by two vectors (12 of the 16 registers hold
/// sums).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    fused_gemm_isa!(
        feature: "avx2,fma", vector: __m256, mask: __m256i, lanes: 8,
        mask_of: |len: usize| _mm256_cmpgt_epi32(
            _mm256_set1_epi32(len as i32),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        ),
        zero: _mm256_setzero_ps, splat: _mm256_set1_ps,
        load: |p, m| _mm256_maskload_ps(p, m), store: |p, m, v| _mm256_maskstore_ps(p, m, v),
        load_all: _mm256_loadu_ps, store_all: _mm256_storeu_ps,
        fma: _mm256_fmadd_ps, add: _mm256_add_ps,
        rows: 6, vectors: 2, dispatch: [1 2 3 4 5 6]
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: per element, `fma` over `l` in order from `+0`, then `+ c` or `+ 0`.
    fn chains(c: &mut [f32], a: &[f32], m: usize, b: &[f32], n: usize, k: usize, acc: bool) {
        for i in 0..m {
            for j in 0..n {
                let sum = (0..k).fold(0f32, |s, l| a[l * m + i].mul_add(b[l * n + j], s));
                let start = if acc { c[i * n + j] } else { 0.0 };
                c[i * n + j] = sum + start;
            }
        }
    }

    /// Values of every sign and scale: signed zeros, subnormals, products that underflow to
    /// `-0`, infinities and NaN where `special`.
    fn values(len: usize, seed: usize, special: bool) -> Vec<f32> {
        (0..len)
            .map(|i| match (i * 7 + seed) % 23 {
                0 => -0.0,
                1 => f32::MIN_POSITIVE / 4.0,
                2 => -1e-30,
                3 if special => f32::INFINITY,
                4 if special => f32::NAN,
                _ => ((i + seed) as f32 * 0.618).sin() * 10f32.powi(((i + seed) % 11) as i32 - 5),
            })
            .collect()
    }

    /// Bit patterns, every NaN as one (which NaN an operation returns is not pinned).
    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter()
            .map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() })
            .collect()
    }

    fn isas() -> Vec<Isa> {
        match Isa::detect() {
            Some(Isa::Avx512) => {
                let avx2 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
                [Some(Isa::Avx512), avx2.then_some(Isa::Avx2Fma)]
                    .into_iter()
                    .flatten()
                    .collect()
            }
            Some(isa) => vec![isa],
            None => vec![],
        }
    }

    #[test]
    fn every_ragged_shape_gives_the_chains_bits() {
        for isa in isas() {
            for (m, n, k) in [
                (1, 1, 1),
                (3, 17, 5),
                (20, 33, 128),
                (29, 70, 64),
                (15, 9, 0),
                // nc_matmul's largest, and a contraction past the on-stack panel.
                (128, 512, 128),
                (5, 40, 300),
            ] {
                for special in [false, true] {
                    let (a, b) = (values(k * m, 1, special), values(k * n, 2, special));
                    let start = values(m * n, 3, false);
                    for accumulate in [false, true] {
                        let (mut got, mut want) = (start.clone(), start.clone());
                        let (st, mv) = (
                            Operand {
                                data: &a,
                                stride: m,
                            },
                            Operand {
                                data: &b,
                                stride: n,
                            },
                        );
                        run(isa, &mut got, n, (st, m), (mv, n), k, accumulate);
                        chains(&mut want, &a, m, &b, n, k, accumulate);
                        assert_eq!(bits(&got), bits(&want), "{isa:?} {m}x{n}x{k} {accumulate}");
                    }
                }
            }
        }
    }

    #[test]
    fn strided_operands_and_output_touch_only_their_elements() {
        // Operands and output inside wider rows, with sentinels in the columns around them.
        let (m, n, k, pad) = (13, 37, 40, 5);
        for isa in isas() {
            let a = values(k * (m + pad), 4, false);
            let b = values(k * (n + pad), 5, false);
            let mut got = vec![7.0f32; m * (n + pad)];
            let st = Operand {
                data: &a,
                stride: m + pad,
            };
            let mv = Operand {
                data: &b,
                stride: n + pad,
            };
            run(isa, &mut got, n + pad, (st, m), (mv, n), k, true);
            for i in 0..m {
                for j in 0..n + pad {
                    let want = if j < n {
                        (0..k).fold(0f32, |s, l| {
                            a[l * (m + pad) + i].mul_add(b[l * (n + pad) + j], s)
                        }) + 7.0
                    } else {
                        7.0
                    };
                    assert_eq!(
                        got[i * (n + pad) + j].to_bits(),
                        want.to_bits(),
                        "{isa:?} ({i}, {j})"
                    );
                }
            }
        }
    }

    #[test]
    fn the_general_gemm_gives_the_same_bits_where_it_fuses() {
        if Isa::detect().is_none() {
            return; // no fused kernels here: nothing to compare
        }
        let (m, n, k) = (37, 530, 128);
        let (a, b) = (values(k * m, 6, false), values(k * n, 7, false));
        let start = values(m * n, 8, false);
        for accumulate in [false, true] {
            let (mut got, mut want) = (start.clone(), start.clone());
            let (st, mv) = (
                Operand {
                    data: &a,
                    stride: m,
                },
                Operand {
                    data: &b,
                    stride: n,
                },
            );
            assert!(fused_gemm(&mut got, n, st, m, mv, k, n, accumulate));
            // SAFETY: a is k×m (the stationary operand, read transposed), b is k×n, the
            // output m×n, all dense.
            unsafe {
                matrixmultiply::sgemm(
                    m,
                    k,
                    n,
                    1.0,
                    a.as_ptr(),
                    1,
                    m as isize,
                    b.as_ptr(),
                    n as isize,
                    1,
                    if accumulate { 1.0 } else { 0.0 },
                    want.as_mut_ptr(),
                    n as isize,
                    1,
                );
            }
            assert_eq!(bits(&got), bits(&want), "accumulate = {accumulate}");
        }
    }

    #[test]
    fn rows_split_into_near_equal_blocks() {
        let split = |m, most| row_blocks(m, most).collect::<Vec<_>>();
        assert_eq!(split(20, 14), [10, 10]);
        assert_eq!(split(128, 14), [13, 13, 13, 13, 13, 13, 13, 13, 12, 12]);
        for m in 1..=130 {
            let blocks = split(m, 14);
            let (low, high) = (blocks.iter().min().unwrap(), blocks.iter().max().unwrap());
            assert!(
                blocks.iter().sum::<usize>() == m && *high <= 14 && high - low <= 1,
                "{m}"
            );
            assert_eq!(blocks.len(), m.div_ceil(14), "{m}");
        }
    }
}
