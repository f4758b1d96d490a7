//! Lesson 2: broadcasting and dtypes. Binary ops broadcast as NumPy does (align shapes from
//! the right; a dim of 1 stretches), and mixed dtypes promote by NumPy's rules. Errors say which
//! dims disagree.
//!
//! `cargo run --example broadcasting`

use quill::{DType, NDArray, Scalar};

fn main() -> quill::Result<()> {
    let col = NDArray::arange(0.0, 3.0, 1.0, DType::F32)?.reshape(&[3, 1])?; // (3, 1)
    let row = NDArray::arange(0.0, 4.0, 1.0, DType::F32)?; // (4,)
                                                           // (3, 1) + (4,) -> (3, 4): an outer sum, no copy of either operand.
    let outer = col.add(&row)?;
    println!("{outer}");
    assert_eq!(outer.shape(), &[3, 4]);

    // Shapes that do not broadcast are an error naming the op and the dims.
    let bad = NDArray::zeros(&[3, 2], DType::F32)?;
    let e = outer.add(&bad).unwrap_err();
    println!("error: {e}");

    // Promotion: int32 + float32 -> float64 (NumPy 2: the smallest float holding every int32),
    // uint8 + int8 -> int16, a Python-style scalar keeps the array's dtype.
    let i = NDArray::full(&[2], Scalar::I(7), DType::I32)?;
    let f = NDArray::full(&[2], 0.5, DType::F32)?;
    assert_eq!(i.add(&f)?.dtype(), DType::F64);
    let u = NDArray::full(&[2], Scalar::I(200), DType::U8)?;
    let s8 = NDArray::full(&[2], Scalar::I(-1), DType::I8)?;
    assert_eq!(u.add(&s8)?.dtype(), DType::I16);
    assert_eq!(f.mul_scalar(3.0)?.dtype(), DType::F32);

    // Casts follow NumPy's rules too; integer arithmetic wraps in its own width.
    let wrapped = u.add(&u)?; // 200 + 200 in uint8
    assert_eq!(wrapped.to_vec::<u8>()?, vec![144, 144]);
    let halves = f.astype(DType::F16)?;
    println!("{} -> {}: {halves}", f.dtype(), halves.dtype());
    Ok(())
}
