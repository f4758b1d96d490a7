//! `Buf<T>`: the elements of a CPU storage. Either a vector quill owns (taken from and given
//! back to the size-class pool) or memory another library owns (an imported DLPack tensor),
//! which quill reads and writes in place until it drops the owner's release handle.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The elements of one CPU storage, viewed as a slice through `Deref` whichever way they are
/// held. Dropping a foreign buffer releases its owner; an owned one goes back to the pool only
/// through `CpuStorage`'s drop (`take_vec`), a bare `Buf` simply frees its vector.
pub struct Buf<T> {
    inner: Inner<T>,
}

enum Inner<T> {
    Owned(Vec<T>),
    Foreign {
        ptr: NonNull<T>,
        len: usize,
        /// Dropping it releases the memory (a DLPack deleter, say).
        _owner: Box<dyn Send + Sync>,
    },
}

// SAFETY: an owned buffer is a Vec<T>. A foreign buffer is memory that `Buf::foreign`'s caller
// promised is valid for `len` elements until the owner drops, with no other Rust reference to
// it; access goes through `&self` / `&mut self` like a Vec's, and the owner is Send + Sync.
unsafe impl<T: Send> Send for Buf<T> {}
// SAFETY: as above; `&Buf` only gives `&[T]`.
unsafe impl<T: Sync> Sync for Buf<T> {}

impl<T> Buf<T> {
    /// Views `len` elements at `ptr` that `owner` keeps alive.
    ///
    /// # Safety
    /// `ptr` must be aligned for `T` and valid for reads and writes of `len` initialised,
    /// valid `T` values until `owner` is dropped, and nothing else may write them while quill
    /// holds the buffer except through quill (the sharing NumPy views of one array have).
    pub unsafe fn foreign(ptr: *mut T, len: usize, owner: Box<dyn Send + Sync>) -> Buf<T> {
        let ptr = if len == 0 {
            NonNull::dangling()
        } else {
            NonNull::new(ptr).unwrap_or(NonNull::dangling())
        };
        Buf {
            inner: Inner::Foreign {
                ptr,
                len,
                _owner: owner,
            },
        }
    }

    /// Whether the memory belongs to another library (made by [`Buf::foreign`]). Such memory
    /// never enters the pool: [`Buf::take_vec`] gives an empty vector for it.
    pub fn is_foreign(&self) -> bool {
        matches!(self.inner, Inner::Foreign { .. })
    }

    /// The owned vector, leaving an empty one (for the pool); a foreign buffer gives an empty
    /// vector and releases its owner.
    pub fn take_vec(&mut self) -> Vec<T> {
        match std::mem::take(self).inner {
            Inner::Owned(v) => v,
            Inner::Foreign { .. } => Vec::new(),
        }
    }
}

impl<T> Default for Buf<T> {
    fn default() -> Self {
        Buf {
            inner: Inner::Owned(Vec::new()),
        }
    }
}

impl<T> From<Vec<T>> for Buf<T> {
    fn from(v: Vec<T>) -> Self {
        Buf {
            inner: Inner::Owned(v),
        }
    }
}

impl<T> FromIterator<T> for Buf<T> {
    fn from_iter<I: IntoIterator<Item = T>>(it: I) -> Self {
        Buf::from(it.into_iter().collect::<Vec<T>>())
    }
}

impl<T> Deref for Buf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.inner {
            Inner::Owned(v) => v,
            // SAFETY: `foreign`'s contract: `len` valid elements at `ptr` while the owner lives
            // (it lives as long as `self`); a zero length uses a dangling, aligned pointer.
            Inner::Foreign { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), *len)
            },
        }
    }
}

impl<T> DerefMut for Buf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.inner {
            Inner::Owned(v) => v,
            // SAFETY: as in `deref`; `&mut self` makes this the only reference quill holds.
            Inner::Foreign { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr(), *len)
            },
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Buf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.is_foreign() {
            "foreign"
        } else {
            "owned"
        };
        write!(f, "Buf({kind}, {} elements)", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts its drops; holds the memory it releases (read only through the foreign view).
    struct Release(Arc<AtomicUsize>, #[allow(dead_code)] Box<[f32]>);
    impl Drop for Release {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn foreign_memory_is_viewed_in_place_and_released_once() {
        let released = Arc::new(AtomicUsize::new(0));
        let mut data: Box<[f32]> = vec![1.0, 2.0, 3.0].into_boxed_slice();
        let ptr = data.as_mut_ptr();
        // The owner holds the box; moving a Box does not move its heap memory.
        let owner = Box::new(Release(released.clone(), data));
        // SAFETY: `ptr` points at the 3 floats the owner keeps alive.
        let mut b = unsafe { Buf::foreign(ptr, 3, owner) };
        assert!(b.is_foreign());
        b[1] = 20.0;
        assert_eq!(&b[..], &[1.0, 20.0, 3.0]);
        assert_eq!(released.load(Ordering::SeqCst), 0);
        assert!(b.take_vec().is_empty());
        assert_eq!(released.load(Ordering::SeqCst), 1);
        assert!(b.is_empty() && !b.is_foreign());
    }

    #[test]
    fn empty_foreign_buffers_use_a_dangling_pointer() {
        // SAFETY: zero elements: nothing is read.
        let b = unsafe { Buf::<f64>::foreign(std::ptr::null_mut(), 0, Box::new(())) };
        assert_eq!(b.len(), 0);
        assert!(b.iter().next().is_none());
    }
}
