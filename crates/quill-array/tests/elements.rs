//! Host data in and out through `quill_core::Element`: quill's own element types move in and
//! are read in place; an `Element` defined outside quill is converted through its scalar, to
//! and from its `DTYPE`, and a wrong dtype is an error.

use quill_array::NDArray;
use quill_core::{DType, Element, Scalar};

/// A user's element type: Celsius stored as f32.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Celsius(f32);

impl Element for Celsius {
    const DTYPE: DType = DType::F32;
    fn to_scalar(self) -> Scalar {
        Scalar::F(self.0 as f64)
    }
    fn from_scalar(s: Scalar) -> Self {
        Celsius(f32::from_scalar(s))
    }
    fn zero() -> Self {
        Celsius(0.0)
    }
    fn one() -> Self {
        Celsius(1.0)
    }
}

#[test]
fn an_outside_element_converts_both_ways() {
    let v = vec![Celsius(-3.5), Celsius(0.0), Celsius(21.25), Celsius(100.0)];
    let a = NDArray::from_vec(v.clone(), &[2, 2]).unwrap();
    assert_eq!(a.dtype(), DType::F32);
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![-3.5, 0.0, 21.25, 100.0]);
    // Read back through a transposed view: the values in C order of the view.
    let t = a.permute(&[1, 0]).unwrap();
    assert_eq!(t.to_vec::<Celsius>().unwrap(), vec![v[0], v[2], v[1], v[3]]);
    assert_eq!(t.with_host_slice(|s: &[Celsius]| s.len()).unwrap(), 4);
    assert_eq!(
        NDArray::scalar(Celsius(7.0)).item::<Celsius>().unwrap(),
        Celsius(7.0)
    );
    let e = a.to_vec::<f64>().unwrap_err().to_string();
    assert!(e.contains("f32") && e.contains("f64"), "{e}");
}

#[test]
fn quill_elements_are_moved_in_and_read_in_place() {
    let a = NDArray::from_vec((0..6).map(|i| i as u16).collect::<Vec<_>>(), &[3, 2]).unwrap();
    assert_eq!(a.dtype(), DType::U16);
    assert_eq!(a.to_vec::<u16>().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    let b = NDArray::from_vec(vec![true, false], &[2]).unwrap();
    assert_eq!(b.to_vec::<bool>().unwrap(), vec![true, false]);
    let h = NDArray::from_vec(vec![half::bf16::from_f32(1.5)], &[1]).unwrap();
    assert_eq!(h.dtype(), DType::BF16);
    assert_eq!(h.item::<f64>().unwrap(), 1.5);
}
