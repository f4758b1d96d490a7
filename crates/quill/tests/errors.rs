//! Error reporting through the public API: every fallible call that fails returns the right
//! `Error` variant, and its message names the op and the shapes (or axes / values) involved, so
//! that it reads alone. Also: `view()` of a layout that no strided view can express (a permuted
//! array flattened with -1) errs with ReshapeNeedsCopy while `reshape()` of the same request
//! copies and gets the elements right; and an error leaves the array usable and unchanged.

use quill::{s, DType, Error, NDArray, SliceArg};
use quill_test_support::*;

/// Asserts that `msg` contains each of `parts`.
#[track_caller]
fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "message {msg:?} does not mention {p:?}");
    }
}

#[test]
fn every_error_names_the_op_and_the_shapes() {
    let a = iota_i64(&[2, 5]);
    let b = iota_i64(&[2, 3, 4]);
    let big = format!("[{}, 2]", usize::MAX);
    let cases: Vec<(Error, Vec<&str>)> = vec![
        (
            a.assign(&iota_i64(&[3, 4])).unwrap_err(),
            vec!["assign", "[2, 5]", "[3, 4]"],
        ),
        (
            a.reshape(&[3, 4]).unwrap_err(),
            vec!["[2, 5]", "10", "[3, 4]", "12"],
        ),
        (a.reshape(&[-1, 3]).unwrap_err(), vec!["[2, 5]", "[-1, 3]"]),
        (a.reshape(&[-1, -1]).unwrap_err(), vec!["-1"]),
        (
            b.permute(&[2, 0, 1]).unwrap().view(&[-1]).unwrap_err(),
            vec!["view", "[4, 2, 3]", "[24]", "[1, 12, 4]"],
        ),
        (
            a.broadcast_to(&[3, 5]).unwrap_err(),
            vec!["broadcast_to", "[2, 5]", "[3, 5]"],
        ),
        (
            a.broadcast_to(&[5]).unwrap_err(),
            vec!["broadcast_to", "[2, 5]", "[5]"],
        ),
        (
            b.permute(&[0, 1]).unwrap_err(),
            vec!["permute", "[0, 1]", "[2, 3, 4]"],
        ),
        (b.permute(&[0, 1, 1]).unwrap_err(), vec!["permute", "1"]),
        (b.permute(&[0, 1, 3]).unwrap_err(), vec!["permute", "3"]),
        (b.transpose(0, 3).unwrap_err(), vec!["transpose", "3", "3"]),
        (b.flip(&[-4]).unwrap_err(), vec!["flip", "-4"]),
        (b.unsqueeze(5).unwrap_err(), vec!["unsqueeze", "5"]),
        (b.squeeze(&[1]).unwrap_err(), vec!["squeeze", "[2, 3, 4]"]),
        (
            b.slice(&s![.., 3]).unwrap_err(),
            vec!["slice", "3", "axis 1", "size 3"],
        ),
        (
            b.slice(&s![0, 0, 0, 0]).unwrap_err(),
            vec!["slice", "[2, 3, 4]"],
        ),
        (
            b.slice(&[SliceArg::Ellipsis, SliceArg::Ellipsis])
                .unwrap_err(),
            vec!["slice", "ellipsis"],
        ),
        (
            b.as_strided(&[3, 3], &[4, 1], 20).unwrap_err(),
            vec!["as_strided", "[3, 3]", "[4, 1]", "20", "24"],
        ),
        (
            b.as_strided(&[3, 3], &[4], 0).unwrap_err(),
            vec!["as_strided", "[3, 3]", "[4]"],
        ),
        (
            a.broadcast_to(&[3, 2, 5])
                .unwrap()
                .assign_scalar(1)
                .unwrap_err(),
            vec!["assign_scalar", "[3, 2, 5]", "[0, 5, 1]"],
        ),
        (a.to_vec::<f64>().unwrap_err(), vec!["to_vec", "i64", "f64"]),
        (a.item::<i64>().unwrap_err(), vec!["item", "[2, 5]"]),
        (
            NDArray::from_vec(vec![1u8; 5], &[2, 3]).unwrap_err(),
            vec!["from_vec", "[2, 3]", "6", "5"],
        ),
        (
            NDArray::zeros(&[usize::MAX, 2], DType::F32).unwrap_err(),
            vec!["zeros", big.as_str()],
        ),
        (
            NDArray::rand(&[2], 0, DType::I32).unwrap_err(),
            vec!["rand", "i32"],
        ),
        (
            NDArray::arange(0.0, 1.0, 0.0, DType::F32).unwrap_err(),
            vec!["arange", "step 0"],
        ),
    ];
    for (e, parts) in &cases {
        let msg = e.to_string();
        // Every message starts with its op.
        let op = msg.split(':').next().unwrap();
        assert!(
            !op.is_empty() && !op.contains(' '),
            "no op prefix in {msg:?}"
        );
        assert_mentions(&msg, parts);
    }
    // The arrays involved are unchanged and still usable.
    assert_eq!(a.to_vec::<i64>().unwrap(), (0..10).collect::<Vec<_>>());
    assert_eq!(b.to_vec::<i64>().unwrap(), (0..24).collect::<Vec<_>>());
}

#[test]
fn error_variants_carry_the_shapes() {
    let a = iota_i64(&[2, 5]);
    match a.assign(&iota_i64(&[3, 4])).unwrap_err() {
        Error::ShapeMismatch { op, lhs, rhs, .. } => {
            assert_eq!(op, "assign");
            assert_eq!(lhs.0, vec![2, 5]);
            assert_eq!(rhs.0, vec![3, 4]);
        }
        e => panic!("wrong variant: {e}"),
    }
    let row = a.slice(&s![1..2]).unwrap();
    match row
        .broadcast_to(&[4, 5])
        .unwrap()
        .assign_scalar(0)
        .unwrap_err()
    {
        Error::ReadOnlyView {
            shape,
            strides,
            dim,
            ..
        } => {
            assert_eq!(shape.0, vec![4, 5]);
            assert_eq!(strides, vec![0, 1]);
            assert_eq!(dim, 0);
        }
        e => panic!("wrong variant: {e}"),
    }
}

#[test]
fn view_of_a_non_viewable_layout_errs_and_reshape_copies() {
    let b = iota_i64(&[2, 3, 4]);
    let p = b.permute(&[2, 0, 1]).unwrap(); // [4, 2, 3]
    let e = p.view(&[-1]).unwrap_err();
    match &e {
        Error::ReshapeNeedsCopy {
            from, strides, to, ..
        } => {
            assert_eq!(from.0, vec![4, 2, 3]);
            assert_eq!(strides, &vec![1, 12, 4]);
            assert_eq!(to.0, vec![24]);
        }
        e => panic!("wrong variant: {e}"),
    }
    assert!(
        e.to_string().contains("reshape"),
        "the message points at reshape: {e}"
    );
    let r = p.reshape(&[-1]).unwrap();
    assert!(!r.shares_storage_with(&b));
    assert_eq!(r.shape(), &[24]);
    let want: Vec<i64> = offsets_of(&p).iter().map(|&o| o as i64).collect();
    assert_eq!(r.to_vec::<i64>().unwrap(), want);
    // A view that does exist is a view, for both calls.
    // Views that do exist are views: [4, 2, 3] strides [1, 12, 4] merges its last two dims.
    let v = p.view(&[4, 6]).unwrap();
    assert!(v.shares_storage_with(&b));
    assert_eq!(v.to_vec::<i64>().unwrap(), want[..].to_vec());
    let ok = b.permute(&[0, 2, 1]).unwrap().slice(&s![.., 1..3]).unwrap(); // [2, 2, 3]
    let err = ok.view(&[4, 3]).unwrap_err();
    assert!(matches!(err, Error::ReshapeNeedsCopy { .. }), "{err}");
    let copied = ok.reshape(&[4, 3]).unwrap();
    assert!(!copied.shares_storage_with(&b));
    let want_ok: Vec<i64> = offsets_of(&ok).iter().map(|&o| o as i64).collect();
    assert_eq!(copied.to_vec::<i64>().unwrap(), want_ok);
    let sliced = b.slice(&s![.., .., 1..3]).unwrap(); // [2, 3, 2] strides [12, 4, 1]
    let fine = sliced.view(&[6, 2]).unwrap();
    assert!(fine.shares_storage_with(&b));
    let want: Vec<i64> = offsets_of(&sliced).iter().map(|&o| o as i64).collect();
    assert_eq!(fine.to_vec::<i64>().unwrap(), want);
    // Writing through the copy does not touch the original.
    r.assign_scalar(-1).unwrap();
    assert_eq!(b.to_vec::<i64>().unwrap(), (0..24).collect::<Vec<_>>());
}
