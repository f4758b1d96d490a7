//! Every buffer quill makes passes one checked path (`quill_cpu::pool::take`): a request this
//! machine cannot hold (a broadcast view standing for 10^12 elements, say) is
//! `Error::OutOfMemory` naming the op, from every op that copies, casts, gathers or reduces
//! into a new buffer, never an abort.

use quill::{DType, Error, NDArray, Tensor};

/// A 10^12-element f32 view over one element: 4 TB if made real.
fn huge() -> NDArray {
    NDArray::ones(&[1], DType::F32)
        .unwrap()
        .broadcast_to(&[1_000_000, 1_000_000])
        .unwrap()
}

fn assert_oom(what: &str, r: quill::Result<NDArray>) {
    match r {
        Err(Error::OutOfMemory {
            numel, bytes, op, ..
        }) => {
            assert!(numel >= 1_000_000_000_000, "{what}: numel {numel}");
            assert!(bytes >= numel, "{what}: {bytes} bytes for {numel}");
            assert!(!op.is_empty());
        }
        Err(e) => panic!("{what}: expected OutOfMemory, got {e}"),
        Ok(a) => panic!("{what}: made an array of shape {:?}", a.shape()),
    }
}

#[test]
fn huge_copies_casts_and_kernels_are_errors() {
    let h = huge();
    assert_oom("compact", h.compact());
    assert_oom("deep_copy", h.deep_copy());
    assert_oom("astype", h.astype(DType::F64));
    // Rows of 1000 distinct values repeated 10^9 times: flattening it has no view.
    let rows = NDArray::arange(0.0, 1000.0, 1.0, DType::F32)
        .unwrap()
        .broadcast_to(&[1_000_000_000, 1000])
        .unwrap();
    assert_oom("reshape (copies)", rows.reshape(&[-1]));
    assert_oom("add_scalar", h.add_scalar(1.0));
    assert_oom("exp", h.unary(quill::UnaryOp::Exp));
    assert_oom("add", h.add(&h));
    assert_oom("sum over nothing", h.sum(Some(&[]), false));
    let idx = NDArray::zeros(&[1], DType::I64)
        .unwrap()
        .broadcast_to(&[1_000_000_000_000])
        .unwrap();
    let small = NDArray::ones(&[3], DType::F32).unwrap();
    assert_oom("index_select", small.index_select(0, &idx));
    let t = Tensor::from_array(h.clone(), false).unwrap();
    match t.exp() {
        Err(Error::OutOfMemory { .. }) => {}
        r => panic!(
            "Tensor::exp: expected OutOfMemory, got {:?}",
            r.map(|t| t.shape().to_vec())
        ),
    }
    // The message says what was asked and why it cannot be had.
    let msg = h.compact().unwrap_err().to_string();
    assert!(
        msg.contains("out of memory") && msg.contains("1000000000000 elements of f32"),
        "{msg}"
    );
}

#[test]
fn a_request_that_fits_still_works_after_a_refusal() {
    let _ = huge().compact();
    let a = NDArray::arange(0.0, 6.0, 1.0, DType::F32).unwrap();
    let b = a
        .reshape(&[2, 3])
        .unwrap()
        .permute(&[1, 0])
        .unwrap()
        .compact()
        .unwrap();
    assert_eq!(
        b.to_vec::<f32>().unwrap(),
        vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    );
}
