//! Every operator of the test set: the specialised kernel (at its specialised
//! shapes) and the generic kernel (at those and at odd shapes: 1, 3, 17, 127 and
//! a larger one) equal the naive reference. A few references are in turn checked
//! against loops written out here by hand.

mod common;

use autotune::Tensor;
use autotune_tests::ops;
use common::{assert_close, check, random};

#[test]
fn matmul() {
    for (m, n, k) in [
        (64, 48, 32),
        (1, 17, 127),
        (1, 1, 1),
        (3, 17, 127),
        (127, 3, 17),
        (150, 130, 200),
    ] {
        let a = random::<f32, 2>([m, k], 1);
        let b = random::<f32, 2>([k, n], 2);
        check(&format!("matmul {m}x{n}x{k}"), |imp, out| {
            ops::__autotune_matmul(imp, a.view(), b.view(), out)
        });
    }
}

/// The generic kernel keeps its scratch per thread between calls: callers on
/// several threads, each growing and shrinking its calls (and then exiting,
/// which frees the block), all get the reference's results.
#[test]
fn generic_matmul_on_several_threads_growing_and_shrinking() {
    let shapes = [
        (3, 17, 127),
        (150, 130, 200),
        (1, 1, 1),
        (97, 61, 33),
        (151, 129, 201),
    ];
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                for i in 0..shapes.len() {
                    let (m, n, k) = shapes[(i + t) % shapes.len()];
                    let a = random::<f32, 2>([m, k], 10 + t as u64);
                    let b = random::<f32, 2>([k, n], 20 + t as u64);
                    check(&format!("matmul {m}x{n}x{k} on thread {t}"), |imp, out| {
                        ops::__autotune_matmul(imp, a.view(), b.view(), out)
                    });
                }
            });
        }
    });
}

#[test]
fn matmul_in_and_out_of_its_buckets() {
    for (m, n, k) in [
        // In the buckets: their bounds and inside.
        (1, 48, 32),
        (8, 48, 32),
        (63, 48, 32),
        (64, 48, 32),
        (65, 17, 127),
        (140, 26, 127),
        (299, 40, 127),
        // Outside them: one past a bound, another exact size, empty.
        (65, 48, 32),
        (300, 40, 127),
        (140, 41, 127),
        (8, 48, 33),
        (0, 48, 32),
    ] {
        let a = random::<f32, 2>([m, k], 1);
        let b = random::<f32, 2>([k, n], 2);
        check(&format!("matmul_buckets {m}x{n}x{k}"), |imp, out| {
            ops::__autotune_matmul_buckets(imp, a.view(), b.view(), out)
        });
    }
}

/// Few columns: lanes along the reduction read `b` through a copy with `k`
/// innermost (the exact shape and the bucket run them by default), with a
/// remainder of single steps wherever `K` is not a multiple of the lanes.
#[test]
fn matmul_with_few_columns_in_and_out_of_its_bucket() {
    for (m, n, k) in [
        // The exact shape; in the bucket: its bounds and inside.
        (37, 3, 45),
        (1, 1, 1),
        (100, 4, 70),
        (53, 2, 17),
        (9, 3, 64),
        (64, 1, 15),
        // Outside it: one past a bound, and empty.
        (101, 4, 70),
        (100, 5, 70),
        (100, 4, 71),
        (0, 3, 45),
    ] {
        let a = random::<f32, 2>([m, k], 5);
        let b = random::<f32, 2>([k, n], 6);
        check(&format!("matmul_narrow {m}x{n}x{k}"), |imp, out| {
            ops::__autotune_matmul_narrow(imp, a.view(), b.view(), out)
        });
    }
}

#[test]
fn matmul_reference_is_a_matrix_product() {
    let (m, n, k) = (5, 7, 3);
    let a = random::<f32, 2>([m, k], 3);
    let b = random::<f32, 2>([k, n], 4);
    let c = ops::matmul_reference(&a, &b).unwrap();
    let mut want = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            for p in 0..k {
                want[i * n + j] += a.data()[i * k + p] * b.data()[p * n + j];
            }
        }
    }
    assert_close(
        &c,
        &Tensor::from_vec(want, [m, n]).unwrap(),
        "hand-written matmul",
    );
}

#[test]
fn matmul_f64() {
    for (m, n, k) in [(33, 17, 65), (1, 3, 17), (127, 1, 3), (140, 66, 90)] {
        let a = random::<f64, 2>([m, k], 5);
        let b = random::<f64, 2>([k, n], 6);
        check(&format!("matmul_f64 {m}x{n}x{k}"), |imp, out| {
            ops::__autotune_matmul_f64(imp, a.view(), b.view(), out)
        });
    }
}

#[test]
fn batch_matmul() {
    for (bt, m, n, k) in [
        (3, 17, 16, 9),
        (1, 1, 1, 1),
        (2, 3, 127, 17),
        (4, 64, 33, 70),
    ] {
        let a = random::<f32, 3>([bt, m, k], 7);
        let b = random::<f32, 3>([bt, k, n], 8);
        check(&format!("batch_matmul {bt}x{m}x{n}x{k}"), |imp, out| {
            ops::__autotune_batch_matmul(imp, a.view(), b.view(), out)
        });
    }
}

#[test]
fn gemv() {
    for (m, k) in [(127, 255), (1, 1), (3, 17), (17, 3), (300, 513)] {
        let a = random::<f32, 2>([m, k], 9);
        let x = random::<f32, 1>([k], 10);
        check(&format!("gemv {m}x{k}"), |imp, out| {
            ops::__autotune_gemv(imp, a.view(), x.view(), out)
        });
    }
}

#[test]
fn transpose() {
    for (m, n) in [(17, 3), (1, 1), (1, 127), (127, 17), (300, 257)] {
        let a = random::<f32, 2>([m, n], 11);
        check(&format!("transpose {m}x{n}"), |imp, out| {
            ops::__autotune_transpose(imp, a.view(), out)
        });
        let t = ops::transpose(&a).unwrap();
        assert_eq!(t.get([n - 1, 0]), a.get([0, n - 1]));
    }
    for (m, n) in [(5, 7), (3, 1), (17, 127)] {
        let a = random::<f64, 2>([m, n], 12);
        check(&format!("transpose_f64 {m}x{n}"), |imp, out| {
            ops::__autotune_transpose_f64(imp, a.view(), out)
        });
    }
}

/// An independent direct convolution: NCHW, stride 2, padding 1, dilation 2.
fn conv_by_hand(x: &Tensor<f32, 4>, w: &Tensor<f32, 4>) -> Tensor<f32, 4> {
    let [n, c, h, wd] = x.dims();
    let [k, _, r, s] = w.dims();
    let oh = (h + 2 - 2 * (r - 1) - 1) / 2 + 1;
    let ow = (wd + 2 - 2 * (s - 1) - 1) / 2 + 1;
    let mut out = Tensor::zeros([n, k, oh, ow]).unwrap();
    for b in 0..n {
        for kk in 0..k {
            for y in 0..oh {
                for z in 0..ow {
                    let mut acc = 0.0f32;
                    for cc in 0..c {
                        for rr in 0..r {
                            for ss in 0..s {
                                let iy = (y * 2 + rr * 2) as isize - 1;
                                let iz = (z * 2 + ss * 2) as isize - 1;
                                if iy >= 0 && iz >= 0 && (iy as usize) < h && (iz as usize) < wd {
                                    acc += x.get([b, cc, iy as usize, iz as usize]).unwrap()
                                        * w.get([kk, cc, rr, ss]).unwrap();
                                }
                            }
                        }
                    }
                    let ix = ((b * k + kk) * oh + y) * ow + z;
                    out.data_mut()[ix] = acc;
                }
            }
        }
    }
    out
}

#[test]
fn conv2d_nchw() {
    for (n, c, h, w, k, r, s) in [
        (1, 3, 17, 15, 4, 3, 3),
        (1, 1, 1, 1, 1, 1, 1),
        (2, 3, 17, 3, 5, 3, 1),
        (1, 17, 28, 27, 16, 3, 3),
    ] {
        let x = random::<f32, 4>([n, c, h, w], 13);
        let wt = random::<f32, 4>([k, c, r, s], 14);
        check(
            &format!("conv2d_nchw {:?}", (n, c, h, w, k, r, s)),
            |imp, out| ops::__autotune_conv2d_nchw(imp, x.view(), wt.view(), out),
        );
        let got = ops::conv2d_nchw_reference(&x, &wt).unwrap();
        assert_close(
            &got,
            &conv_by_hand(&x, &wt),
            "conv2d_nchw reference vs hand-written",
        );
    }
}

#[test]
fn conv3x3_f64() {
    for (c, h, w, k) in [(4, 9, 9, 5), (1, 1, 1, 1), (3, 17, 5, 2), (16, 14, 14, 16)] {
        let x = random::<f64, 3>([c, h, w], 15);
        let wt = random::<f64, 4>([k, c, 3, 3], 16);
        check(&format!("conv3x3_f64 {:?}", (c, h, w, k)), |imp, out| {
            ops::__autotune_conv3x3_f64(imp, x.view(), wt.view(), out)
        });
    }
}

#[test]
fn conv2d_nhwc() {
    for (n, h, w, c, r, s, k) in [
        (2, 8, 7, 3, 3, 2, 5),
        (1, 1, 1, 1, 1, 1, 1),
        (1, 17, 3, 3, 3, 3, 17),
        (1, 20, 20, 16, 3, 3, 24),
    ] {
        let x = random::<f32, 4>([n, h, w, c], 17);
        let wt = random::<f32, 4>([r, s, c, k], 18);
        check(
            &format!("conv2d_nhwc {:?}", (n, h, w, c, r, s, k)),
            |imp, out| ops::__autotune_conv2d_nhwc(imp, x.view(), wt.view(), out),
        );
    }
}

#[test]
fn depthwise_conv2d() {
    for (c, h, w) in [(8, 17, 13), (1, 1, 1), (3, 127, 3), (32, 28, 28)] {
        let x = random::<f32, 3>([c, h, w], 19);
        let wt = random::<f32, 3>([c, 3, 3], 20);
        check(&format!("depthwise_conv2d {:?}", (c, h, w)), |imp, out| {
            ops::__autotune_depthwise_conv2d(imp, x.view(), wt.view(), out)
        });
    }
}

#[test]
fn dense_bias_relu() {
    for (n, m, k) in [(16, 33, 64), (1, 1, 1), (3, 17, 127), (64, 100, 256)] {
        let x = random::<f32, 2>([n, k], 21);
        let w = random::<f32, 2>([m, k], 22);
        let b = random::<f32, 1>([m], 23);
        check(&format!("dense_bias_relu {n}x{m}x{k}"), |imp, out| {
            ops::__autotune_dense_bias_relu(imp, x.view(), w.view(), b.view(), out)
        });
        let y = ops::dense_bias_relu(&x, &w, &b).unwrap();
        assert!(
            y.data().iter().all(|v| *v >= 0.0),
            "relu output is non-negative"
        );
    }
}

#[test]
fn max_pool2d() {
    for (c, h, w) in [(4, 17, 16), (1, 1, 1), (3, 3, 17), (16, 56, 56)] {
        let x = random::<f32, 3>([c, h, w], 24);
        check(&format!("max_pool2d {:?}", (c, h, w)), |imp, out| {
            ops::__autotune_max_pool2d(imp, x.view(), out)
        });
        // Hand check: output (0, 0, 0) is the max of the valid 2×2 corner window.
        let y = ops::max_pool2d(&x).unwrap();
        let mut m = f32::NEG_INFINITY;
        for i in 0..h.min(2) {
            for j in 0..w.min(2) {
                m = m.max(x.get([0, i, j]).unwrap());
            }
        }
        assert_eq!(y.get([0, 0, 0]), Some(m));
    }
}

#[test]
fn max_pool3x3() {
    for (c, h, w) in [(4, 15, 15), (1, 1, 1), (2, 3, 17), (3, 5, 40), (8, 33, 35)] {
        let x = random::<f32, 3>([c, h, w], 26);
        check(&format!("max_pool3x3 {:?}", (c, h, w)), |imp, out| {
            ops::__autotune_max_pool3x3(imp, x.view(), out)
        });
        // Hand check: output (0, 0, w - 1) is the max of the valid 2×2 corner window.
        let y = ops::max_pool3x3(&x).unwrap();
        let mut m = f32::NEG_INFINITY;
        for i in 0..h.min(2) {
            for j in w.saturating_sub(2)..w {
                m = m.max(x.get([0, i, j]).unwrap());
            }
        }
        assert_eq!(y.get([0, 0, w - 1]), Some(m));
    }
}

#[test]
fn global_avg_pool() {
    for (c, h, w) in [(16, 7, 7), (1, 1, 1), (3, 17, 127), (64, 14, 14)] {
        let x = random::<f32, 3>([c, h, w], 25);
        check(&format!("global_avg_pool {:?}", (c, h, w)), |imp, out| {
            ops::__autotune_global_avg_pool(imp, x.view(), out)
        });
        let y = ops::global_avg_pool(&x).unwrap();
        let mean: f32 = x.data()[..h * w].iter().sum::<f32>() / (h * w) as f32;
        assert!((y.data()[0] - mean).abs() < 1e-5);
    }
}

#[test]
fn softmax() {
    for (n, d) in [(4, 127), (1, 1), (3, 17), (17, 3), (64, 1000)] {
        let x = random::<f32, 2>([n, d], 26);
        check(&format!("softmax {n}x{d}"), |imp, out| {
            ops::__autotune_softmax(imp, x.view(), out)
        });
        let y = ops::softmax(&x).unwrap();
        for row in y.data().chunks(d) {
            assert!(
                (row.iter().sum::<f32>() - 1.0).abs() < 1e-5,
                "rows sum to 1"
            );
        }
    }
    for (n, d) in [(3, 17), (1, 1), (5, 127)] {
        let x = random::<f64, 2>([n, d], 27);
        check(&format!("softmax_f64 {n}x{d}"), |imp, out| {
            ops::__autotune_softmax_f64(imp, x.view(), out)
        });
    }
}

#[test]
fn elementwise() {
    for n in [127, 1, 3, 17, 10_000] {
        let x = random::<f32, 1>([n], 28);
        let y = random::<f32, 1>([n], 29);
        check(&format!("elementwise {n}"), |imp, out| {
            ops::__autotune_elementwise(imp, x.view(), y.view(), out)
        });
        let x = random::<f64, 1>([n], 30);
        let y = random::<f64, 1>([n], 31);
        check(&format!("elementwise_f64 {n}"), |imp, out| {
            ops::__autotune_elementwise_f64(imp, x.view(), y.view(), out)
        });
    }
}

#[test]
fn reductions_min_and_rank0() {
    for (m, n) in [(3, 17), (1, 1), (127, 3), (200, 150)] {
        let a = random::<f32, 2>([m, n], 32);
        check(&format!("column_min {m}x{n}"), |imp, out| {
            ops::__autotune_column_min(imp, a.view(), out)
        });
        let a = random::<f64, 2>([m, n], 33);
        check(&format!("total {m}x{n}"), |imp, out| {
            ops::__autotune_total(imp, a.view(), out)
        });
        let t = ops::total(&a).unwrap();
        assert!((t.data()[0] - a.data().iter().sum::<f64>()).abs() < 1e-9);
    }
}

/// NaN, infinities and signed zeros among the inputs of max and min
/// reductions: a NaN loses, as in the reference (`f32::max`), wherever it
/// falls in a window or a vector of the kernel's accumulators -- a whole window
/// of NaNs gives the identity.
#[test]
fn max_and_min_reductions_let_nan_inputs_lose() {
    let special = [
        f32::NAN,
        -0.0,
        0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    let sprinkle = |t: &mut Tensor<f32, 3>, every: usize| {
        let n = t.data().len();
        for (i, x) in t.data_mut().iter_mut().enumerate() {
            if every == 1 {
                *x = f32::NAN; // every window all NaN
            } else if i % every == 0 || i * 7 % 13 == 5 || i + 3 >= n {
                *x = special[i % special.len()];
            }
        }
    };
    for (c, h, w, every) in [(4, 17, 16, 3), (16, 56, 56, 5), (3, 3, 17, 2), (2, 9, 9, 1)] {
        let mut x = random::<f32, 3>([c, h, w], 36);
        sprinkle(&mut x, every);
        check(
            &format!("max_pool2d {:?} with NaNs", (c, h, w)),
            |imp, out| ops::__autotune_max_pool2d(imp, x.view(), out),
        );
    }
    for (m, n) in [(3, 17), (127, 3), (200, 150)] {
        let mut a = random::<f32, 3>([1, m, n], 37);
        sprinkle(&mut a, 4);
        let a = Tensor::from_vec(a.data().to_vec(), [m, n]).expect("same length");
        check(&format!("column_min {m}x{n} with NaNs"), |imp, out| {
            ops::__autotune_column_min(imp, a.view(), out)
        });
    }
}

#[test]
fn empty_reduction_gives_the_identity() {
    let a = random::<f32, 2>([0, 5], 34);
    let y = ops::column_min(&a).unwrap();
    assert!(y.data().iter().all(|v| *v == f32::INFINITY));
    let b = random::<f32, 2>([5, 0], 35);
    let c = ops::matmul(&a, &b).unwrap();
    assert_eq!(c.dims(), [0, 0]);
}

#[test]
fn scalars_read_by_name() {
    for n in [37, 1, 130] {
        let x = random::<f32, 1>([n], 41);
        let s = random::<f32, 0>([], 42);
        check(&format!("scale_by {n}"), |imp, out| {
            ops::__autotune_scale_by(imp, x.view(), s.view(), out)
        });
    }
    for (n, d) in [(4, 33), (3, 5)] {
        let x = random::<f32, 2>([n, d], 43);
        check(&format!("center_rows {n}x{d}"), |imp, out| {
            ops::__autotune_center_rows(imp, x.view(), out)
        });
    }
}
