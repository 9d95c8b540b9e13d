//! Shared helpers: random inputs and the comparison every kernel must pass.

#![allow(dead_code)]

use autotune::__private::Impl;
use autotune::{Element, Error, Tensor, TensorMut};
use std::process::Command;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub trait Float: Element {
    /// Relative tolerance of a kernel against the reference: the reference and
    /// the kernels may sum in different orders.
    const RTOL: f64;
    /// A signalling NaN with a payload no arithmetic produces: an output element
    /// that still holds it was never written.
    const POISON: Self;
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    fn bits(self) -> u64;
}

impl Float for f32 {
    const RTOL: f64 = 1e-4;
    const POISON: f32 = f32::from_bits(0x7FA0_A5A5);
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Float for f64 {
    const RTOL: f64 = 1e-10;
    const POISON: f64 = f64::from_bits(0x7FF4_A5A5_A5A5_A5A5);
    fn bits(self) -> u64 {
        self.to_bits()
    }
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

/// Elements on each side of an output buffer that a kernel must leave alone.
const GUARD: usize = 16;

/// Runs an operator's specialised-or-generic kernel and its generic kernel, and
/// compares both with the reference: with an owned output, and writing into a
/// caller's buffer that is poisoned (every element must be written) and
/// guarded on both sides (nothing else may be).
pub fn check<T: Float, const R: usize>(
    what: &str,
    run: impl Fn(Impl, Option<TensorMut<'_, T, R>>) -> Result<Option<Tensor<T, R>>, Error>,
) {
    let want = run(Impl::Reference, None)
        .unwrap_or_else(|e| panic!("{what}: reference failed: {e}"))
        .expect("owned output");
    let n = want.data().len();
    for imp in [Impl::Kernel, Impl::Generic] {
        let got = run(imp, None)
            .unwrap_or_else(|e| panic!("{what}: {imp:?} failed: {e}"))
            .expect("owned output");
        assert_close(&got, &want, &format!("{what} ({imp:?})"));
        let mut buf = vec![T::POISON; n + 2 * GUARD];
        let out = TensorMut::new(&mut buf[GUARD..GUARD + n], want.dims());
        run(imp, Some(out)).unwrap_or_else(|e| panic!("{what}: {imp:?} into a buffer: {e}"));
        let (lo, rest) = buf.split_at(GUARD);
        let (body, hi) = rest.split_at(n);
        assert!(
            lo.iter().chain(hi).all(|x| x.bits() == T::POISON.bits()),
            "{what} ({imp:?}): the kernel wrote outside its output"
        );
        if let Some(e) = body.iter().position(|x| x.bits() == T::POISON.bits()) {
            panic!("{what} ({imp:?}): output element {e} was never written");
        }
        let got = Tensor::from_vec(body.to_vec(), want.dims()).expect("the length matches");
        assert_close(&got, &want, &format!("{what} ({imp:?}, into a buffer)"));
    }
}

/// Runs the ignored test `name` of this binary in a child process and asserts
/// that it passed.
pub fn in_child(name: &str) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "{name} failed in its child process ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
