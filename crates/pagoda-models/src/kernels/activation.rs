//! SwiGLU's activation, `silu(gate) * up`, over rows of fused gate/up projections: vector
//! code with the kernels' `exp` (the same bits on every path), rows split over the cores when
//! there are enough of them (a 2,048-token prefill has ten million activations per layer).

use super::pool::Chunks;

use super::isa::Isa;
use super::simd::{exp, multiversion, Simd16, LANES};

/// Rows per parallel task: below this much work a task costs more than it saves.
const ROWS_PER_TASK: usize = 16;

/// `gate_up` holds rows `[gate (i) | up (i)]`; writes `silu(gate) * up` into the rows of
/// `act` (`i` wide).
pub fn silu_mul(isa: Isa, gate_up: &[f32], act: &mut [f32], i: usize) {
    assert!(isa.is_supported(), "kernel path {isa} not supported here");
    assert_eq!(
        gate_up.len(),
        2 * act.len(),
        "gate/up rows are twice the activations"
    );
    assert_eq!(act.len() % i.max(1), 0, "whole rows");
    if act.len() <= ROWS_PER_TASK * i {
        silu_rows(isa, gate_up, act, i);
        return;
    }
    let act = Chunks::new(act, ROWS_PER_TASK * i);
    let gate_up: Vec<&[f32]> = gate_up.chunks(ROWS_PER_TASK * 2 * i).collect();
    super::pool::for_each(act.count(), |t| {
        // SAFETY: task `t` alone takes chunk `t`.
        silu_rows(isa, gate_up[t], unsafe { act.get(t) }, i)
    });
}

multiversion!(fn silu_rows<>(gate_up: &[f32], act: &mut [f32], i: usize) = silu_kernel);

#[inline(always)]
unsafe fn silu_kernel<S: Simd16>(gate_up: &[f32], act: &mut [f32], i: usize) {
    let body = i / LANES * LANES;
    for (a, gu) in act.chunks_exact_mut(i).zip(gate_up.chunks_exact(2 * i)) {
        let (g, u) = (gu.as_ptr(), gu.as_ptr().add(i));
        let mut c = 0;
        while c < body {
            let gv = S::load(g.add(c));
            let sig = S::add(S::splat(1.0), exp(S::mul(gv, S::splat(-1.0))));
            S::mul(S::div(gv, sig), S::load(u.add(c))).store(a.as_mut_ptr().add(c));
            c += LANES;
        }
        for (c, out) in a.iter_mut().enumerate().skip(body) {
            // The tail through one vector too, so every element gets the same `exp`.
            let mut lanes = [0.0f32; LANES];
            lanes[0] = *g.add(c);
            let gv = S::load(lanes.as_ptr());
            let sig = S::add(S::splat(1.0), exp(S::mul(gv, S::splat(-1.0))));
            S::div(gv, sig).store(lanes.as_mut_ptr());
            *out = lanes[0] * *u.add(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silu_is_accurate_and_the_same_on_every_path() {
        let (n, i) = (37, 70);
        let gate_up: Vec<f32> = (0..n * 2 * i)
            .map(|k| ((k * 7919) % 2001) as f32 / 50.0 - 20.0)
            .collect();
        let mut want = vec![0.0; n * i];
        silu_mul(Isa::Scalar, &gate_up, &mut want, i);
        for (r, row) in want.chunks_exact(i).enumerate() {
            for (c, a) in row.iter().enumerate() {
                let (g, u) = (
                    gate_up[r * 2 * i + c] as f64,
                    gate_up[r * 2 * i + i + c] as f64,
                );
                let exact = g / (1.0 + (-g).exp()) * u;
                assert!(
                    (*a as f64 - exact).abs() <= 1e-6 * exact.abs().max(1.0),
                    "{g} {u}"
                );
            }
        }
        for isa in Isa::supported() {
            let mut got = vec![f32::NAN; n * i];
            silu_mul(isa, &gate_up, &mut got, i);
            let same = got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{isa} differs from scalar");
        }
    }
}
