//! Tensor views: a flat row-major slice plus its dimensions.

use std::fmt::Debug;

use crate::slot::Slot;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// An element type kernels are generated for: `f32` or `f64`.
pub trait Element:
    sealed::Sealed + Copy + Default + Debug + PartialOrd + Send + Sync + 'static
{
}
impl Element for f32 {}
impl Element for f64 {}

/// A borrowed, contiguous, row-major tensor of rank `R`.
#[derive(Clone, Copy, Debug)]
pub struct TensorRef<'a, T, const R: usize> {
    data: &'a [T],
    dims: [usize; R],
    /// Where kernels keep their copies of it, for a view of a [`crate::Constant`].
    pub(crate) slot: Option<&'a Slot>,
}

impl<'a, T, const R: usize> TensorRef<'a, T, R> {
    /// Views `data` with shape `dims`. The length is checked when an operator is
    /// called, so the error can name the tensor.
    pub fn new(data: &'a [T], dims: [usize; R]) -> Self {
        TensorRef {
            data,
            dims,
            slot: None,
        }
    }

    pub fn data(&self) -> &'a [T] {
        self.data
    }

    pub fn dims(&self) -> [usize; R] {
        self.dims
    }
}

/// A mutably borrowed, contiguous, row-major tensor of rank `R` (an output buffer).
#[derive(Debug)]
pub struct TensorMut<'a, T, const R: usize> {
    data: &'a mut [T],
    dims: [usize; R],
}

impl<'a, T, const R: usize> TensorMut<'a, T, R> {
    pub fn new(data: &'a mut [T], dims: [usize; R]) -> Self {
        TensorMut { data, dims }
    }

    pub fn data(&mut self) -> &mut [T] {
        self.data
    }

    pub fn dims(&self) -> [usize; R] {
        self.dims
    }

    pub fn into_data(self) -> &'a mut [T] {
        self.data
    }
}

/// An owned, contiguous, row-major tensor of rank `R`: what an operator returns.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor<T, const R: usize> {
    data: Vec<T>,
    dims: [usize; R],
}

impl<T: Element, const R: usize> Tensor<T, R> {
    /// A tensor of zeros; `None` if its byte size overflows or the memory cannot
    /// be allocated (never a panic or an abort).
    pub fn zeros(dims: [usize; R]) -> Option<Self> {
        let n = dims.iter().try_fold(1usize, |a, d| a.checked_mul(*d))?;
        Some(Tensor {
            data: zeroed(n).ok()?,
            dims,
        })
    }

    /// Wraps `data` with shape `dims`; `None` if the length does not match.
    pub fn from_vec(data: Vec<T>, dims: [usize; R]) -> Option<Self> {
        let n = dims.iter().try_fold(1usize, |a, d| a.checked_mul(*d))?;
        (n == data.len()).then_some(Tensor { data, dims })
    }

    pub fn data(&self) -> &[T] {
        &self.data
    }

    pub fn data_mut(&mut self) -> &mut [T] {
        &mut self.data
    }

    pub fn dims(&self) -> [usize; R] {
        self.dims
    }

    pub fn into_vec(self) -> Vec<T> {
        self.data
    }

    pub fn view(&self) -> TensorRef<'_, T, R> {
        TensorRef::new(&self.data, self.dims)
    }

    pub fn view_mut(&mut self) -> TensorMut<'_, T, R> {
        TensorMut::new(&mut self.data, self.dims)
    }

    /// The element at a multi-index, or `None` outside the tensor.
    pub fn get(&self, index: [usize; R]) -> Option<T> {
        let mut flat = 0usize;
        for (i, d) in index.iter().zip(self.dims) {
            if *i >= d {
                return None;
            }
            flat = flat * d + i;
        }
        self.data.get(flat).copied()
    }

    /// Converts into an `ndarray` array of the same shape.
    #[cfg(feature = "ndarray")]
    pub fn into_ndarray(self) -> ndarray::Array<T, ndarray::IxDyn> {
        ndarray::Array::from_shape_vec(ndarray::IxDyn(&self.dims), self.data)
            .expect("a tensor's length matches its shape")
    }
}

/// The view could not be borrowed as one contiguous row-major slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotContiguous;

/// Anything an operator accepts as an input tensor of rank `R`.
pub trait IntoTensorRef<'a, T, const R: usize> {
    fn into_tensor_ref(self) -> Result<TensorRef<'a, T, R>, NotContiguous>;
}

/// Anything an operator accepts as an output buffer of rank `R`.
pub trait IntoTensorMut<'a, T, const R: usize> {
    fn into_tensor_mut(self) -> Result<TensorMut<'a, T, R>, NotContiguous>;
}

impl<'a, T, const R: usize> IntoTensorRef<'a, T, R> for TensorRef<'a, T, R> {
    fn into_tensor_ref(self) -> Result<TensorRef<'a, T, R>, NotContiguous> {
        Ok(self)
    }
}

impl<'a, T: Element, const R: usize> IntoTensorRef<'a, T, R> for &'a Tensor<T, R> {
    fn into_tensor_ref(self) -> Result<TensorRef<'a, T, R>, NotContiguous> {
        Ok(self.view())
    }
}

/// A plain slice with its dimensions: `(&data, [rows, cols])`.
impl<'a, T, const R: usize> IntoTensorRef<'a, T, R> for (&'a [T], [usize; R]) {
    fn into_tensor_ref(self) -> Result<TensorRef<'a, T, R>, NotContiguous> {
        Ok(TensorRef::new(self.0, self.1))
    }
}

impl<'a, T, const R: usize> IntoTensorRef<'a, T, R> for (&'a Vec<T>, [usize; R]) {
    fn into_tensor_ref(self) -> Result<TensorRef<'a, T, R>, NotContiguous> {
        Ok(TensorRef::new(self.0, self.1))
    }
}

impl<'a, T, const R: usize> IntoTensorMut<'a, T, R> for TensorMut<'a, T, R> {
    fn into_tensor_mut(self) -> Result<TensorMut<'a, T, R>, NotContiguous> {
        Ok(self)
    }
}

impl<'a, T: Element, const R: usize> IntoTensorMut<'a, T, R> for &'a mut Tensor<T, R> {
    fn into_tensor_mut(self) -> Result<TensorMut<'a, T, R>, NotContiguous> {
        Ok(self.view_mut())
    }
}

impl<'a, T, const R: usize> IntoTensorMut<'a, T, R> for (&'a mut [T], [usize; R]) {
    fn into_tensor_mut(self) -> Result<TensorMut<'a, T, R>, NotContiguous> {
        Ok(TensorMut::new(self.0, self.1))
    }
}

impl<'a, T, const R: usize> IntoTensorMut<'a, T, R> for (&'a mut Vec<T>, [usize; R]) {
    fn into_tensor_mut(self) -> Result<TensorMut<'a, T, R>, NotContiguous> {
        Ok(TensorMut::new(self.0, self.1))
    }
}

#[cfg(feature = "ndarray")]
mod ndarray_impls {
    use super::*;
    use ndarray::{ArrayBase, ArrayView, ArrayViewMut, Data, DataMut, Dim};

    macro_rules! ranks {
        ($($r:literal)*) => {$(
            impl<'a, T: Element, S: Data<Elem = T>> IntoTensorRef<'a, T, $r>
                for &'a ArrayBase<S, Dim<[usize; $r]>>
            {
                fn into_tensor_ref(self) -> Result<TensorRef<'a, T, $r>, NotContiguous> {
                    let dims: [usize; $r] = self.shape().try_into().expect("rank is static");
                    Ok(TensorRef::new(self.as_slice().ok_or(NotContiguous)?, dims))
                }
            }

            impl<'a, T: Element> IntoTensorRef<'a, T, $r> for ArrayView<'a, T, Dim<[usize; $r]>> {
                fn into_tensor_ref(self) -> Result<TensorRef<'a, T, $r>, NotContiguous> {
                    let dims: [usize; $r] = self.shape().try_into().expect("rank is static");
                    Ok(TensorRef::new(self.to_slice().ok_or(NotContiguous)?, dims))
                }
            }

            impl<'a, T: Element, S: DataMut<Elem = T>> IntoTensorMut<'a, T, $r>
                for &'a mut ArrayBase<S, Dim<[usize; $r]>>
            {
                fn into_tensor_mut(self) -> Result<TensorMut<'a, T, $r>, NotContiguous> {
                    let dims: [usize; $r] = self.shape().try_into().expect("rank is static");
                    Ok(TensorMut::new(self.as_slice_mut().ok_or(NotContiguous)?, dims))
                }
            }

            impl<'a, T: Element> IntoTensorMut<'a, T, $r> for ArrayViewMut<'a, T, Dim<[usize; $r]>> {
                fn into_tensor_mut(self) -> Result<TensorMut<'a, T, $r>, NotContiguous> {
                    let dims: [usize; $r] = self.shape().try_into().expect("rank is static");
                    Ok(TensorMut::new(self.into_slice().ok_or(NotContiguous)?, dims))
                }
            }
        )*};
    }

    ranks!(1 2 3 4 5 6);
}

/// Why a buffer could not be had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AllocFailure {
    /// Its byte size does not fit an `isize`.
    Overflow,
    /// The allocator refused that many bytes.
    OutOfMemory(usize),
}

/// `n` zeros, allocated fallibly.
pub(crate) fn zeroed<T: Element>(n: usize) -> Result<Vec<T>, AllocFailure> {
    let bytes = n
        .checked_mul(std::mem::size_of::<T>())
        .filter(|b| *b <= isize::MAX as usize)
        .ok_or(AllocFailure::Overflow)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| AllocFailure::OutOfMemory(bytes))?;
    v.resize(n, T::default());
    Ok(v)
}
