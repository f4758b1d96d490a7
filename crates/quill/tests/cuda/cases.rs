//! The inputs every op case runs on. A case is a base buffer (a contiguous 1-D array of given
//! values) and a view recipe; the recipe is applied on each device separately, so a device's
//! kernels see the same non-contiguous layout the CPU's do (moving a view would compact it).
//! Layouts: contiguous, contiguous at an offset, permuted, transposed, negative steps, stepped,
//! broadcast (stride 0), offset, size 0, size-1 dims, rank 0, rank 6, and a random strided one
//! (gaps, reversed dims, offset). Values are drawn per purpose (see `Draw`).

use quill::{s, DType, Device, NDArray, Result};
use quill_test_support::{f64s, random_layout, Prng};

type Recipe = Box<dyn Fn(&NDArray) -> Result<NDArray>>;

pub struct Case {
    pub name: &'static str,
    /// Elements in the 1-D base buffer.
    pub len: usize,
    view: Recipe,
}

impl Case {
    /// A case whose base buffer is reshaped to `base` before `view` applies.
    fn new(
        name: &'static str,
        base: &[usize],
        view: impl Fn(&NDArray) -> Result<NDArray> + 'static,
    ) -> Case {
        let shape: Vec<isize> = base.iter().map(|&d| d as isize).collect();
        Case {
            name,
            len: base.iter().product(),
            view: Box::new(move |b| view(&b.reshape(&shape)?)),
        }
    }

    /// A seeded random non-overlapping strided layout of `shape` (the same on every device).
    fn random(name: &'static str, shape: &'static [usize], seed: u64) -> Case {
        let (strides, offset, len) = random_layout(&mut Prng::new(seed), shape);
        Case {
            name,
            len,
            view: Box::new(move |b| b.as_strided(shape, &strides, offset)),
        }
    }
}

/// One input of `dtype`: the view on the CPU and the same view taken on `dev`.
pub struct Input {
    pub cpu: NDArray,
    pub dev: NDArray,
}

impl Input {
    /// `vals` (one per base element, cast to `dtype` as `astype` casts) viewed through `case`.
    pub fn new(case: &Case, dtype: DType, vals: &[f64], dev: Device) -> Input {
        assert_eq!(vals.len(), case.len, "{}", case.name);
        let base = NDArray::from_vec(vals.to_vec(), &[case.len])
            .unwrap()
            .astype(dtype)
            .unwrap();
        let cpu = (case.view)(&base).unwrap();
        let dev_arr = (case.view)(&base.to_device(dev).unwrap()).unwrap();
        assert_eq!(dev_arr.device(), dev);
        assert_eq!(
            (dev_arr.shape(), dev_arr.strides(), dev_arr.offset()),
            (cpu.shape(), cpu.strides(), cpu.offset()),
            "{}: the view must have one layout on every device",
            case.name
        );
        Input { cpu, dev: dev_arr }
    }

    /// The input's elements in C order, as f64 (read on the CPU).
    pub fn values(&self) -> Vec<f64> {
        f64s(&self.cpu)
    }
}

/// Every layout, each of a shape of its own (unary ops and reductions run on each).
pub fn layouts() -> Vec<Case> {
    vec![
        Case::new("contiguous", &[3, 4, 5], |b| Ok(b.clone())),
        Case::new("contiguous at an offset", &[5, 4, 5], |b| b.slice(&s![2..])),
        Case::new("permuted", &[5, 3, 4], |b| b.permute(&[1, 2, 0])),
        Case::new("transposed", &[3, 5, 4], |b| b.transpose(1, 2)),
        Case::new("negative steps", &[3, 4, 5], |b| {
            b.slice(&s![..;-1, .., ..;-1])
        }),
        Case::new("stepped", &[3, 8, 10], |b| b.slice(&s![.., ..;2, 1..;2])),
        Case::new("broadcast", &[3, 1, 5], |b| b.broadcast_to(&[3, 4, 5])),
        Case::new("offset", &[4, 6, 7], |b| b.slice(&s![1.., 2.., 2..])),
        Case::new("size 0", &[3, 4, 5], |b| b.slice(&s![.., 2..2, ..])),
        Case::new("size-1 dims", &[1, 4, 1, 5], |b| {
            b.slice(&s![.., ..;-1, .., 1..])
        }),
        Case::new("rank 0", &[2, 3], |b| b.slice(&s![1, 2])),
        Case::new("rank 6", &[2, 1, 3, 2, 1, 2], |b| {
            b.permute(&[5, 3, 0, 2, 1, 4])?.flip(&[0, 3])
        }),
        Case::random("random strided", &[2, 3, 4, 2], 7),
    ]
}

/// The rhs of a binary case: another layout, or the lhs array itself (one buffer, both sides).
pub enum Rhs {
    Other(Case),
    Itself,
}

/// Operand pairs for binary ops: equal shapes in different layouts, and pairs that broadcast
/// against each other (a row, a column, a rank-0 view, size-1 dims on both sides).
pub fn pairs() -> Vec<(Case, Rhs)> {
    use Rhs::{Itself, Other};
    let mut l = layouts().into_iter();
    let mut next = || l.next().unwrap();
    let (contiguous, at_offset, permuted, transposed) = (next(), next(), next(), next());
    let (negative, stepped, broadcast, offset) = (next(), next(), next(), next());
    let (size0, size1, rank0, rank6, random) = (next(), next(), next(), next(), next());
    vec![
        (contiguous, Other(permuted)),
        (negative, Other(stepped)),
        (broadcast, Other(offset)),
        (transposed, Other(Case::new("row", &[5], |b| Ok(b.clone())))),
        (
            Case::new("column", &[3, 2, 2], |b| b.slice(&s![.., ..1, 1..2])),
            Other(at_offset),
        ),
        (
            size0,
            Other(Case::new("row [1, 5]", &[1, 5], |b| Ok(b.clone()))),
        ),
        (
            size1,
            Other(Case::new("reversed [4, 3, 1]", &[4, 3, 1], |b| {
                b.flip(&[0, 1])
            })),
        ),
        (rank0, Other(random)),
        (
            rank6,
            Other(Case::new("rank 6 contiguous", &[2, 2, 2, 3, 1, 1], |b| {
                Ok(b.clone())
            })),
        ),
        (
            Case::random("random strided", &[2, 3, 4, 2], 8),
            Other(Case::random("random strided", &[2, 3, 4, 2], 9)),
        ),
        (
            Case::new("negative steps", &[3, 4, 5], |b| {
                b.slice(&s![..;-1, .., ..;-2])
            }),
            Itself,
        ),
    ]
}

/// What the values of an input are for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Draw {
    /// Floats in (-4, 4) with NaN, +-inf and +-0 mixed in; integers in +-1000; any u8.
    General,
    /// Small values (0..=3 for integers, multiples of 0.5 in [-1.5, 1.5]): powers stay exact.
    Small,
    /// Shift counts on both sides of the type widths, negative ones included.
    Shift,
    /// Values whose sums are exact in every dtype's accumulator (multiples of 0.25 up to 25,
    /// integers up to 1e5) with NaN and +-inf mixed into floats: reductions compare exactly.
    Exact,
    /// Zeros and +-0.5, +-1, +-2 (integers -2..=2): products of a few dozen stay exact and
    /// in range in every order.
    Pow2,
}

/// `n` values for an input of `dtype` (as f64; `astype` brings them to the dtype).
pub fn draw(rng: &mut Prng, dtype: DType, n: usize, how: Draw) -> Vec<f64> {
    let float = dtype.is_float();
    (0..n)
        .map(|_| match (dtype, how) {
            (DType::Bool, _) => rng.below(2) as f64,
            (_, Draw::Exact | Draw::Pow2) if float && rng.odds(1, 16) => {
                [f64::NAN, f64::INFINITY, f64::NEG_INFINITY][rng.below(3)]
            }
            (_, Draw::Exact) if float => rng.int(-100, 100) as f64 * 0.25,
            (DType::U8, Draw::Exact) => rng.below(256) as f64,
            // Unsigned values stay small and non-negative: the f64 reference holds them (and
            // their wrapped results) exactly as the array does.
            (d, Draw::Exact) if d.is_unsigned_int() => rng.below(100_000) as f64,
            (_, Draw::Exact) => rng.int(-100_000, 100_000) as f64,
            (_, Draw::Pow2) if float => {
                [0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 1.0, 2.0, -1.0][rng.below(10)]
            }
            (d, Draw::Pow2) if d.is_unsigned_int() => rng.int(0, 2) as f64,
            (_, Draw::Pow2) => rng.int(-2, 2) as f64,
            (d, Draw::Small) if d.is_unsigned_int() => rng.below(4) as f64,
            (_, Draw::Small) if float => rng.int(-3, 3) as f64 * 0.5,
            (_, Draw::Small) => rng.int(0, 3) as f64,
            // Wider unsigned counts stay non-negative: -2 as u64 is past f64's exact range.
            (d, Draw::Shift) if d.is_unsigned_int() && d != DType::U8 => rng.int(0, 70) as f64,
            (_, Draw::Shift) if !float => rng.int(-2, 40) as f64,
            (DType::U8, _) => rng.below(256) as f64,
            (d, _) if d.is_unsigned_int() => rng.below(1000) as f64,
            (_, _) if !float => rng.int(-1000, 1000) as f64,
            (_, _) => match rng.below(40) {
                0 => f64::NAN,
                1 => f64::INFINITY,
                2 => f64::NEG_INFINITY,
                3 => -0.0,
                4 => 0.0,
                _ => (rng.unit() - 0.5) * 8.0,
            },
        })
        .collect()
}
