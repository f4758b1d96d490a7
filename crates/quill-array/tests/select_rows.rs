//! `NDArray::select_rows` (the dataset's batch gather) against `index_select` and a per-row
//! loop, on views (permuted, reversed, offset, broadcast), rank 1 to 4, size-0 rows and
//! batches, a repeated index, every dtype, and an index past the end.

use quill_array::NDArray;
use quill_core::{s, DType};

fn rows_of(a: &NDArray) -> Vec<Vec<f64>> {
    let v = a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap();
    let n = a.shape()[0];
    let row = v.len().checked_div(n).unwrap_or(0);
    (0..n).map(|i| v[i * row..(i + 1) * row].to_vec()).collect()
}

#[test]
fn select_rows_matches_a_per_row_loop_on_views() {
    let base = NDArray::arange(0.0, 120.0, 1.0, DType::F64).unwrap();
    let views = [
        ("rank 1", base.clone()),
        ("contiguous", base.reshape(&[10, 12]).unwrap()),
        (
            "permuted",
            base.reshape(&[12, 10]).unwrap().permute(&[1, 0]).unwrap(),
        ),
        (
            "reversed",
            base.reshape(&[10, 3, 4])
                .unwrap()
                .slice(&s![..;-1])
                .unwrap(),
        ),
        (
            "offset",
            base.reshape(&[10, 2, 3, 2])
                .unwrap()
                .slice(&s![3..])
                .unwrap(),
        ),
        (
            "broadcast",
            base.slice(&s![..12])
                .unwrap()
                .reshape(&[1, 12])
                .unwrap()
                .broadcast_to(&[5, 12])
                .unwrap(),
        ),
        ("empty rows", NDArray::zeros(&[4, 0], DType::F64).unwrap()),
    ];
    for (name, a) in views {
        let all = rows_of(&a);
        for idx in [vec![], vec![0], vec![3, 1, 3, 0]] {
            let got = a.select_rows(&idx).unwrap();
            let mut want_shape = a.shape().to_vec();
            want_shape[0] = idx.len();
            assert_eq!(got.shape(), &want_shape[..], "{name} {idx:?}");
            assert!(got.is_contiguous(), "{name}");
            let got = if idx.is_empty() {
                vec![]
            } else {
                rows_of(&got)
            };
            let want: Vec<Vec<f64>> = idx.iter().map(|&i| all[i].clone()).collect();
            assert_eq!(got, want, "{name} {idx:?}");
        }
    }
}

#[test]
fn select_rows_every_dtype_and_errors() {
    let idx = [2usize, 0, 2];
    for dt in DType::ALL {
        let a = NDArray::arange(0.0, 12.0, 1.0, DType::F64)
            .unwrap()
            .astype(dt)
            .unwrap()
            .reshape(&[4, 3])
            .unwrap();
        let i = NDArray::from_vec(idx.iter().map(|&v| v as i64).collect(), &[3]).unwrap();
        let want = a.index_select(0, &i).unwrap();
        let got = a.select_rows(&idx).unwrap();
        assert_eq!(got.dtype(), dt);
        assert_eq!(rows_of(&got), rows_of(&want), "{dt}");
    }
    let a = NDArray::zeros(&[4, 3], DType::F32).unwrap();
    let e = a.select_rows(&[1, 4]).unwrap_err().to_string();
    assert!(e.contains("select_rows") && e.contains('4'), "{e}");
    let e = NDArray::scalar(1.0f32)
        .select_rows(&[0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("rank-0"), "{e}");
}
