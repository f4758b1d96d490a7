//! Boolean-mask indexing (`select_mask`, `assign_mask`) on strided inputs against a naive
//! C-order reference.

use quill::{DType, NDArray};
use quill_test_support::{numel, random_shape, strided_from, Prng};

#[test]
fn select_and_assign_follow_the_leading_dims_rule() {
    let mut rng = Prng::new(21);
    for case in 0..200 {
        let shape = random_shape(&mut rng, 5, 4, 300);
        let vals: Vec<f64> = (0..numel(&shape)).map(|i| i as f64).collect();
        let x = strided_from(&mut rng, &vals, &shape, -1.0);
        let k = rng.below(shape.len() + 1);
        let lead: usize = shape[..k].iter().product();
        let inner: usize = shape[k..].iter().product();
        let bits: Vec<bool> = (0..lead).map(|_| rng.chance(0.5)).collect();
        let mask = strided_from(&mut rng, &bits, &shape[..k], false);
        let got = x.select_mask(&mask).unwrap();
        let want: Vec<f64> = (0..lead)
            .filter(|&r| bits[r])
            .flat_map(|r| vals[r * inner..(r + 1) * inner].to_vec())
            .collect();
        let count = bits.iter().filter(|&&b| b).count();
        let mut want_shape = vec![count];
        want_shape.extend_from_slice(&shape[k..]);
        assert_eq!(got.shape(), &want_shape[..], "case {case}");
        assert_eq!(got.to_vec::<f64>().unwrap(), want, "case {case}");
        // one value per selection, written through the strided view
        let per: Vec<f64> = (0..count * inner).map(|i| 1000.0 + i as f64).collect();
        let value = NDArray::from_vec(per.clone(), &want_shape).unwrap();
        x.assign_mask(&mask, &value).unwrap();
        let after = x.to_vec::<f64>().unwrap();
        let mut next = 0;
        for r in 0..lead {
            for j in 0..inner {
                let w = if bits[r] {
                    next += 1;
                    per[next - 1]
                } else {
                    vals[r * inner + j]
                };
                assert_eq!(after[r * inner + j], w, "case {case}");
            }
        }
    }
}

#[test]
fn mask_errors_name_the_shapes() {
    let x = NDArray::zeros(&[2, 3], DType::F32).unwrap();
    let bad = NDArray::zeros(&[3], DType::Bool).unwrap();
    let e = x.select_mask(&bad).unwrap_err().to_string();
    assert!(e.contains("[3]") && e.contains("[2, 3]"), "{e}");
    // size-0 mask dims select nothing, as NumPy
    let empty = NDArray::zeros(&[2, 0], DType::Bool).unwrap();
    assert_eq!(x.select_mask(&empty).unwrap().shape(), &[0]);
    let empty_row = NDArray::zeros(&[0], DType::Bool).unwrap();
    assert_eq!(x.select_mask(&empty_row).unwrap().shape(), &[0, 3]);
    let not_bool = NDArray::zeros(&[2], DType::F32).unwrap();
    assert!(x.select_mask(&not_bool).is_err());
    let m = NDArray::full(&[2], true, DType::Bool).unwrap();
    let wrong = NDArray::zeros(&[5, 3], DType::F32).unwrap();
    let e = x.assign_mask(&m, &wrong).unwrap_err().to_string();
    assert!(e.contains("fits neither"), "{e}");
}
