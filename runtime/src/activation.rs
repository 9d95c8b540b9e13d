//! [`Activation`]: a tensor passed from one operator to the next in the layout the
//! kernels chose, for operators that declare it `blocked(...)`.

use crate::tensor::{zeroed, Element, Tensor};
use std::borrow::Cow;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A tensor between operators that declare it `blocked(...)` (see
/// `docs/language.md`): plain, or *blocked by `B`* along its first dimension, i.e.
/// `[D0][D1]..[Dn]` stored as `[D0/B][D1]..[Dn][B]` (`nChw16c` for a `(C, H, W)`
/// activation), which is how a kernel stores and loads a vector of channels at a
/// pixel whole.
///
/// An operator's kernel for the call's shapes writes its output in its own layout,
/// and reads each input in it: an input that arrives in another layout is copied
/// into it first, and [`Activation::conversions`] counts that, so a network can
/// check that its activations pass from kernel to kernel without one (the copies
/// at its input and output aside). Its [`dims`](Activation::dims) are always the
/// logical ones.
#[derive(Debug)]
pub struct Activation<T, const R: usize> {
    data: Vec<T>,
    dims: [usize; R],
    block: usize,
    conversions: AtomicUsize,
}

impl<T: Element, const R: usize> Activation<T, R> {
    /// A plain activation holding `tensor`.
    pub fn new(tensor: Tensor<T, R>) -> Self {
        let dims = tensor.dims();
        Activation::with(tensor.into_vec(), dims, 1)
    }

    /// A plain activation of zeros; `None` if its byte size overflows or the
    /// memory cannot be allocated. Give it as an `_into` call's output to reuse
    /// its memory from call to call.
    pub fn zeros(dims: [usize; R]) -> Option<Self> {
        Tensor::zeros(dims).map(Activation::new)
    }

    pub(crate) fn with(data: Vec<T>, dims: [usize; R], block: usize) -> Self {
        Activation {
            data,
            dims,
            block,
            conversions: AtomicUsize::new(0),
        }
    }

    /// The logical dimensions.
    pub fn dims(&self) -> [usize; R] {
        self.dims
    }

    /// The block of the first dimension it lies in: 1 where plain.
    pub fn block(&self) -> usize {
        self.block
    }

    /// How many times a kernel read it through a copy into another layout.
    pub fn conversions(&self) -> usize {
        self.conversions.load(Ordering::Relaxed)
    }

    /// The element at a logical multi-index, or `None` outside the tensor.
    pub fn get(&self, index: [usize; R]) -> Option<T> {
        if index.iter().zip(&self.dims).any(|(i, d)| i >= d) {
            return None;
        }
        let flat = index
            .iter()
            .zip(&self.dims)
            .fold(0, |acc, (i, d)| acc * d + i);
        let inner = self.dims[1..].iter().product::<usize>();
        self.data.get(position(flat, inner, self.block)).copied()
    }

    /// A plain copy.
    pub fn to_tensor(&self) -> Tensor<T, R> {
        let data = self.layout(1).into_owned();
        Tensor::from_vec(data, self.dims).expect("an activation's data fits its dims")
    }

    /// The plain tensor (copied only where blocked).
    pub fn into_tensor(self) -> Tensor<T, R> {
        if self.block == 1 {
            Tensor::from_vec(self.data, self.dims).expect("an activation's data fits its dims")
        } else {
            self.to_tensor()
        }
    }

    /// The same tensor laid out blocked by `block` along its first dimension (1:
    /// plain), as a kernel that reads it so would have it; `None` where `block` is
    /// 0 or does not divide the first dimension.
    pub fn into_layout(self, block: usize) -> Option<Self> {
        let fits = R > 0 && block > 0 && self.dims[0].is_multiple_of(block);
        if !fits || block == self.block {
            return fits.then_some(self);
        }
        let data = self.layout(block).into_owned();
        Some(Activation::with(data, self.dims, block))
    }

    /// The data in the layout blocked by `block` (1: plain), borrowed where it
    /// lies so, else copied (and counted).
    pub(crate) fn layout(&self, block: usize) -> Cow<'_, [T]> {
        if block == self.block || R == 0 {
            return Cow::Borrowed(&self.data);
        }
        let inner = self.dims[1..].iter().product::<usize>();
        let mut out = self.data.clone();
        // Channel by channel: from where its first pixel lies, each one's
        // pixels lie `block` apart in the one layout and `self.block` apart in
        // the other (1 where plain).
        for c in 0..self.dims[0] {
            let (to, from) = (
                position(c * inner, inner, block),
                position(c * inner, inner, self.block),
            );
            for p in 0..inner {
                out[to + p * block] = self.data[from + p * self.block];
            }
        }
        Cow::Owned(out)
    }

    pub(crate) fn count_conversion(&self) {
        self.conversions.fetch_add(1, Ordering::Relaxed);
    }

    /// Makes it an activation of `dims` in the layout blocked by `block`, reusing
    /// its memory, and returns its data to be written whole.
    pub(crate) fn reshape(&mut self, dims: [usize; R], block: usize) -> Option<&mut [T]> {
        let n = dims.iter().try_fold(1usize, |a, d| a.checked_mul(*d))?;
        if n > self.data.len() {
            self.data = zeroed(n).ok()?;
        }
        self.data.truncate(n);
        self.dims = dims;
        self.block = block;
        Some(&mut self.data)
    }
}

impl<T: Element, const R: usize> Clone for Activation<T, R> {
    fn clone(&self) -> Self {
        Activation::with(self.data.clone(), self.dims, self.block)
    }
}

impl<T: Element, const R: usize> From<Tensor<T, R>> for Activation<T, R> {
    fn from(t: Tensor<T, R>) -> Self {
        Activation::new(t)
    }
}

/// Where plain element `flat` lies in the layout blocked by `block`, for a tensor
/// whose dimensions after the first hold `inner` elements: element `(c, p)`, with
/// `c = B·c_o + c_i`, lies at `(c_o, p, c_i)`.
fn position(flat: usize, inner: usize, block: usize) -> usize {
    if block == 1 || inner == 0 {
        return flat;
    }
    let (c, p) = (flat / inner, flat % inner);
    (c / block * inner + p) * block + c % block
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_and_back() {
        let t = Tensor::from_vec((0..32 * 3).map(|x| x as f32).collect(), [32, 3]).unwrap();
        let a = Activation::new(t.clone());
        let b = Activation::with(a.layout(16).into_owned(), [32, 3], 16);
        // Channels 0..16 of pixel 0 first.
        assert_eq!(&b.data[..3], &[0.0, 3.0, 6.0]);
        assert_eq!(b.get([17, 2]), t.get([17, 2]));
        assert_eq!(b.to_tensor(), t);
        let c = Activation::with(b.layout(8).into_owned(), [32, 3], 8);
        assert_eq!(c.into_tensor(), t);
        let d = Activation::new(t.clone()).into_layout(16).unwrap();
        assert_eq!((d.block(), d.to_tensor()), (16, t.clone()));
        assert!(Activation::new(t).into_layout(5).is_none());
    }

    /// Every conversion puts each element where [`position`] says it lies.
    #[test]
    fn conversions_put_each_element_where_its_layout_says() {
        let (dims, inner) = ([24, 5, 3], 15);
        let n = 24 * inner;
        let plain: Vec<f32> = (0..n).map(|x| x as f32).collect();
        for (from, to) in [(1, 8), (8, 1), (4, 8), (8, 4), (1, 24), (24, 3)] {
            let mut src = vec![0.0; n];
            for (flat, x) in plain.iter().enumerate() {
                src[position(flat, inner, from)] = *x;
            }
            let a = Activation::with(src, dims, from);
            let out = a.layout(to);
            for (flat, x) in plain.iter().enumerate() {
                assert_eq!(
                    out[position(flat, inner, to)],
                    *x,
                    "{from} -> {to}, element {flat}"
                );
            }
        }
    }
}
