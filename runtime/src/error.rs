/// Why a `#[tensor_op]` wrapper refused its arguments (or could not run).
///
/// Every variant names the operator and the tensor; shape errors name the
/// dimension, the size expected and the size given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(
        "{op}: tensor `{tensor}` dimension {dim} ({name}) must be {expected} ({because}), \
         but is {given}"
    )]
    Shape {
        op: &'static str,
        tensor: &'static str,
        dim: usize,
        /// The shape name of the dimension in the operator's signature.
        name: &'static str,
        expected: usize,
        given: usize,
        /// Where the expected size comes from.
        because: String,
    },
    #[error(
        "{op}: tensor `{tensor}` has {given} elements, but its shape {dims:?} needs {expected}"
    )]
    Length {
        op: &'static str,
        tensor: &'static str,
        dims: Vec<usize>,
        expected: usize,
        given: usize,
    },
    #[error("{op}: tensor `{tensor}` is not contiguous in row-major order")]
    NotContiguous {
        op: &'static str,
        tensor: &'static str,
    },
    #[error(
        "{op}: the shapes are inconsistent: an index into `{tensor}` dimension {dim} runs \
         from {low} to {high}, but that dimension has size {size}"
    )]
    OutOfBounds {
        op: &'static str,
        tensor: &'static str,
        dim: usize,
        low: i64,
        high: i64,
        size: usize,
    },
    #[error("{op}: shape `{name}` = {expr} is negative or overflows for these inputs")]
    DerivedShape {
        op: &'static str,
        name: &'static str,
        expr: &'static str,
    },
    #[error("{op}: the output's size overflows")]
    Overflow { op: &'static str },
    #[error(
        "{op}: tensor `{tensor}` would have {} elements, more than a kernel can index \
         (its byte size must fit in an i64)",
        dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("·")
    )]
    TooLarge {
        op: &'static str,
        tensor: &'static str,
        dims: Vec<i64>,
    },
    #[error("{op}: cannot allocate {bytes} bytes for tensor `{tensor}`")]
    OutOfMemory {
        op: &'static str,
        tensor: &'static str,
        bytes: usize,
    },
    #[error("{op}: the kernel could not allocate its scratch memory")]
    Alloc { op: &'static str },
}
