//! Shared helpers: random inputs and the comparison every kernel must pass.

#![allow(dead_code)]

use autotune::__private::Impl;
use autotune::{Element, Error, Tensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub trait Float: Element {
    /// Relative tolerance of a kernel against the reference: the reference and
    /// the kernels may sum in different orders.
    const RTOL: f64;
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
}

impl Float for f32 {
    const RTOL: f64 = 1e-4;
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Float for f64 {
    const RTOL: f64 = 1e-10;
    fn from_f64(x: f64) -> Self {
        x
    }
    fn to_f64(self) -> f64 {
        self
    }
}

/// A tensor of uniform values in [-1, 1), reproducible from `seed`.
pub fn random<T: Float, const R: usize>(dims: [usize; R], seed: u64) -> Tensor<T, R> {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = dims.iter().product();
    let data = (0..n)
        .map(|_| T::from_f64(rng.gen_range(-1.0..1.0)))
        .collect();
    Tensor::from_vec(data, dims).expect("length matches")
}

/// Asserts `got ≈ want` elementwise: |g - w| <= rtol·(|w| + max|want|).
pub fn assert_close<T: Float, const R: usize>(got: &Tensor<T, R>, want: &Tensor<T, R>, what: &str) {
    assert_eq!(got.dims(), want.dims(), "{what}: output shape");
    let scale = want
        .data()
        .iter()
        .map(|w| w.to_f64().abs())
        .filter(|w| w.is_finite())
        .fold(0.0, f64::max);
    for (i, (g, w)) in got.data().iter().zip(want.data()).enumerate() {
        let (g, w) = (g.to_f64(), w.to_f64());
        if g == w || (g.is_nan() && w.is_nan()) {
            continue; // also covers equal infinities
        }
        let tol = T::RTOL * (w.abs() + scale);
        assert!(
            w.is_finite() && (g - w).abs() <= tol,
            "{what}: element {i} is {g}, reference {w} (tolerance {tol:e})"
        );
    }
}

/// Runs an operator's specialised-or-generic kernel and its generic kernel, and
/// compares both with the reference.
pub fn check<T: Float, const R: usize>(
    what: &str,
    run: impl Fn(Impl) -> Result<Option<Tensor<T, R>>, Error>,
) {
    let want = run(Impl::Reference)
        .unwrap_or_else(|e| panic!("{what}: reference failed: {e}"))
        .expect("owned output");
    for imp in [Impl::Kernel, Impl::Generic] {
        let got = run(imp)
            .unwrap_or_else(|e| panic!("{what}: {imp:?} failed: {e}"))
            .expect("owned output");
        assert_close(&got, &want, &format!("{what} ({imp:?})"));
    }
}
