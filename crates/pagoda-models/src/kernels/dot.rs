//! The one inner loop behind every matmul and attention score: a tile of `R` weight rows
//! against `C` activation rows, each output a dot product over `k`.
//!
//! Every dot product is summed in the same order whatever the tile shape, so a token's
//! result does not depend on which other tokens share its batch (batch invariance, exact).
//! Order: `LANES` lanes (16 with AVX-512, else 8), each summing every `LANES`-th element in
//! sequence; lanes folded in a fixed tree; the `k % LANES` tail added last, in sequence.

use half::{bf16, f16};

/// A weight element the kernel can widen to f32.
pub trait WeightElem: Copy + Send + Sync + 'static {
    fn to_f32(self) -> f32;
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma",
        target_feature = "f16c"
    ))]
    /// # Safety
    /// `p` must point at 8 readable elements.
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256;
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    /// # Safety
    /// `p` must point at 16 readable elements.
    unsafe fn load16(p: *const Self) -> std::arch::x86_64::__m512;
}

#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx2",
    target_feature = "fma",
    target_feature = "f16c"
))]
use std::arch::x86_64::*;

impl WeightElem for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma",
        target_feature = "f16c"
    ))]
    #[inline(always)]
    unsafe fn load8(p: *const Self) -> __m256 {
        _mm256_loadu_ps(p)
    }
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    #[inline(always)]
    unsafe fn load16(p: *const Self) -> __m512 {
        _mm512_loadu_ps(p)
    }
}

impl WeightElem for f16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma",
        target_feature = "f16c"
    ))]
    #[inline(always)]
    unsafe fn load8(p: *const Self) -> __m256 {
        _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
    }
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    #[inline(always)]
    unsafe fn load16(p: *const Self) -> __m512 {
        _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i))
    }
}

impl WeightElem for bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[cfg(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma",
        target_feature = "f16c"
    ))]
    #[inline(always)]
    unsafe fn load8(p: *const Self) -> __m256 {
        // bf16 is the top half of an f32: widen and shift.
        let wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(p as *const __m128i));
        _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16))
    }
    #[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
    #[inline(always)]
    unsafe fn load16(p: *const Self) -> __m512 {
        let wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(p as *const __m256i));
        _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16))
    }
}

/// Dot products of `R` rows starting at `w` against `C` rows starting at `x`, all of length `k`.
///
/// # Safety
/// Every pointer must point at `k` readable elements.
#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx2",
    target_feature = "fma",
    target_feature = "f16c",
    not(target_feature = "avx512f")
))]
#[inline(always)]
pub unsafe fn tile<W: WeightElem, const R: usize, const C: usize>(
    w: [*const W; R],
    x: [*const f32; C],
    k: usize,
) -> [[f32; C]; R] {
    let mut acc = [[_mm256_setzero_ps(); C]; R];
    let k8 = k / 8 * 8;
    let mut i = 0;
    while i < k8 {
        let mut xv = [_mm256_setzero_ps(); C];
        for c in 0..C {
            xv[c] = _mm256_loadu_ps(x[c].add(i));
        }
        for r in 0..R {
            let wv = W::load8(w[r].add(i));
            for c in 0..C {
                acc[r][c] = _mm256_fmadd_ps(wv, xv[c], acc[r][c]);
            }
        }
        i += 8;
    }
    let mut out = [[0.0f32; C]; R];
    for r in 0..R {
        for c in 0..C {
            let mut lanes = [0.0f32; 8];
            _mm256_storeu_ps(lanes.as_mut_ptr(), acc[r][c]);
            out[r][c] = fold_lanes(lanes) + tail::<W>(w[r], x[c], k8, k);
        }
    }
    out
}

/// AVX-512 version: 16 lanes.
///
/// # Safety
/// Every pointer must point at `k` readable elements.
#[cfg(all(
    target_arch = "x86_64",
    target_feature = "avx512f",
    target_feature = "avx2",
    target_feature = "fma",
    target_feature = "f16c"
))]
#[inline(always)]
pub unsafe fn tile<W: WeightElem, const R: usize, const C: usize>(
    w: [*const W; R],
    x: [*const f32; C],
    k: usize,
) -> [[f32; C]; R] {
    let mut acc = [[_mm512_setzero_ps(); C]; R];
    let k16 = k / 16 * 16;
    let mut i = 0;
    while i < k16 {
        let mut xv = [_mm512_setzero_ps(); C];
        for c in 0..C {
            xv[c] = _mm512_loadu_ps(x[c].add(i));
        }
        for r in 0..R {
            let wv = W::load16(w[r].add(i));
            for c in 0..C {
                acc[r][c] = _mm512_fmadd_ps(wv, xv[c], acc[r][c]);
            }
        }
        i += 16;
    }
    let mut out = [[0.0f32; C]; R];
    for r in 0..R {
        for c in 0..C {
            let mut lanes = [0.0f32; 16];
            _mm512_storeu_ps(lanes.as_mut_ptr(), acc[r][c]);
            let folded: [f32; 8] = std::array::from_fn(|l| lanes[l] + lanes[l + 8]);
            out[r][c] = fold_lanes(folded) + tail::<W>(w[r], x[c], k16, k);
        }
    }
    out
}

/// Portable version with the same summation order as the SIMD one.
///
/// # Safety
/// Every pointer must point at `k` readable elements.
#[cfg(not(all(
    target_arch = "x86_64",
    target_feature = "avx2",
    target_feature = "fma",
    target_feature = "f16c"
)))]
#[inline(always)]
pub unsafe fn tile<W: WeightElem, const R: usize, const C: usize>(
    w: [*const W; R],
    x: [*const f32; C],
    k: usize,
) -> [[f32; C]; R] {
    let k8 = k / 8 * 8;
    let mut out = [[0.0f32; C]; R];
    for r in 0..R {
        for c in 0..C {
            let mut lanes = [0.0f32; 8];
            let mut i = 0;
            while i < k8 {
                for (l, lane) in lanes.iter_mut().enumerate() {
                    *lane = (*w[r].add(i + l)).to_f32().mul_add(*x[c].add(i + l), *lane);
                }
                i += 8;
            }
            out[r][c] = fold_lanes(lanes) + tail::<W>(w[r], x[c], k8, k);
        }
    }
    out
}

#[inline(always)]
fn fold_lanes(l: [f32; 8]) -> f32 {
    ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}

#[inline(always)]
unsafe fn tail<W: WeightElem>(w: *const W, x: *const f32, from: usize, to: usize) -> f32 {
    let mut sum = 0.0f32;
    for i in from..to {
        sum += (*w.add(i)).to_f32() * *x.add(i);
    }
    sum
}

/// One dot product with the kernel's summation order.
pub fn dot<W: WeightElem>(w: &[W], x: &[f32]) -> f32 {
    assert_eq!(w.len(), x.len());
    // SAFETY: both slices hold `len` elements.
    unsafe { tile::<W, 1, 1>([w.as_ptr()], [x.as_ptr()], w.len())[0][0] }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 500.0 - 1.0)
            .collect()
    }

    #[test]
    fn dot_matches_f64_reference_for_all_tails() {
        for k in [1, 7, 8, 9, 31, 64, 100] {
            let w = values(k, 1);
            let x = values(k, 2);
            let want: f64 = w.iter().zip(&x).map(|(a, b)| *a as f64 * *b as f64).sum();
            assert!((dot(&w, &x) as f64 - want).abs() < 1e-4, "k={k}");
        }
    }

    #[test]
    fn tile_entries_equal_single_dots_exactly() {
        let k = 77;
        let w: Vec<f16> = values(3 * k, 3).into_iter().map(f16::from_f32).collect();
        let x = values(2 * k, 4);
        let t = unsafe {
            tile::<f16, 3, 2>(
                [w.as_ptr(), w.as_ptr().add(k), w.as_ptr().add(2 * k)],
                [x.as_ptr(), x.as_ptr().add(k)],
                k,
            )
        };
        for r in 0..3 {
            for c in 0..2 {
                let single = dot(&w[r * k..(r + 1) * k], &x[c * k..(c + 1) * k]);
                assert_eq!(t[r][c].to_bits(), single.to_bits());
            }
        }
    }

    #[test]
    fn bf16_weights_widen_exactly() {
        let w: Vec<bf16> = values(16, 5).into_iter().map(bf16::from_f32).collect();
        let wf: Vec<f32> = w.iter().map(|v| v.to_f32()).collect();
        let x = values(16, 6);
        assert_eq!(dot(&w, &x).to_bits(), dot(&wf, &x).to_bits());
    }
}
