//! Runtime of autotune: the crate a user depends on.
//!
//! It owns the tensor views that `#[tensor_op]` wrappers take and return
//! ([`TensorRef`], [`TensorMut`], [`Tensor`], and `ndarray` views behind the
//! `ndarray` feature), the [`Activation`]s that `blocked(...)` operators pass along, the [`Error`] a wrapper returns for a wrong shape, and the
//! helpers the macro's expansion calls. It re-exports the [`tensor_op`] attribute.
//!
//! ```ignore
//! #[autotune::tensor_op(specialize(M = 1024, N = 1024, K = 1024))]
//! pub fn matmul(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>) -> Tensor<f32, (M, N)> {
//!     compute(|i, j| sum(|k| a[i][k] * b[k][j]))
//! }
//!
//! let c = matmul((&a, [m, k]), (&b, [k, n]))?; // a Tensor<f32, 2>
//! ```

mod activation;
mod constant;
mod error;
mod slot;
mod tensor;

#[doc(hidden)]
pub mod __private;

pub use activation::Activation;
pub use autotune_macros::{kernel_threads, tensor_op};
pub use constant::Constant;
pub use error::Error;
pub use tensor::{
    Element, IntoTensorMut, IntoTensorRef, NotContiguous, Tensor, TensorMut, TensorRef,
};
