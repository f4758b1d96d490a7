//! The main job until training lands: a short tour of views, assignment and copies that prints
//! what each step did to shape, strides and data.

use quill::{s, DType, NDArray, NewAxis, Result};

pub fn run() -> Result<()> {
    let a = NDArray::arange(0.0, 24.0, 1.0, DType::F32)?.reshape(&[2, 3, 4])?;
    println!(
        "a = arange(24).reshape(2, 3, 4): shape {:?} strides {:?}",
        a.shape(),
        a.strides()
    );
    let v = a.slice(&s![.., ..;-1, 1..;2])?;
    println!(
        "v = a[:, ::-1, 1::2] (a view): shape {:?} strides {:?} offset {}",
        v.shape(),
        v.strides(),
        v.offset()
    );
    println!("{v:?}");
    let t = a.permute(&[2, 0, 1])?;
    println!(
        "t = a.permute(2, 0, 1): strides {:?}, contiguous: {}",
        t.strides(),
        t.is_contiguous()
    );
    let c = t.compact()?;
    println!(
        "t.compact(): strides {:?}, shares a's buffer: {}",
        c.strides(),
        c.shares_storage_with(&a)
    );
    let b = NDArray::arange(0.0, 4.0, 1.0, DType::F32)?.slice(&s![NewAxis, ..])?;
    println!(
        "b = arange(4)[None, :], broadcast to (3, 4): strides {:?}",
        b.broadcast_to(&[3, 4])?.strides()
    );
    a.set(&s![0], &b)?;
    v.assign_scalar(-1.0)?;
    println!("after a[0] = b and v[...] = -1 (through the view):\n{a}");
    match a.broadcast_to(&[2, 5, 4]) {
        Err(e) => println!("a.broadcast_to([2, 5, 4]) -> error: {e}"),
        Ok(_) => unreachable!(),
    }
    Ok(())
}
