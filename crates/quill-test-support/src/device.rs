//! One test body, every device: `device_test!` gives a function `fn name(dev: Device)` a module
//! `name` holding the test `name::cpu`, which runs the body on `Device::Cpu`, and, when the
//! calling crate is built with its `cuda` feature, the test `name::cuda`, which runs it on
//! `Device::Cuda(0)`. Without a usable GPU the CUDA test prints "skipped: no CUDA GPU" and
//! passes, except under `REQUIRE_CUDA=1`, where it panics: a GPU run never passes by skipping.
//! (A module rather than `name_cpu` / `name_cuda` functions, since `macro_rules!` cannot build
//! new identifiers without a proc-macro dependency; `cargo test name::` or `-- ::cuda` select.)

/// The value a skipped test returns: `()` or `Ok(())`.
pub trait TestOutcome {
    /// The value that makes the test pass without running its body.
    fn skipped() -> Self;
}

impl TestOutcome for () {
    fn skipped() {}
}

impl<E> TestOutcome for Result<(), E> {
    fn skipped() -> Self {
        Ok(())
    }
}

/// True when `REQUIRE_CUDA=1` is set: the run is on a GPU machine and must not skip.
pub fn cuda_required() -> bool {
    std::env::var("REQUIRE_CUDA").is_ok_and(|v| v == "1")
}

/// True when GPU 0 can hold arrays. Otherwise prints "skipped: no CUDA GPU" and returns false,
/// or panics when `REQUIRE_CUDA=1`.
pub fn cuda_usable() -> bool {
    if quill::Device::cuda_is_available() {
        return true;
    }
    assert!(
        !cuda_required(),
        "REQUIRE_CUDA=1 but no CUDA GPU is usable (driver or device missing)"
    );
    eprintln!("skipped: no CUDA GPU");
    false
}

/// Runs one test body on every device; see the module docs. Two forms:
///
/// ```no_run
/// use quill::{DType, Device, NDArray, Result};
/// use quill_test_support::device_test;
///
/// // Around a function of the device (rustfmt formats the body as usual):
/// device_test!(sums_of_ones -> Result<()>);
/// fn sums_of_ones(dev: Device) -> Result<()> {
///     let a = NDArray::ones(&[3], DType::F32)?.to_device(dev)?;
///     assert_eq!(a.sum(None, false)?.item::<f32>()?, 3.0);
///     Ok(())
/// }
///
/// // Or with the body inside:
/// device_test! {
///     fn zeros_are_zero(dev: Device) {
///         let z = NDArray::zeros(&[2], DType::I64).unwrap().to_device(dev).unwrap();
///         assert_eq!(z.sum(None, false).unwrap().item::<i64>().unwrap(), 0);
///     }
/// }
/// # fn main() {}
/// ```
///
/// The function returns `()` or `Result<(), E>`; attributes (`#[ignore]`, docs) given to the
/// macro go onto each generated test.
#[macro_export]
macro_rules! device_test {
    ($(#[$attr:meta])* fn $name:ident($dev:ident : $ty:ty) $(-> $ret:ty)? $body:block) => {
        fn $name($dev: $ty) $(-> $ret)? $body
        $crate::device_test!(@tests [$(#[$attr])*] $name $(-> $ret)?);
    };
    ($(#[$attr:meta])* $name:ident $(-> $ret:ty)?) => {
        $crate::device_test!(@tests [$(#[$attr])*] $name $(-> $ret)?);
    };
    (@tests [$($attr:tt)*] $name:ident $(-> $ret:ty)?) => {
        mod $name {
            // The return type is named as the caller wrote it, so the caller's imports apply.
            #[allow(unused_imports)]
            use super::*;

            $($attr)*
            #[test]
            pub fn cpu() $(-> $ret)? {
                super::$name($crate::__reexport::quill::Device::Cpu)
            }

            // The calling crate's feature decides, so a tests crate built with `--features cuda`
            // gets the GPU half, and one built without it does not compile it at all.
            $($attr)*
            #[cfg(feature = "cuda")]
            #[test]
            pub fn cuda() $(-> $ret)? {
                if !$crate::cuda_usable() {
                    return $crate::TestOutcome::skipped();
                }
                super::$name($crate::__reexport::quill::Device::Cuda(0))
            }
        }
    };
}
