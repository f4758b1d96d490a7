//! Modules refuse what would silently poison training (issue 48): an empty batch in BatchNorm,
//! a dropout rate outside [0, 1], an id outside an Embedding's table.

use quill::nn::{BatchNorm, Dropout, Embedding, Module};
use quill::{DType, Error, NDArray, Tensor};

#[test]
fn batch_norm_refuses_an_empty_batch_and_keeps_its_statistics() {
    let bn = BatchNorm::new_1d(3).unwrap();
    let x = Tensor::from_array(NDArray::randn(&[8, 3], 1, DType::F32).unwrap(), false).unwrap();
    bn.forward(&x).unwrap();
    let before = bn.running_mean.array().to_vec::<f32>().unwrap();
    let empty = Tensor::zeros(&[0, 3], DType::F32).unwrap();
    let e = bn.forward(&empty).unwrap_err().to_string();
    assert!(
        e.starts_with("BatchNorm1d: cannot train on an empty batch"),
        "{e}"
    );
    assert_eq!(bn.running_mean.array().to_vec::<f32>().unwrap(), before);
    let bn2 = BatchNorm::new_2d(2).unwrap();
    let e = bn2
        .forward(&Tensor::zeros(&[0, 2, 4, 4], DType::F32).unwrap())
        .unwrap_err();
    assert!(
        e.to_string().starts_with("BatchNorm2d: cannot train"),
        "{e}"
    );
    // Evaluation of an empty batch is fine: nothing is learned from it.
    bn.set_training(false);
    assert_eq!(bn.forward(&empty).unwrap().shape(), &[0, 3]);
}

#[test]
fn dropout_rates() {
    for p in [-0.1, 1.5, f64::NAN, -1.0] {
        let e = Dropout::new(p, 0).err().expect("refused").to_string();
        assert!(
            e.contains("Dropout: p must be a probability in [0, 1]"),
            "{e}"
        );
    }
    let x = Tensor::from_array(NDArray::ones(&[4, 5], DType::F32).unwrap(), true).unwrap();
    let y = Dropout::new(1.0, 0).unwrap().forward(&x).unwrap();
    assert!(y.array().to_vec::<f32>().unwrap().iter().all(|&v| v == 0.0));
    let y = Dropout::new(0.0, 0).unwrap().forward(&x).unwrap();
    assert!(y.array().to_vec::<f32>().unwrap().iter().all(|&v| v == 1.0));
}

#[test]
fn embedding_ids_must_be_rows() {
    let e = Embedding::new(5, 3, 0).unwrap();
    let rows = e
        .lookup(&NDArray::from_vec(vec![4i64, 0], &[2]).unwrap())
        .unwrap();
    let w = e.weight.array().to_vec::<f32>().unwrap();
    assert_eq!(rows.array().to_vec::<f32>().unwrap()[..3], w[12..15]);
    for bad in [-1i64, 5, 1 << 40] {
        let ids = NDArray::from_vec(vec![0i64, bad, 1], &[3]).unwrap();
        match e.lookup(&ids) {
            Err(Error::IndexOutOfRange {
                op, index, size, ..
            }) => {
                assert_eq!((op, index as i64, size), ("Embedding", bad, 5));
            }
            r => panic!(
                "id {bad}: expected IndexOutOfRange, got {:?}",
                r.map(|t| t.shape().to_vec())
            ),
        }
    }
    let floats = NDArray::from_vec(vec![0.5f32], &[1]).unwrap();
    assert!(matches!(
        e.lookup(&floats),
        Err(Error::DTypeMismatch { .. })
    ));
    assert_eq!(
        e.lookup(&NDArray::zeros(&[0], DType::I64).unwrap())
            .unwrap()
            .shape(),
        &[0, 3]
    );
}
