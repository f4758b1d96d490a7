//! Device names, and moving arrays in a build without CUDA.

use quill::{DType, Device, NDArray};

#[test]
fn device_names_parse_and_print() {
    for (s, d) in [
        ("cpu", Device::Cpu),
        ("cuda", Device::Cuda(0)),
        ("cuda:3", Device::Cuda(3)),
    ] {
        assert_eq!(Device::parse(s), Some(d));
    }
    assert_eq!(Device::Cuda(2).to_string(), "cuda:2");
    assert_eq!(Device::Cpu.to_string(), "cpu");
    for bad in ["", "cuda:", "cuda:x", "tpu", "cuda:-1"] {
        assert_eq!(Device::parse(bad), None, "{bad}");
    }
}

#[test]
fn cpu_to_cpu_is_the_same_array() {
    let a = NDArray::arange(0.0, 6.0, 1.0, DType::F32).unwrap();
    let b = a.to_device(Device::Cpu).unwrap();
    assert!(b.shares_storage_with(&a));
    assert!(!a.is_cuda());
    // A view moves in place only when it is its whole buffer.
    let v = a
        .reshape(&[2, 3])
        .unwrap()
        .slice(&quill::s![.., 1..])
        .unwrap();
    v.relocate(Device::Cpu).unwrap(); // already there: nothing to do
}

#[cfg(not(feature = "cuda"))]
#[test]
fn without_the_cuda_feature_moving_says_how_to_get_it() {
    let e = NDArray::zeros(&[2], DType::F32)
        .unwrap()
        .to_device(Device::Cuda(0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cuda:0") && e.contains("--features cuda"), "{e}");
    assert_eq!(Device::cuda_device_count(), 0);
    assert!(!Device::cuda_is_available());
}
