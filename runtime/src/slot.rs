//! The slot of a constant input's handle: where kernels keep the copies they
//! make of it.

use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The head of a list of blocks, one per kernel layout: the kernels' C
/// (`at_const_*` in the generated file) allocates each with the runtime's
/// allocator (`posix_memalign`, 64-byte aligned), fills it and adds it with an
/// atomic compare-and-swap; the handle frees them with `free`.
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
    /// How many blocks the list holds.
    pub(crate) fn blocks(&self) -> usize {
        let mut n = 0;
        let mut b = self.head.load(Ordering::Acquire);
        while !b.is_null() {
            n += 1;
            // SAFETY: blocks on the list stay allocated until the slot is
            // dropped, and a kernel wrote `next` before adding a block.
            b = unsafe { (*b).next };
        }
        n
    }

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
            // SAFETY: each block on the list was allocated by a kernel with
            // the runtime's allocator (which `free` releases) and added once;
            // no call can be using the handle while it is dropped, so each is
            // read and freed once, here.
            let next = unsafe { (*b).next };
            unsafe { free(b.cast()) };
            b = next;
        }
    }
}
