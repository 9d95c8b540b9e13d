//! Constant inputs: tensors that stay the same across calls (a network's
//! weights), passed through a handle where kernels keep the copies they make
//! of them.

use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::tensor::{IntoTensorRef, NotContiguous, Tensor, TensorRef};
use crate::Element;

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
        let mut n = 0;
        let mut b = self.slot.head.load(Ordering::Acquire);
        while !b.is_null() {
            n += 1;
            // SAFETY: blocks on the list stay allocated until the handle is
            // dropped, and a kernel wrote `next` before adding a block.
            b = unsafe { (*b).next };
        }
        n
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

/// The head of a list of blocks, one per kernel layout: the kernels' C
/// (`at_const_*` in the generated file) allocates each with `malloc`, fills it
/// and adds it with an atomic compare-and-swap; the handle frees them.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    head: AtomicPtr<Block>,
}

/// The header of a block (`at_const_block`); the copies follow it.
#[repr(C)]
struct Block {
    next: *mut Block,
    #[allow(dead_code)] // read by the kernels
    layout: u64,
}

extern "C" {
    fn free(p: *mut c_void);
}

impl Slot {
    /// The pointer a kernel takes: the list's head, which it reads and swaps
    /// atomically (an `AtomicPtr` has the layout of a pointer).
    pub(crate) fn as_ptr(&self) -> *mut c_void {
        self.head.as_ptr().cast()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut b = *self.head.get_mut();
        while !b.is_null() {
            // SAFETY: each block on the list was allocated with malloc by a
            // kernel and added once; no call can be using the handle while it
            // is dropped, so each is read and freed once, here.
            let next = unsafe { (*b).next };
            unsafe { free(b.cast()) };
            b = next;
        }
    }
}
