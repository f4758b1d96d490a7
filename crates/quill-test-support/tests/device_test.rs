//! `device_test!` in both of its forms: the generated tests exist, call the body with the device
//! they are named for, and pass through a body's `Result`.

use quill::{DType, Device, NDArray, Result};
use quill_test_support::device_test;
use std::sync::atomic::{AtomicUsize, Ordering};

static CPU_RUNS: AtomicUsize = AtomicUsize::new(0);

device_test!(wrapped_function -> Result<()>);
fn wrapped_function(dev: Device) -> Result<()> {
    if dev == Device::Cpu {
        CPU_RUNS.fetch_add(1, Ordering::SeqCst);
    }
    let a = NDArray::ones(&[3], DType::F32)?.to_device(dev)?;
    assert_eq!(a.device(), dev);
    assert_eq!(a.sum(None, false)?.item::<f32>()?, 3.0);
    Ok(())
}

device_test! {
    /// The inline form, with a doc comment carried onto the tests.
    fn inline_body(dev: Device) {
        assert!(dev == Device::Cpu || Device::cuda_is_available(), "{dev}");
        let z = NDArray::zeros(&[2], DType::I64).unwrap().to_device(dev).unwrap();
        assert_eq!(z.device(), dev);
    }
}

#[test]
fn the_cpu_test_calls_the_body_on_the_cpu() {
    // The generated test is an ordinary function of the module the macro made.
    wrapped_function::cpu().unwrap();
    assert!(CPU_RUNS.load(Ordering::SeqCst) >= 1);
    inline_body::cpu();
}
