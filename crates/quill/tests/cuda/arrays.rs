//! Moving, copying and writing arrays on each device: round trips of every layout and dtype,
//! `compact` of views taken on the device (every layout, and random permutations up to rank 8),
//! `astype` between all 64 dtype pairs, assignment through reversed / stepped views (from
//! another device's array, from a scalar, with an operand aliasing the destination), gathers
//! that run through the host, and `concat`. References: naive index maps, `Element::cast`, and a
//! plain `Vec` mirror of the written buffer.

use crate::cases::{draw, layouts, Draw, Input};
use crate::check::round_to;
use crate::randn3;
use quill::{s, DType, Device, Element, NDArray, Result};
use quill_test_support::{
    assert_close, assert_close_values, device_test, f64s, with_dtype, Prng, Table,
};

/// The C-order values of the view of `vals` (C order, `shape`) permuted by `axes`.
fn permuted(vals: &[f64], shape: &[usize], axes: &[usize]) -> Vec<f64> {
    let ids = Table::contiguous(shape).permute(axes).vals;
    ids.iter().map(|&i| vals[i]).collect()
}

device_test!(round_trips_and_compact_every_dtype_and_layout -> Result<()>);
fn round_trips_and_compact_every_dtype_and_layout(dev: Device) -> Result<()> {
    let mut rng = Prng::new(11);
    for dtype in DType::ALL {
        for case in layouts() {
            let x = Input::new(
                &case,
                dtype,
                &draw(&mut rng, dtype, case.len, Draw::General),
                dev,
            );
            let (vals, shape) = (x.values(), x.cpu.shape().to_vec());
            let ctx = format!("{dtype} {} on {dev}", case.name);
            // A view moved there and back (compacted on its own device on the way).
            let back = x.cpu.to_device(dev)?.to_device(Device::Cpu)?;
            assert_eq!(back.shape(), &shape[..], "{ctx}");
            assert_close_values(&f64s(&back), &vals, 0.0, &format!("{ctx}: round trip"));
            // The view reversed in its dims on the device, then compacted there.
            let rev: Vec<usize> = (0..shape.len()).rev().collect();
            let axes: Vec<isize> = rev.iter().map(|&a| a as isize).collect();
            let c = x.dev.permute(&axes)?.compact().unwrap();
            assert_eq!(c.device(), dev, "{ctx}");
            assert!(c.is_contiguous(), "{ctx}");
            assert_close_values(
                &f64s(&c),
                &permuted(&vals, &shape, &rev),
                0.0,
                &format!("{ctx}: compact"),
            );
        }
    }
    Ok(())
}

device_test!(compact_random_permutations_up_to_rank_8 -> Result<()>);
fn compact_random_permutations_up_to_rank_8(dev: Device) -> Result<()> {
    let mut rng = Prng::new(19);
    for _ in 0..50 {
        let rank = rng.below(9);
        let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(4)).collect();
        let a = randn3(&shape, rng.next_u64(), DType::F32);
        let perm = rng.permutation(rank);
        let axes: Vec<isize> = perm.iter().map(|&a| a as isize).collect();
        let g = a.to_device(dev)?.permute(&axes)?.compact().unwrap();
        assert_eq!(g.device(), dev);
        let want = permuted(&f64s(&a), &shape, &perm);
        assert_close_values(
            &f64s(&g),
            &want,
            0.0,
            &format!("rank {rank} perm {perm:?} on {dev}"),
        );
    }
    Ok(())
}

/// True when `v` truncated fits `to` (an integer dtype; u8 casts through i32, as on x86).
fn in_range(v: f64, to: DType) -> bool {
    let t = v.trunc();
    match to {
        DType::I64 => t >= -(2f64.powi(63)) && t < 2f64.powi(63),
        _ => t >= -(2f64.powi(31)) && t < 2f64.powi(31),
    }
}

/// `v` (exact in `from`) cast to `to` by `Element::cast` from the source type itself.
fn cast(v: f64, from: DType, to: DType) -> f64 {
    with_dtype!(from, S => with_dtype!(to, D => S::from_f64(v).cast::<D>().to_f64()))
}

device_test!(astype_between_every_dtype_pair -> Result<()>);
fn astype_between_every_dtype_pair(dev: Device) -> Result<()> {
    let mut rng = Prng::new(12);
    let cases = layouts();
    for from in DType::ALL {
        for case in [&cases[2], &cases[4]] {
            let x = Input::new(
                case,
                from,
                &draw(&mut rng, from, case.len, Draw::General),
                dev,
            );
            let vals = x.values();
            for to in DType::ALL {
                let got = x.dev.astype(to).unwrap();
                assert_eq!((got.device(), got.dtype()), (dev, to));
                // NaN, infinities and out-of-range floats have no defined integer value (NumPy
                // leaves them to the C cast): the CPU promises x86's answer and is held to it;
                // a GPU saturates instead, so there only the defined casts are compared.
                let defined = |v: f64| dev == Device::Cpu || !to.is_int() || in_range(v, to);
                let (got, want): (Vec<f64>, Vec<f64>) = f64s(&got)
                    .into_iter()
                    .zip(&vals)
                    .filter(|&(_, &v)| defined(v))
                    .map(|(g, &v)| (g, cast(v, from, to)))
                    .unzip();
                let ctx = format!("{from} -> {to} {} on {dev}", case.name);
                assert_close_values(&got, &want, 0.0, &ctx);
            }
        }
    }
    Ok(())
}

device_test!(assignment_through_views_and_host_fallbacks -> Result<()>);
/// Writes through views on the device, checked against a mirror of the buffer; then ops
/// without device kernels, which run on host copies and come back.
fn assignment_through_views_and_host_fallbacks(dev: Device) -> Result<()> {
    let cpu = randn3(&[6, 5], 14, DType::F32);
    let mut m: Vec<f64> = f64s(&cpu);
    let g = cpu.to_device(dev)?;
    // Rows 5, 3, 1 (reversed, stepped) from a CPU f64 array, cast to f32.
    let src = randn3(&[3, 5], 15, DType::F64);
    g.slice(&s![..;-2, ..])?.assign(&src)?;
    for (k, &v) in f64s(&src).iter().enumerate() {
        m[(5 - 2 * (k / 5)) * 5 + k % 5] = round_to(v, DType::F32);
    }
    assert_close_values(&f64s(&g), &m, 0.0, &format!("assign on {dev}"));
    g.slice(&s![.., 1..3])?.assign_scalar(7.5)?;
    for r in 0..6 {
        m[r * 5 + 1] = 7.5;
        m[r * 5 + 2] = 7.5;
    }
    assert_close_values(&f64s(&g), &m, 0.0, &format!("assign_scalar on {dev}"));
    // The operand (row 0) aliases the destination: read as if copied first (NumPy).
    g.add_assign(&g.slice(&s![0..1, ..])?)?;
    let row0: Vec<f64> = m[..5].to_vec();
    for (i, v) in m.iter_mut().enumerate() {
        *v = round_to(*v + row0[i % 5], DType::F32);
    }
    assert_close_values(&f64s(&g), &m, 0.0, &format!("add_assign aliasing on {dev}"));
    let idx = NDArray::from_vec(vec![2i64, 0, 4], &[3])?;
    let sel = g.index_select(1, &idx)?;
    assert_eq!(sel.device(), dev);
    let want: Vec<f64> = (0..6)
        .flat_map(|r| [2, 0, 4].map(|c| m[r * 5 + c]))
        .collect();
    assert_close_values(&f64s(&sel), &want, 0.0, &format!("index_select on {dev}"));
    let lse = g.logsumexp(Some(&[1]), false)?;
    let want: Vec<f64> = (0..6)
        .map(|r| {
            let row = &m[r * 5..r * 5 + 5];
            let mx = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            mx + row.iter().map(|x| (x - mx).exp()).sum::<f64>().ln()
        })
        .collect();
    assert_eq!(lse.device(), dev);
    assert_close_values(&f64s(&lse), &want, 1e-6, &format!("logsumexp on {dev}"));
    Ok(())
}

device_test!(concat_stays_on_the_device -> Result<()>);
fn concat_stays_on_the_device(dev: Device) -> Result<()> {
    let (a, b) = (
        randn3(&[2, 3], 20, DType::F32),
        randn3(&[4, 3], 21, DType::F32),
    );
    let (ga, gb) = (a.to_device(dev)?, b.to_device(dev)?);
    let c = NDArray::concat(&[&ga, &gb], 0)?;
    assert_eq!((c.device(), c.shape()), (dev, &[6usize, 3][..]));
    let want: Vec<f64> = f64s(&a).into_iter().chain(f64s(&b)).collect();
    assert_close_values(&f64s(&c), &want, 0.0, &format!("concat on {dev}"));
    // Along the last axis, from a reversed view.
    let r = gb.slice(&s![..2, ..;-1])?;
    let c = NDArray::concat(&[&ga, &r], 1)?;
    let (va, vb) = (f64s(&a), f64s(&b));
    let mut want = Vec::new();
    for i in 0..2 {
        want.extend((0..3).map(|j| va[i * 3 + j]));
        want.extend((0..3).map(|j| vb[i * 3 + 2 - j]));
    }
    assert_close(
        &c,
        &NDArray::from_vec(want, &[2, 6])?
            .astype(DType::F32)
            .unwrap(),
        0.0,
        &format!("concat axis 1 on {dev}"),
    );
    Ok(())
}
