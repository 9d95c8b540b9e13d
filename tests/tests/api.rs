//! The safe API the macro generates: slices, owned tensors, ndarray views,
//! caller-provided outputs, and the errors for every kind of wrong argument.

mod common;

use autotune::{Error, Tensor, TensorMut, TensorRef};
use autotune_tests::ops;
use common::{assert_close, random};

#[test]
fn plain_slices_and_output_buffer() {
    let a: Vec<f32> = (0..6).map(|x| x as f32).collect(); // 2×3
    let b: Vec<f32> = (0..12).map(|x| x as f32 * 0.5).collect(); // 3×4
    let c = ops::matmul((&a, [2, 3]), (&b, [3, 4])).unwrap();
    assert_eq!(c.dims(), [2, 4]);
    let mut out = vec![0.0f32; 8];
    ops::matmul_into((a.as_slice(), [2, 3]), (&b, [3, 4]), (&mut out, [2, 4])).unwrap();
    assert_eq!(out, c.data());
    assert_eq!(
        c.get([1, 3]),
        Some((3.0 * 1.5 + 4.0 * 3.5 + 5.0 * 5.5) as f32)
    );
    let mut r = vec![0.0f32; 8];
    ops::matmul_reference_into(
        TensorRef::new(&a, [2, 3]),
        &Tensor::from_vec(b.clone(), [3, 4]).unwrap(),
        TensorMut::new(&mut r, [2, 4]),
    )
    .unwrap();
    assert_eq!(out, r);
}

#[test]
fn ndarray_views() {
    let a = ndarray::Array2::<f32>::from_shape_fn((5, 3), |(i, j)| (i * 3 + j) as f32 * 0.1);
    let b = ndarray::Array2::<f32>::from_shape_fn((3, 4), |(i, j)| (i as f32) - (j as f32));
    let c = ops::matmul(&a, &b).unwrap();
    let want = a.dot(&b);
    assert_close(
        &c,
        &Tensor::from_vec(want.iter().copied().collect(), [5, 4]).unwrap(),
        "ndarray matmul",
    );
    let mut out = ndarray::Array2::<f32>::zeros((5, 4));
    ops::matmul_into(a.view(), b.view(), &mut out).unwrap();
    assert_eq!(out, want);
    // A transposed view is not row-major contiguous: refused with the tensor's name.
    let at = a.t();
    let err = ops::matmul(at, b.view()).unwrap_err();
    assert_eq!(
        err,
        Error::NotContiguous {
            op: "matmul",
            tensor: "a"
        }
    );
    assert_eq!(c.into_ndarray().shape(), &[5, 4]);
}

#[test]
fn mismatched_dimension_names_tensor_dim_and_sizes() {
    let a = random::<f32, 2>([4, 3], 1);
    let b = random::<f32, 2>([5, 2], 2);
    let err = ops::matmul(&a, &b).unwrap_err();
    assert_eq!(
        err,
        Error::Shape {
            op: "matmul",
            tensor: "b",
            dim: 0,
            name: "K",
            expected: 3,
            given: 5,
            because: "as `a` dimension 1".to_string(),
        }
    );
    assert_eq!(
        err.to_string(),
        "matmul: tensor `b` dimension 0 (K) must be 3 (as `a` dimension 1), but is 5"
    );
}

#[test]
fn wrong_slice_length() {
    let a = vec![0.0f32; 11];
    let b = vec![0.0f32; 12];
    let err = ops::matmul((&a, [4, 3]), (&b, [3, 4])).unwrap_err();
    assert_eq!(
        err,
        Error::Length {
            op: "matmul",
            tensor: "a",
            dims: vec![4, 3],
            expected: 12,
            given: 11
        }
    );
}

#[test]
fn wrong_output_shape() {
    let a = random::<f32, 2>([4, 3], 1);
    let b = random::<f32, 2>([3, 2], 2);
    let mut out = Tensor::<f32, 2>::zeros([4, 3]).unwrap();
    let err = ops::matmul_into(&a, &b, &mut out).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Shape {
                tensor: "output",
                dim: 1,
                expected: 2,
                given: 3,
                ..
            }
        ),
        "{err:?}"
    );
    // Derived output shapes are checked too, and the message gives the formula.
    let x = random::<f32, 3>([2, 9, 9], 3);
    let mut y = Tensor::<f32, 3>::zeros([2, 4, 5]).unwrap();
    let err = ops::max_pool2d_into(&x, &mut y).unwrap_err();
    assert_eq!(
        err.to_string(),
        "max_pool2d: tensor `output` dimension 1 (OH) must be 5 (OH = (H + 2 - 3) / 2 + 1), but is 4"
    );
}

#[test]
fn constant_dimension_is_checked() {
    // depthwise_conv2d declares R = 3, S = 3 in its attribute.
    let x = random::<f32, 3>([2, 5, 5], 1);
    let w = random::<f32, 3>([2, 5, 5], 2);
    let err = ops::depthwise_conv2d(&x, &w).unwrap_err();
    assert!(
        matches!(&err, Error::Shape { tensor: "w", dim: 1, name: "R", expected: 3, given: 5, because, .. } if because == "R = 3"),
        "{err:?}"
    );
}

#[test]
fn negative_derived_shape() {
    // conv2d_nhwc has OH = H - R + 1: a kernel taller than the image has no output.
    let x = random::<f32, 4>([1, 2, 5, 3], 1);
    let w = random::<f32, 4>([4, 1, 3, 2], 2);
    let err = ops::conv2d_nhwc(&x, &w).unwrap_err();
    assert_eq!(
        err,
        Error::DerivedShape {
            op: "conv2d_nhwc",
            name: "OH",
            expr: "H - R + 1"
        }
    );
}

#[test]
fn out_of_bounds_reads_are_refused_not_performed() {
    let x = random::<f32, 1>([5], 1);
    let ok = random::<f32, 1>([4], 2);
    let y = ops::forward_diff(&x, &ok).unwrap();
    assert_eq!(y.data()[3], x.data()[4] - ok.data()[3]);
    let too_long = random::<f32, 1>([5], 3);
    let err = ops::forward_diff(&x, &too_long).unwrap_err();
    assert_eq!(
        err,
        Error::OutOfBounds {
            op: "forward_diff",
            tensor: "x",
            dim: 0,
            low: 1,
            high: 5,
            size: 5
        }
    );
    // The generic kernel is equally protected: the check runs before any kernel.
    let err = ops::__autotune_forward_diff(
        autotune::__private::Impl::Generic,
        x.view(),
        too_long.view(),
        None,
    )
    .unwrap_err();
    assert!(matches!(err, Error::OutOfBounds { .. }));
}

#[test]
fn thread_count_is_set_and_does_not_change_results() {
    let a: Tensor<f32, 2> = random([64, 32], 1);
    let b: Tensor<f32, 2> = random([32, 48], 2);
    ops::set_num_threads(3);
    assert_eq!(ops::num_threads(), 3);
    let three = ops::matmul(&a, &b).unwrap();
    ops::set_num_threads(0); // clamped to one
    assert_eq!(ops::num_threads(), 1);
    let one = ops::matmul(&a, &b).unwrap();
    // Threads split output rows, never a sum: the results are bit-identical.
    assert_eq!(three.data(), one.data());
    assert_close(&one, &ops::matmul_reference(&a, &b).unwrap(), "matmul");
}
