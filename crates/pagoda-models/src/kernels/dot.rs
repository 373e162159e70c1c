//! The weighted sum of value rows in attention: `out = out * scale + p * v`, one fused
//! multiply-add per element on every path.

use super::simd::{Elem, Simd16, LANES};

/// `out = out * scale + p * v` over `len` elements.
///
/// # Safety
/// `out` and `v` must point at `len` elements; see `Simd16`.
#[inline(always)]
pub unsafe fn scale_add<S: Simd16, W: Elem>(
    out: *mut f32,
    scale: f32,
    p: f32,
    v: *const W,
    len: usize,
) {
    let body = len / LANES * LANES;
    let (sv, pv) = (S::splat(scale), S::splat(p));
    let mut i = 0;
    while i < body {
        let o = S::mul(S::load(out.add(i)), sv);
        S::fma(W::load::<S>(v.add(i)), pv, o).store(out.add(i));
        i += LANES;
    }
    for i in body..len {
        *out.add(i) = (*v.add(i)).to_f32().mul_add(p, *out.add(i) * scale);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::simd::multiversion;
    use crate::kernels::Isa;
    use half::f16;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 500.0 - 1.0)
            .collect()
    }

    #[inline(always)]
    unsafe fn axpy<S: Simd16, W: Elem>(out: &mut [f32], v: &[W]) {
        scale_add::<S, W>(out.as_mut_ptr(), 0.75, -1.25, v.as_ptr(), out.len())
    }
    multiversion!(fn scaled_add<W: Elem>(out: &mut [f32], v: &[W]) = axpy);

    #[test]
    fn every_path_scales_and_adds_the_same_bits() {
        for k in [1, 7, 16, 17, 64, 100, 128] {
            let v: Vec<f16> = values(k, 5).into_iter().map(f16::from_f32).collect();
            let mut want = values(k, 6);
            let start = want.clone();
            scaled_add(Isa::Scalar, &mut want, &v);
            for (i, w) in want.iter().enumerate() {
                let exact = start[i] as f64 * 0.75 - 1.25 * v[i].to_f64();
                assert!((*w as f64 - exact).abs() < 1e-6, "k={k}");
            }
            for isa in Isa::supported() {
                let mut got = start.clone();
                scaled_add(isa, &mut got, &v);
                assert_eq!(got, want, "{isa} k={k}");
            }
        }
    }
}
