//! Helpers called by the `#[tensor_op]` expansion. Not a public API.

use crate::tensor::AllocFailure;
use crate::{Error, IntoTensorMut, IntoTensorRef, Tensor, TensorMut, TensorRef};

pub use crate::Element;

/// Which implementation a wrapper runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impl {
    /// The specialised kernel whose shape matches, else the generic one.
    Kernel,
    /// Always the generic kernel (tests compare it with the specialised ones).
    Generic,
    /// The naive Rust reference.
    Reference,
}

/// The slot a kernel keeps its copies of a constant input in: the handle's,
/// or null for a plain tensor.
pub fn slot<T, const R: usize>(t: &TensorRef<'_, T, R>) -> *mut std::ffi::c_void {
    t.slot.map_or(std::ptr::null_mut(), |s| s.as_ptr())
}

pub fn input<'a, T, const R: usize>(
    op: &'static str,
    tensor: &'static str,
    t: impl IntoTensorRef<'a, T, R>,
) -> Result<TensorRef<'a, T, R>, Error> {
    let t = t
        .into_tensor_ref()
        .map_err(|_| Error::NotContiguous { op, tensor })?;
    check_len(op, tensor, t.data().len(), &t.dims())?;
    Ok(t)
}

pub fn output<'a, T, const R: usize>(
    op: &'static str,
    t: impl IntoTensorMut<'a, T, R>,
) -> Result<TensorMut<'a, T, R>, Error> {
    let mut t = t.into_tensor_mut().map_err(|_| Error::NotContiguous {
        op,
        tensor: "output",
    })?;
    let dims = t.dims();
    check_len(op, "output", t.data().len(), &dims)?;
    Ok(t)
}

fn check_len(
    op: &'static str,
    tensor: &'static str,
    len: usize,
    dims: &[usize],
) -> Result<(), Error> {
    let expected = dims.iter().try_fold(1usize, |a, d| a.checked_mul(*d));
    if expected != Some(len) {
        return Err(Error::Length {
            op,
            tensor,
            dims: dims.to_vec(),
            expected: expected.unwrap_or(usize::MAX),
            given: len,
        });
    }
    Ok(())
}

/// Checks that a dimension has the size its shape name already has.
pub fn check_dim(
    op: &'static str,
    tensor: &'static str,
    dim: usize,
    name: &'static str,
    given: usize,
    expected: i64,
    because: &str,
) -> Result<(), Error> {
    if i64::try_from(given).ok() != Some(expected) {
        return Err(Error::Shape {
            op,
            tensor,
            dim,
            name,
            expected: usize::try_from(expected).unwrap_or(usize::MAX),
            given,
            because: because.to_string(),
        });
    }
    Ok(())
}

/// A shape size as `i64` (sizes beyond `i64::MAX` cannot come from a slice).
pub fn size(x: usize) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

/// The value of a derived shape, which must be a non-negative integer.
pub fn derived(
    op: &'static str,
    name: &'static str,
    expr: &'static str,
    value: Option<i64>,
) -> Result<i64, Error> {
    value
        .filter(|v| *v >= 0)
        .ok_or(Error::DerivedShape { op, name, expr })
}

/// Floor division, as shape arithmetic defines it.
pub fn floor_div(a: i64, b: i64) -> Option<i64> {
    let q = a.checked_div(b)?;
    Some(if a % b != 0 && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    })
}

/// Checks that the affine index `offset + Σ coeff·axis` (each axis over
/// `0..extent`) stays inside a dimension of `size`, unless the loop nest around
/// the access is empty (`domain` holds a zero).
#[allow(clippy::too_many_arguments)]
pub fn check_access(
    op: &'static str,
    tensor: &'static str,
    dim: usize,
    terms: &[(i64, i64)],
    offset: i64,
    domain: &[i64],
    size: i64,
) -> Result<(), Error> {
    if domain.iter().any(|e| *e <= 0) {
        return Ok(());
    }
    let (mut lo, mut hi) = (i128::from(offset), i128::from(offset));
    for &(c, e) in terms {
        let span = i128::from(c) * i128::from(e - 1);
        lo += span.min(0);
        hi += span.max(0);
    }
    if lo < 0 || hi >= i128::from(size) {
        let clamp = |x: i128| x.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        return Err(Error::OutOfBounds {
            op,
            tensor,
            dim,
            low: clamp(lo),
            high: clamp(hi),
            size: usize::try_from(size).unwrap_or(0),
        });
    }
    Ok(())
}

/// The number of elements of an output of shape `dims`.
pub fn elements(op: &'static str, dims: &[usize]) -> Result<usize, Error> {
    dims.iter()
        .try_fold(1usize, |a, d| a.checked_mul(*d))
        .ok_or(Error::Overflow { op })
}

/// Checks that a tensor the kernel allocates or indexes (an intermediate stage,
/// the output) is addressable: its buffer of `elements + 1` elements, sized in
/// the kernel's `int64` arithmetic, must not overflow. The C side never sees a
/// size this did not check.
pub fn check_size(
    op: &'static str,
    tensor: &'static str,
    dims: &[i64],
    elem_bytes: usize,
) -> Result<(), Error> {
    dims.iter()
        .try_fold(1i64, |a, d| a.checked_mul(*d))
        .and_then(|n| n.checked_add(1))
        .and_then(|n| n.checked_mul(elem_bytes as i64))
        .map(|_| ())
        .ok_or_else(|| Error::TooLarge {
            op,
            tensor,
            dims: dims.to_vec(),
        })
}

/// A zeroed buffer of `n` elements for tensor `tensor`, allocated fallibly.
pub fn zeroed<T: Element>(
    op: &'static str,
    tensor: &'static str,
    n: usize,
) -> Result<Vec<T>, Error> {
    crate::tensor::zeroed(n).map_err(|f| match f {
        AllocFailure::Overflow => Error::Overflow { op },
        AllocFailure::OutOfMemory(bytes) => Error::OutOfMemory { op, tensor, bytes },
    })
}

/// The owned output of a call, allocated fallibly.
pub fn owned_output<T: Element, const R: usize>(
    op: &'static str,
    dims: [usize; R],
) -> Result<Tensor<T, R>, Error> {
    let n = elements(op, &dims)?;
    let data = zeroed(op, "output", n)?;
    Ok(Tensor::from_vec(data, dims).expect("the length matches the dimensions"))
}

/// A size computed in `i64` as a `usize` dimension.
pub fn dim(op: &'static str, x: i64) -> Result<usize, Error> {
    usize::try_from(x).map_err(|_| Error::Overflow { op })
}

/// Maps a kernel's status code to a result.
pub fn status(op: &'static str, code: i32) -> Result<(), Error> {
    match code {
        0 => Ok(()),
        _ => Err(Error::Alloc { op }),
    }
}

/// The dimensions of a tensor of logical `dims` as it lies in the layout blocked
/// by `block` (`P = R`, or `R + 1` where blocked).
fn physical<const R: usize, const P: usize>(dims: [usize; R], block: usize) -> [usize; P] {
    let mut out = [0; P];
    if block == 1 {
        out.copy_from_slice(&dims);
    } else {
        out[0] = dims[0] / block;
        out[1..R].copy_from_slice(&dims[1..]);
        out[R] = block;
    }
    out
}

/// An activation input's data in the layout blocked by `block` (1: plain), with
/// its dimensions as it lies there; a copy, counted, where it lies otherwise.
pub fn activation_in<T: Element, const R: usize, const P: usize>(
    a: &crate::activation::Activation<T, R>,
    block: usize,
) -> (std::borrow::Cow<'_, [T]>, [usize; P]) {
    let data = a.layout(block);
    if matches!(data, std::borrow::Cow::Owned(_)) {
        a.count_conversion();
    }
    (data, physical(a.dims(), block))
}

/// `out` made an activation of `dims` in the layout blocked by `block`, as the
/// view its kernel writes.
pub fn activation_out<'a, T: Element, const R: usize, const P: usize>(
    op: &'static str,
    out: &'a mut crate::activation::Activation<T, R>,
    dims: [usize; R],
    block: usize,
) -> Result<TensorMut<'a, T, P>, Error> {
    let bytes = dims
        .iter()
        .try_fold(std::mem::size_of::<T>(), |a, d| a.checked_mul(*d))
        .ok_or(Error::Overflow { op })?;
    let data = out.reshape(dims, block).ok_or(Error::OutOfMemory {
        op,
        tensor: "output",
        bytes,
    })?;
    let physical = physical(dims, block);
    check_len(op, "output", data.len(), &physical)?;
    Ok(TensorMut::new(data, physical))
}

/// A new, empty activation for an operator's output.
pub fn activation<T: Element, const R: usize>() -> crate::activation::Activation<T, R> {
    crate::activation::Activation::with(Vec::new(), [0; R], 1)
}
