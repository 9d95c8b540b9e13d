//! Constant inputs: tensors that stay the same across calls (a network's
//! weights), passed through a handle where kernels keep the copies they make
//! of them.

use crate::slot::Slot;
use crate::tensor::{Element, IntoTensorRef, NotContiguous, Tensor, TensorRef};

/// An input tensor that does not change between calls, for the inputs an
/// operator declares `constant(...)` (see `docs/language.md`).
///
/// A tuned kernel may copy an input before computing: into the tile order its
/// config reads (a pack) or into a padded buffer. Through a `Constant`, the
/// first call of each kernel makes those copies and keeps them in the handle,
/// and later calls use them; with a plain tensor every call makes them again.
/// The results are the same either way. A handle holds one set of copies per
/// kernel that has read it (another specialisation, CPU or thread count is
/// another kernel, with its own layout), freed when the handle is dropped.
///
/// ```ignore
/// let w = autotune::Constant::new(weights);
/// for x in inputs {
///     let y = conv(&x, &w, &bias)?; // copies `w` on the first call only
/// }
/// ```
#[derive(Debug)]
pub struct Constant<T, const R: usize> {
    tensor: Tensor<T, R>,
    slot: Slot,
}

impl<T: Element, const R: usize> Constant<T, R> {
    /// Takes `tensor` as a constant: it can no longer change.
    pub fn new(tensor: Tensor<T, R>) -> Self {
        Constant {
            tensor,
            slot: Slot::default(),
        }
    }

    pub fn tensor(&self) -> &Tensor<T, R> {
        &self.tensor
    }

    /// How many kernels' copies of the tensor the handle holds (none before
    /// the first call of a kernel that copies it).
    pub fn copies(&self) -> usize {
        self.slot.blocks()
    }

    /// The tensor back, dropping the kernels' copies of it.
    pub fn into_tensor(self) -> Tensor<T, R> {
        self.tensor
    }

    pub fn view(&self) -> TensorRef<'_, T, R> {
        let mut view = self.tensor.view();
        view.slot = Some(&self.slot);
        view
    }
}

impl<T: Element, const R: usize> From<Tensor<T, R>> for Constant<T, R> {
    fn from(tensor: Tensor<T, R>) -> Self {
        Constant::new(tensor)
    }
}

impl<'a, T: Element, const R: usize> IntoTensorRef<'a, T, R> for &'a Constant<T, R> {
    fn into_tensor_ref(self) -> Result<TensorRef<'a, T, R>, NotContiguous> {
        Ok(self.view())
    }
}
