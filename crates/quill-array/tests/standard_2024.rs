//! The Array API 2024.12 additions that live in the core: integer-array indexing
//! (`NDArray::index`) against per-element loops over strided sources, and `nextafter` in every
//! float dtype against the neighbours read off the bits.

use half::{bf16, f16};
use quill_array::{IndexArg, NDArray};
use quill_core::{s, DType, Error, SliceArg};

/// A (4, 3, 5) source as a reversed, permuted view of 0..60 (not contiguous), with the value
/// at each position.
fn source() -> (NDArray, impl Fn(usize, usize, usize) -> i64) {
    let base = NDArray::arange(0.0, 60.0, 1.0, DType::I64)
        .unwrap()
        .reshape(&[5, 3, 4])
        .unwrap();
    let v = base.slice(&s![..;-1]).unwrap().permute(&[2, 1, 0]).unwrap();
    assert!(!v.is_contiguous());
    // v[i, j, k] = base[4 - k, j, i] = (4 - k) * 12 + j * 4 + i.
    (v, |i, j, k| ((4 - k) * 12 + j * 4 + i) as i64)
}

fn idx(v: &[i64], shape: &[usize]) -> IndexArg {
    IndexArg::Array(NDArray::from_vec(v.to_vec(), shape).unwrap())
}

fn full() -> IndexArg {
    IndexArg::Basic(SliceArg::range(None, None, 1))
}

#[test]
fn integer_arrays_pick_what_per_element_loops_pick() {
    let (v, at) = source();
    // Adjacent arrays on dims 1 and 2, a column and a row broadcasting to (2, 3): B replaces
    // them in place, so the result is (4, 2, 3).
    let rows = [2i64, -3];
    let cols = [0i64, 4, -1];
    let got = v
        .index(&[full(), idx(&rows, &[2, 1]), idx(&cols, &[1, 3])])
        .unwrap();
    assert_eq!(got.shape(), &[4, 2, 3]);
    let g = got.to_vec::<i64>().unwrap();
    for i in 0..4 {
        for a in 0..2 {
            for b in 0..3 {
                let j = rows[a].rem_euclid(3) as usize;
                let k = cols[b].rem_euclid(5) as usize;
                assert_eq!(g[i * 6 + a * 3 + b], at(i, j, k), "({i}, {a}, {b})");
            }
        }
    }
    // Arrays on dims 0 and 2 with a stepped slice between: not adjacent, so B goes first:
    // (2, 2, 2) from a (2, 2) pair and the slice 2..0 step -1 over dim 1 (positions 2, 1).
    let first = [3i64, 0, -1, 1];
    let last = [1i64, 1, 2, 4];
    let got = v
        .index(&[
            idx(&first, &[2, 2]),
            IndexArg::Basic(SliceArg::range(Some(2), Some(0), -1)),
            idx(&last, &[2, 2]),
        ])
        .unwrap();
    assert_eq!(got.shape(), &[2, 2, 2]);
    let g = got.to_vec::<i64>().unwrap();
    for p in 0..4 {
        for (s, j) in [2usize, 1].iter().enumerate() {
            let i = first[p].rem_euclid(4) as usize;
            assert_eq!(g[p * 2 + s], at(i, *j, last[p] as usize));
        }
    }
    // An int beside an array is an advanced index too; an index broadcast with stride 0 works.
    let bcast = NDArray::from_vec(vec![4i64], &[1])
        .unwrap()
        .broadcast_to(&[3])
        .unwrap();
    let got = v
        .index(&[
            IndexArg::Basic(SliceArg::Index(-1)),
            full(),
            IndexArg::Array(bcast),
        ])
        .unwrap();
    assert_eq!(got.shape(), &[3, 3]);
    let g = got.to_vec::<i64>().unwrap();
    for b in 0..3 {
        for j in 0..3 {
            assert_eq!(g[b * 3 + j], at(3, j, 4));
        }
    }
    // Only basic entries: the view slice gives.
    let view = v.index(&[IndexArg::Basic(SliceArg::Index(1))]).unwrap();
    assert_eq!(view.shape(), &[3, 5]);
}

#[test]
fn integer_array_errors_name_the_dim() {
    let (v, _) = source();
    match v.index(&[full(), idx(&[0, 3], &[2])]).unwrap_err() {
        Error::IndexOutOfRange {
            index, axis, size, ..
        } => assert_eq!((index, axis, size), (3, 1, 3)),
        e => panic!("{e}"),
    }
    let e = v
        .index(&[idx(&[0, 1], &[2]), idx(&[0, 1, 2], &[3])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("do not broadcast"), "{e}");
    let floats = NDArray::from_vec(vec![0.0f32], &[1]).unwrap();
    let e = v.index(&[IndexArg::Array(floats)]).unwrap_err().to_string();
    assert!(e.contains("integers") && e.contains("f32"), "{e}");
    let e = v
        .index(&[full(), full(), full(), idx(&[0], &[1])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("too many indices: 4 given"), "{e}");
    // An empty index into an empty dim is fine; a non-empty one is out of range.
    let empty = NDArray::zeros(&[0, 2], DType::F32).unwrap();
    let got = empty.index(&[idx(&[], &[0])]).unwrap();
    assert_eq!(got.shape(), &[0, 2]);
    assert!(empty.index(&[idx(&[0], &[1])]).is_err());
}

#[test]
fn nextafter_steps_one_ulp_in_each_dtype() {
    // f32 and f64 against the neighbours of the bits, on a reversed view and a broadcast one.
    let a = NDArray::from_vec(vec![1.0f32, -1.0, 0.0, -0.0, f32::MAX, f32::INFINITY], &[6])
        .unwrap()
        .slice(&s![..;-1])
        .unwrap();
    let b = NDArray::from_vec(vec![2.0f32, 0.0, -1.0, 1.0, f32::INFINITY, 0.0], &[6])
        .unwrap()
        .slice(&s![..;-1])
        .unwrap();
    let got = a.nextafter(&b).unwrap().to_vec::<f32>().unwrap();
    let want = [
        f32::MAX,
        f32::INFINITY,
        f32::from_bits(1),
        -f32::from_bits(1),
        f32::from_bits((-1.0f32).to_bits() - 1),
        f32::from_bits(1.0f32.to_bits() + 1),
    ];
    assert_eq!(
        got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        want.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    let col = NDArray::from_vec(vec![1.0f64, 2.0], &[2, 1]).unwrap();
    let row = NDArray::from_vec(vec![0.0f64, 3.0, f64::NAN], &[1, 3]).unwrap();
    let got = col.nextafter(&row).unwrap();
    assert_eq!(got.shape(), &[2, 3]);
    let g = got.to_vec::<f64>().unwrap();
    for (r, x) in [1.0f64, 2.0].iter().enumerate() {
        assert_eq!(g[r * 3], f64::from_bits(x.to_bits() - 1));
        assert_eq!(g[r * 3 + 1], f64::from_bits(x.to_bits() + 1));
        assert!(g[r * 3 + 2].is_nan());
    }
    // Half precisions step by their own ulp: 2^-10 above 1 for f16, 2^-7 for bf16.
    let h = NDArray::from_vec(vec![f16::ONE], &[1]).unwrap();
    let up = NDArray::full(&[1], 2.0, DType::F16).unwrap();
    assert_eq!(
        h.nextafter(&up).unwrap().to_vec::<f16>().unwrap()[0],
        f16::from_f64(1.0 + 2f64.powi(-10))
    );
    let h = NDArray::from_vec(vec![bf16::ONE], &[1]).unwrap();
    let up = NDArray::full(&[1], 2.0, DType::BF16).unwrap();
    assert_eq!(
        h.nextafter(&up).unwrap().to_vec::<bf16>().unwrap()[0],
        bf16::from_f64(1.0 + 2f64.powi(-7))
    );
    // Mixed precisions promote; integers go to f64; complex is refused by name.
    let mixed = a.nextafter(&col.slice(&s![0]).unwrap()).unwrap();
    assert_eq!(mixed.dtype(), DType::F64);
    let ints = NDArray::from_vec(vec![1i64], &[1]).unwrap();
    assert_eq!(ints.nextafter(&ints).unwrap().dtype(), DType::F64);
    let c = ints.astype(DType::C64).unwrap();
    let e = c.nextafter(&ints).unwrap_err().to_string();
    assert!(e.contains("nextafter") && e.contains("complex"), "{e}");
}
