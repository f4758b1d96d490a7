//! Expected strings are NumPy 2.4's `repr` of the same data with quill's dtype names (and
//! the dtype added where NumPy leaves it implied: float64, int64, bool).

use super::*;
use quill_core::{s, DType};

fn check(a: &NDArray, lines: &[&str]) {
    let want = lines.join("\n");
    assert_eq!(format!("{a}"), want);
    assert_eq!(format!("{a:?}"), want);
}

fn arange(n: usize, dtype: DType, shape: &[isize]) -> NDArray {
    NDArray::arange(0.0, n as f64, 1.0, dtype)
        .unwrap()
        .reshape(shape)
        .unwrap()
}

#[test]
fn one_and_two_dims() {
    check(
        &arange(6, DType::F32, &[6]),
        &["array([0., 1., 2., 3., 4., 5.], dtype=f32)"],
    );
    check(
        &arange(6, DType::F32, &[2, 3]),
        &["array([[0., 1., 2.],", "       [3., 4., 5.]], dtype=f32)"],
    );
}

#[test]
fn blank_lines_between_blocks() {
    check(
        &arange(24, DType::I32, &[2, 3, 4]),
        &[
            "array([[[ 0,  1,  2,  3],",
            "        [ 4,  5,  6,  7],",
            "        [ 8,  9, 10, 11]],",
            "",
            "       [[12, 13, 14, 15],",
            "        [16, 17, 18, 19],",
            "        [20, 21, 22, 23]]], dtype=i32)",
        ],
    );
    check(
        &arange(48, DType::F64, &[2, 2, 3, 4]),
        &[
            "array([[[[ 0.,  1.,  2.,  3.],",
            "         [ 4.,  5.,  6.,  7.],",
            "         [ 8.,  9., 10., 11.]],",
            "",
            "        [[12., 13., 14., 15.],",
            "         [16., 17., 18., 19.],",
            "         [20., 21., 22., 23.]]],",
            "",
            "",
            "       [[[24., 25., 26., 27.],",
            "         [28., 29., 30., 31.],",
            "         [32., 33., 34., 35.]],",
            "",
            "        [[36., 37., 38., 39.],",
            "         [40., 41., 42., 43.],",
            "         [44., 45., 46., 47.]]]], dtype=f64)",
        ],
    );
}

#[test]
fn rank_eight() {
    check(
        &arange(48, DType::I32, &[2, 1, 2, 1, 2, 1, 2, 3]),
        &[
            "array([[[[[[[[ 0,  1,  2],",
            "             [ 3,  4,  5]]],",
            "",
            "",
            "           [[[ 6,  7,  8],",
            "             [ 9, 10, 11]]]]],",
            "",
            "",
            "",
            "",
            "         [[[[[12, 13, 14],",
            "             [15, 16, 17]]],",
            "",
            "",
            "           [[[18, 19, 20],",
            "             [21, 22, 23]]]]]]],",
            "",
            "",
            "",
            "",
            "",
            "",
            "       [[[[[[[24, 25, 26],",
            "             [27, 28, 29]]],",
            "",
            "",
            "           [[[30, 31, 32],",
            "             [33, 34, 35]]]]],",
            "",
            "",
            "",
            "",
            "         [[[[[36, 37, 38],",
            "             [39, 40, 41]]],",
            "",
            "",
            "           [[[42, 43, 44],",
            "             [45, 46, 47]]]]]]]], dtype=i32)",
        ],
    );
}

#[test]
fn rank_zero() {
    check(&NDArray::scalar(3.5f32), &["array(3.5, dtype=f32)"]);
    check(&NDArray::scalar(true), &["array(True, dtype=bool)"]);
    check(&NDArray::scalar(f64::NAN), &["array(nan, dtype=f64)"]);
    check(&NDArray::scalar(-7i64), &["array(-7, dtype=i64)"]);
}

#[test]
fn empty() {
    check(
        &NDArray::zeros(&[0, 3], DType::F32).unwrap(),
        &["array([], shape=[0, 3], dtype=f32)"],
    );
    check(
        &NDArray::zeros(&[0], DType::F32).unwrap(),
        &["array([], dtype=f32)"],
    );
    check(
        &NDArray::zeros(&[2, 0, 4], DType::I64).unwrap(),
        &["array([], shape=[2, 0, 4], dtype=i64)"],
    );
}

#[test]
fn negative_and_maxprec_floats() {
    check(
        &NDArray::from_vec(vec![-1.5f32, 2.25, -3.0], &[3]).unwrap(),
        &["array([-1.5 ,  2.25, -3.  ], dtype=f32)"],
    );
    check(
        &NDArray::from_vec(vec![0.1f64, 0.25, 1.0 / 3.0], &[3]).unwrap(),
        &["array([0.1       , 0.25      , 0.33333333], dtype=f64)"],
    );
    check(
        &NDArray::from_vec(vec![5000.0f64, 1e6], &[2]).unwrap(),
        &["array([   5000., 1000000.], dtype=f64)"],
    );
}

#[test]
fn shortest_digits_in_the_arrays_own_dtype() {
    // 0.3f32 is 0.30000001192...: printed as the shortest f32 repr; a tie at the last
    // digit goes to even (7354.53125 -> 7354.5312).
    check(
        &NDArray::from_vec(vec![0.1f32, 0.3, 12.5], &[3]).unwrap(),
        &["array([ 0.1,  0.3, 12.5], dtype=f32)"],
    );
    let tie = 7354.0f32 + 17.0 / 32.0; // 7354.53125, halfway between 7354.5312 and ..13
    check(
        &NDArray::from_vec(vec![tie, 5938.2983], &[2]).unwrap(),
        &["array([7354.5312, 5938.2983], dtype=f32)"],
    );
    let h = |v: &[f64]| v.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>();
    check(
        &NDArray::from_vec(h(&[0.1, 0.3, 2.5, -65.5]), &[4]).unwrap(),
        &["array([  0.1,   0.3,   2.5, -65.5], dtype=f16)"],
    );
    // Not checked against NumPy (it has no bfloat16); the same rules.
    let b = [0.1f32, 3.0].map(bf16::from_f32).to_vec();
    check(
        &NDArray::from_vec(b, &[2]).unwrap(),
        &["array([0.1, 3. ], dtype=bf16)"],
    );
}

#[test]
fn scientific() {
    check(
        &NDArray::from_vec(vec![1e-5f32, 1.5], &[2]).unwrap(),
        &["array([1.0e-05, 1.5e+00], dtype=f32)"],
    );
    check(
        &NDArray::from_vec(vec![1e10f64, 1.0], &[2]).unwrap(),
        &["array([1.e+10, 1.e+00], dtype=f64)"],
    );
    check(
        &NDArray::from_vec(vec![1e300f64, -2.5e-300], &[2]).unwrap(),
        &["array([ 1.0e+300, -2.5e-300], dtype=f64)"],
    );
    // Digits past the shortest are the value's own (0.3f32 = 3.0000001e-01).
    check(
        &NDArray::from_vec(vec![0.1f32, 0.3, 7354.0 + 17.0 / 32.0], &[3]).unwrap(),
        &["array([1.0000000e-01, 3.0000001e-01, 7.3545312e+03], dtype=f32)"],
    );
    check(
        &NDArray::from_vec(vec![123456789.5f64, 1.0], &[2]).unwrap(),
        &["array([1.2345679e+08, 1.0000000e+00], dtype=f64)"],
    );
    // f32 switches at 1e6 (10^finfo.precision), f64 at 1e8.
    check(
        &NDArray::from_vec(vec![5000.0f32, 1e6], &[2]).unwrap(),
        &["array([5.e+03, 1.e+06], dtype=f32)"],
    );
    // A power of two in f16: the gap below is half the gap above, so 1.563, not 1.562.
    let h = [0.015625f32, 1000.0, 3.0].map(f16::from_f32).to_vec();
    check(
        &NDArray::from_vec(h, &[3]).unwrap(),
        &["array([1.563e-02, 1.000e+03, 3.000e+00], dtype=f16)"],
    );
}

#[test]
fn nan_and_inf() {
    check(
        &NDArray::from_vec(vec![f64::NAN, 1.5, f64::NEG_INFINITY, f64::INFINITY], &[4]).unwrap(),
        &["array([ nan,  1.5, -inf,  inf], dtype=f64)"],
    );
    check(
        &NDArray::from_vec(vec![f64::NAN, f64::INFINITY], &[2]).unwrap(),
        &["array([nan, inf], dtype=f64)"],
    );
}

#[test]
fn bools_and_ints() {
    let b = vec![true, false, true, false, false, true];
    check(
        &NDArray::from_vec(b, &[2, 3]).unwrap(),
        &[
            "array([[ True, False,  True],",
            "       [False, False,  True]], dtype=bool)",
        ],
    );
    check(
        &NDArray::from_vec(vec![-100i64, 5, 20000], &[3]).unwrap(),
        &["array([ -100,     5, 20000], dtype=i64)"],
    );
    check(
        &NDArray::from_vec(vec![0u8, 7, 255], &[3]).unwrap(),
        &["array([  0,   7, 255], dtype=u8)"],
    );
}

#[test]
fn line_wrapping() {
    let a = NDArray::arange(0.0, 45.0, 1.5, DType::F64).unwrap();
    check(
        &a,
        &[
            "array([ 0. ,  1.5,  3. ,  4.5,  6. ,  7.5,  9. , 10.5, 12. , 13.5, 15. ,",
            "       16.5, 18. , 19.5, 21. , 22.5, 24. , 25.5, 27. , 28.5, 30. , 31.5,",
            "       33. , 34.5, 36. , 37.5, 39. , 40.5, 42. , 43.5], dtype=f64)",
        ],
    );
    // `dtype=` moves to its own line when it would pass column 75.
    let a = NDArray::arange(0.0, 15.0, 1.5, DType::F32).unwrap();
    check(
        &a,
        &[
            "array([ 0. ,  1.5,  3. ,  4.5,  6. ,  7.5,  9. , 10.5, 12. , 13.5],",
            "      dtype=f32)",
        ],
    );
}

#[test]
fn summarized() {
    check(
        &arange(2000, DType::F32, &[2000]),
        &[
            "array([0.000e+00, 1.000e+00, 2.000e+00, ..., 1.997e+03, 1.998e+03,",
            "       1.999e+03], shape=[2000], dtype=f32)",
        ],
    );
    check(
        &arange(1600, DType::I32, &[40, 40]),
        &[
            "array([[   0,    1,    2, ...,   37,   38,   39],",
            "       [  40,   41,   42, ...,   77,   78,   79],",
            "       [  80,   81,   82, ...,  117,  118,  119],",
            "       ...,",
            "       [1480, 1481, 1482, ..., 1517, 1518, 1519],",
            "       [1520, 1521, 1522, ..., 1557, 1558, 1559],",
            "       [1560, 1561, 1562, ..., 1597, 1598, 1599]],",
            "      shape=[40, 40], dtype=i32)",
        ],
    );
    // Only the long axis is cut.
    check(
        &arange(2400, DType::I32, &[2, 3, 400]),
        &[
            "array([[[   0,    1,    2, ...,  397,  398,  399],",
            "        [ 400,  401,  402, ...,  797,  798,  799],",
            "        [ 800,  801,  802, ..., 1197, 1198, 1199]],",
            "",
            "       [[1200, 1201, 1202, ..., 1597, 1598, 1599],",
            "        [1600, 1601, 1602, ..., 1997, 1998, 1999],",
            "        [2000, 2001, 2002, ..., 2397, 2398, 2399]]],",
            "      shape=[2, 3, 400], dtype=i32)",
        ],
    );
}

#[test]
fn views() {
    let a = arange(24, DType::F32, &[2, 3, 4]);
    check(
        &a.slice(&s![.., ..;-1, 1..;2]).unwrap(),
        &[
            "array([[[ 9., 11.],",
            "        [ 5.,  7.],",
            "        [ 1.,  3.]],",
            "",
            "       [[21., 23.],",
            "        [17., 19.],",
            "        [13., 15.]]], dtype=f32)",
        ],
    );
    check(
        &arange(6, DType::I64, &[2, 3]).permute(&[1, 0]).unwrap(),
        &[
            "array([[0, 3],",
            "       [1, 4],",
            "       [2, 5]], dtype=i64)",
        ],
    );
    let row = NDArray::from_vec(vec![1.5f32, -2.0, 3.25], &[3]).unwrap();
    check(
        &row.broadcast_to(&[2, 3]).unwrap(),
        &[
            "array([[ 1.5 , -2.  ,  3.25],",
            "       [ 1.5 , -2.  ,  3.25]], dtype=f32)",
        ],
    );
    // Summarized, transposed, reversed and offset.
    let big = arange(1_000_000, DType::I64, &[1000, 1000]);
    let v = big.transpose(0, 1).unwrap().slice(&s![..;-1, 2..]).unwrap();
    check(
        &v,
        &[
            "array([[  2999,   3999,   4999, ..., 997999, 998999, 999999],",
            "       [  2998,   3998,   4998, ..., 997998, 998998, 999998],",
            "       [  2997,   3997,   4997, ..., 997997, 998997, 999997],",
            "       ...,",
            "       [  2002,   3002,   4002, ..., 997002, 998002, 999002],",
            "       [  2001,   3001,   4001, ..., 997001, 998001, 999001],",
            "       [  2000,   3000,   4000, ..., 997000, 998000, 999000]],",
            "      shape=[1000, 998], dtype=i64)",
        ],
    );
}

#[test]
fn huge_broadcast_reads_only_the_corners() {
    // 10^12 elements: printing must not compact them.
    let a = NDArray::scalar(0.5f32)
        .broadcast_to(&[100_000, 100_000, 100])
        .unwrap();
    let s = a.to_string();
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 50);
    assert_eq!(lines[0], "array([[[0.5, 0.5, 0.5, ..., 0.5, 0.5, 0.5],");
    assert_eq!(lines[3], "        ...,");
    assert_eq!(lines[24], "       ...,");
    assert_eq!(lines[49], "      shape=[100000, 100000, 100], dtype=f32)");
}

#[test]
fn never_panics() {
    let shapes: [&[usize]; 9] = [
        &[],
        &[0],
        &[7],
        &[3, 0, 2],
        &[1100],
        &[2, 7, 1, 9],
        &[1, 1, 1, 1, 1, 1, 1, 1],
        &[2, 3, 2, 3, 2, 3, 2, 3],
        &[8, 1, 7, 1, 2, 1, 1, 9],
    ];
    for dtype in DType::ALL {
        for shape in shapes {
            let a = NDArray::randn(shape, 7, DType::F64)
                .unwrap()
                .astype(dtype)
                .unwrap();
            let s = a.to_string();
            assert!(s.starts_with("array(") && s.ends_with(')'), "{s}");
            if a.ndim() > 0 {
                let flipped = a.flip(&[0]).unwrap();
                assert!(flipped.to_string().ends_with(')'));
            }
        }
        let edge = NDArray::from_vec(
            vec![
                f64::MAX,
                f64::MIN_POSITIVE,
                5e-324,
                -0.0,
                f64::NAN,
                f64::NEG_INFINITY,
            ],
            &[6],
        )
        .unwrap()
        .astype(dtype)
        .unwrap();
        assert!(edge.to_string().ends_with(')'));
    }
}
