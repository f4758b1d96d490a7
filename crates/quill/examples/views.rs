//! Lesson 1: views and `compact`. An NDArray is a buffer plus a layout (shape, strides,
//! offset); slicing, permuting, broadcasting and (when it can) reshaping only make a new layout
//! over the same buffer. `compact` makes a contiguous copy; writes through a view land in the
//! buffer the view shares.
//!
//! `cargo run --example views`

use quill::{s, DType, NDArray, NewAxis};

fn main() -> quill::Result<()> {
    // 0..12 as a 3 x 4 matrix: strides [4, 1] (in elements).
    let a = NDArray::arange(0.0, 12.0, 1.0, DType::F32)?.reshape(&[3, 4])?;
    println!("a {:?} strides {:?}\n{a}", a.shape(), a.strides());

    // Every other column, rows reversed: a view with a negative stride and an offset.
    let v = a.slice(&s![..;-1, ..;2])?;
    println!(
        "a[::-1, ::2] strides {:?} offset {}\n{v}",
        v.strides(),
        v.offset()
    );
    assert!(v.shares_storage_with(&a));

    // The transpose is a view too: no element moved, the strides swapped.
    let t = a.permute(&[1, 0])?;
    assert_eq!(t.strides(), &[1, 4]);
    assert!(!t.is_contiguous());

    // compact() copies a strided view into a fresh C-order buffer.
    let c = t.compact()?;
    assert!(c.is_contiguous() && !c.shares_storage_with(&a));
    assert_eq!(c.to_vec::<f32>()?, t.to_vec::<f32>()?);

    // Broadcasting is a view with stride 0: one row read three times.
    let row = a.slice(&s![0, NewAxis, ..])?; // (1, 4)
    let b = row.broadcast_to(&[3, 4])?;
    assert_eq!(b.strides()[0], 0);

    // Writes through a view change the array it views: v holds a's even columns, reversed.
    v.assign_scalar(-1.0)?;
    println!("after v[...] = -1:\n{a}");
    assert_eq!(a.to_vec::<f32>()?[0], -1.0);

    // A broadcast view is read-only (writing one element would write a whole column).
    assert!(b.assign_scalar(0.0).is_err());
    Ok(())
}
