//! `CpuStorage`: one typed, contiguous buffer per dtype, and the `CpuElement` trait that maps a
//! Rust element type to its arm. Buffers come from and return to the size-class pool.

pub use crate::buf::Buf;
use crate::pool;
use half::{bf16, f16};
use quill_core::{DType, Element, Result, C128, C64};
use std::any::Any;

/// A CPU array's elements: one flat buffer whose arm is its dtype. It carries no shape; a
/// `Layout` (offset, shape, strides in elements) says which elements a view reads. Dropping it
/// returns an owned buffer to the pool.
#[derive(Debug)]
pub enum CpuStorage {
    /// `DType::F32` elements.
    F32(Buf<f32>),
    /// `DType::F64` elements.
    F64(Buf<f64>),
    /// `DType::F16` (IEEE binary16) elements.
    F16(Buf<f16>),
    /// `DType::BF16` (bfloat16) elements.
    BF16(Buf<bf16>),
    /// `DType::I32` elements.
    I32(Buf<i32>),
    /// `DType::I64` elements.
    I64(Buf<i64>),
    /// `DType::U8` elements.
    U8(Buf<u8>),
    /// `DType::Bool` elements: one byte each, always 0 or 1.
    Bool(Buf<bool>),
    /// `DType::I8` elements.
    I8(Buf<i8>),
    /// `DType::I16` elements.
    I16(Buf<i16>),
    /// `DType::U16` elements.
    U16(Buf<u16>),
    /// `DType::U32` elements.
    U32(Buf<u32>),
    /// `DType::U64` elements.
    U64(Buf<u64>),
    /// `DType::C64` elements (two f32 each, real first).
    C64(Buf<C64>),
    /// `DType::C128` elements (two f64 each, real first).
    C128(Buf<C128>),
}

/// Runs `$body` with `$v` bound to the typed buffer (`Buf<T>`, a slice through `Deref`) of `$s`,
/// whatever its dtype. The form `with_storage!(s, v => body, complex => other)` runs `other`
/// (which does not see the buffer) for the complex dtypes instead: for kernels that have no
/// complex form, `other` being the error that says so.
#[macro_export]
macro_rules! with_storage {
    ($s:expr, $v:ident => $body:expr, complex => $other:expr) => {
        match $s {
            $crate::CpuStorage::C64(_) | $crate::CpuStorage::C128(_) => $other,
            $crate::CpuStorage::F32($v) => $body,
            $crate::CpuStorage::F64($v) => $body,
            $crate::CpuStorage::F16($v) => $body,
            $crate::CpuStorage::BF16($v) => $body,
            $crate::CpuStorage::I32($v) => $body,
            $crate::CpuStorage::I64($v) => $body,
            $crate::CpuStorage::U8($v) => $body,
            $crate::CpuStorage::Bool($v) => $body,
            $crate::CpuStorage::I8($v) => $body,
            $crate::CpuStorage::I16($v) => $body,
            $crate::CpuStorage::U16($v) => $body,
            $crate::CpuStorage::U32($v) => $body,
            $crate::CpuStorage::U64($v) => $body,
        }
    };
    ($s:expr, $v:ident => $body:expr) => {
        match $s {
            $crate::CpuStorage::C64($v) => $body,
            $crate::CpuStorage::C128($v) => $body,
            $crate::CpuStorage::F32($v) => $body,
            $crate::CpuStorage::F64($v) => $body,
            $crate::CpuStorage::F16($v) => $body,
            $crate::CpuStorage::BF16($v) => $body,
            $crate::CpuStorage::I32($v) => $body,
            $crate::CpuStorage::I64($v) => $body,
            $crate::CpuStorage::U8($v) => $body,
            $crate::CpuStorage::Bool($v) => $body,
            $crate::CpuStorage::I8($v) => $body,
            $crate::CpuStorage::I16($v) => $body,
            $crate::CpuStorage::U16($v) => $body,
            $crate::CpuStorage::U32($v) => $body,
            $crate::CpuStorage::U64($v) => $body,
        }
    };
}

mod sealed {
    pub trait Sealed {}
}

/// An element type the CPU backend stores. Sealed: every implementor is a primitive for which
/// the all-zero bit pattern is a valid value (the pool relies on it).
pub trait CpuElement: Element + sealed::Sealed {
    /// A storage owning `v`, in this type's arm (no copy).
    fn wrap(v: Vec<Self>) -> CpuStorage;
    /// A storage holding `b`, owned or foreign, in this type's arm (no copy).
    fn wrap_buf(b: Buf<Self>) -> CpuStorage;
    /// The whole buffer of `s` when its arm is this type's; `None` for any other dtype.
    fn slice(s: &CpuStorage) -> Option<&[Self]>;
    /// As [`CpuElement::slice`], mutably.
    fn slice_mut(s: &mut CpuStorage) -> Option<&mut [Self]>;
}

macro_rules! cpu_element {
    ($t:ty, $arm:ident) => {
        impl sealed::Sealed for $t {}
        impl CpuElement for $t {
            fn wrap(v: Vec<Self>) -> CpuStorage {
                CpuStorage::$arm(Buf::from(v))
            }
            fn wrap_buf(b: Buf<Self>) -> CpuStorage {
                CpuStorage::$arm(b)
            }
            fn slice(s: &CpuStorage) -> Option<&[Self]> {
                match s {
                    CpuStorage::$arm(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut(s: &mut CpuStorage) -> Option<&mut [Self]> {
                match s {
                    CpuStorage::$arm(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
cpu_element!(f32, F32);
cpu_element!(f64, F64);
cpu_element!(f16, F16);
cpu_element!(bf16, BF16);
cpu_element!(i32, I32);
cpu_element!(i64, I64);
cpu_element!(u8, U8);
cpu_element!(bool, Bool);
cpu_element!(i8, I8);
cpu_element!(i16, I16);
cpu_element!(u16, U16);
cpu_element!(u32, U32);
cpu_element!(u64, U64);
cpu_element!(C64, C64);
cpu_element!(C128, C128);

/// `len` elements of `s` from `off`, as `T`: a typed error naming `op` when `s` holds
/// another dtype or is too short (an internal error: the array layer sized the buffers).
pub(crate) fn read<'a, T: CpuElement>(
    op: &'static str,
    s: &'a CpuStorage,
    off: usize,
    len: usize,
) -> quill_core::Result<&'a [T]> {
    let v = T::slice(s).ok_or(quill_core::Error::DTypeMismatch {
        op,
        expected: T::DTYPE,
        got: s.dtype(),
    })?;
    v.get(off..off + len).ok_or_else(|| {
        quill_core::Error::invalid(
            op,
            format!(
                "internal: a buffer of {} elements read at {off}..{}",
                v.len(),
                off + len
            ),
        )
    })
}

/// Runs `$body` with the type `$T` the element type of `$dtype`. The form
/// `dispatch_dtype!(d, T => body, complex => other)` runs `other` for the complex dtypes
/// instead (see [`with_storage!`]).
#[macro_export]
macro_rules! dispatch_dtype {
    ($dtype:expr, $T:ident => $body:expr, complex => $other:expr) => {
        $crate::dispatch_dtype!(@arms $dtype, $T => $body, c64 => $other, c128 => $other)
    };
    ($dtype:expr, $T:ident => $body:expr) => {
        $crate::dispatch_dtype!(@arms $dtype, $T => $body,
            c64 => {
                type $T = quill_core::C64;
                $body
            },
            c128 => {
                type $T = quill_core::C128;
                $body
            })
    };
    (@arms $dtype:expr, $T:ident => $body:expr, c64 => $c64:expr, c128 => $c128:expr) => {
        match $dtype {
            quill_core::DType::C64 => $c64,
            quill_core::DType::C128 => $c128,
            quill_core::DType::F32 => {
                type $T = f32;
                $body
            }
            quill_core::DType::F64 => {
                type $T = f64;
                $body
            }
            quill_core::DType::F16 => {
                type $T = half::f16;
                $body
            }
            quill_core::DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            quill_core::DType::I32 => {
                type $T = i32;
                $body
            }
            quill_core::DType::I64 => {
                type $T = i64;
                $body
            }
            quill_core::DType::U8 => {
                type $T = u8;
                $body
            }
            quill_core::DType::Bool => {
                type $T = bool;
                $body
            }
            quill_core::DType::I8 => {
                type $T = i8;
                $body
            }
            quill_core::DType::I16 => {
                type $T = i16;
                $body
            }
            quill_core::DType::U16 => {
                type $T = u16;
                $body
            }
            quill_core::DType::U32 => {
                type $T = u32;
                $body
            }
            quill_core::DType::U64 => {
                type $T = u64;
                $body
            }
        }
    };
}

impl CpuStorage {
    /// The dtype of the arm this storage is in.
    pub fn dtype(&self) -> DType {
        match self {
            CpuStorage::F32(_) => DType::F32,
            CpuStorage::F64(_) => DType::F64,
            CpuStorage::F16(_) => DType::F16,
            CpuStorage::BF16(_) => DType::BF16,
            CpuStorage::I32(_) => DType::I32,
            CpuStorage::I64(_) => DType::I64,
            CpuStorage::U8(_) => DType::U8,
            CpuStorage::Bool(_) => DType::Bool,
            CpuStorage::I8(_) => DType::I8,
            CpuStorage::I16(_) => DType::I16,
            CpuStorage::U16(_) => DType::U16,
            CpuStorage::U32(_) => DType::U32,
            CpuStorage::U64(_) => DType::U64,
            CpuStorage::C64(_) => DType::C64,
            CpuStorage::C128(_) => DType::C128,
        }
    }

    /// The buffer's length in elements, which may exceed the elements any one view reads.
    pub fn len(&self) -> usize {
        with_storage!(self, v => v.len())
    }

    /// Whether the buffer holds no elements (a zero-size array's storage).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A zero-filled buffer of `len` elements for `op`, taken from the pool when one fits
    /// (`Error::OutOfMemory` when it cannot exist).
    pub fn zeros(op: &'static str, dtype: DType, len: usize) -> Result<CpuStorage> {
        Ok(dispatch_dtype!(dtype, T => T::wrap(pool::take_zeroed::<T>(op, len)?)))
    }

    /// A buffer of `len` elements whose contents are unspecified (but valid values): for outputs
    /// that a kernel overwrites completely. Reuses pooled memory without clearing it.
    pub fn for_overwrite(op: &'static str, dtype: DType, len: usize) -> Result<CpuStorage> {
        Ok(dispatch_dtype!(dtype, T => T::wrap(pool::take::<T>(op, len)?)))
    }

    /// A storage owning `v` (moved in, no copy). Kernels use it for outputs they built as a
    /// vector; [`CpuStorage::from_elements`] is the form for callers holding only `Element`.
    pub fn from_vec<T: CpuElement>(v: Vec<T>) -> CpuStorage {
        T::wrap(v)
    }

    /// A storage owning `v`, for any `quill_core::Element`: moved in (no copy) when `T` is one
    /// of this enum's element types, as every `Element` quill defines is; an `Element` defined
    /// elsewhere is converted to its `DTYPE` through its scalar. How the layers above hand
    /// data in without naming this crate's trait.
    pub fn from_elements<T: Element>(v: Vec<T>) -> CpuStorage {
        let mut slot = Some(v);
        macro_rules! moved {
            ($($t:ty),*) => {$(
                if let Some(s) = (&mut slot as &mut dyn Any).downcast_mut::<Option<Vec<$t>>>() {
                    return <$t as CpuElement>::wrap(s.take().unwrap_or_default());
                }
            )*};
        }
        moved!(f32, f64, f16, bf16, i32, i64, u8, bool, i8, i16, u16, u32, u64, C64, C128);
        let v = slot.unwrap_or_default();
        crate::dispatch_dtype!(T::DTYPE, U => {
            U::wrap(v.iter().map(|x| U::from_scalar(x.to_scalar())).collect())
        })
    }

    /// The elements as `&[T]` when `T` is this storage's element type (None otherwise, and for
    /// an `Element` defined outside quill).
    pub fn elements<T: Element>(&self) -> Option<&[T]> {
        with_storage!(self, b => (b as &dyn Any).downcast_ref::<Buf<T>>().map(|b| &b[..]))
    }
}

impl Drop for CpuStorage {
    fn drop(&mut self) {
        with_storage!(self, v => pool::give(v.take_vec()))
    }
}
