//! Shared support for quill's integration tests: a tiny deterministic RNG; naive strided offsets
//! (an odometer over shape / strides / offset, written independently of quill-core's iterator);
//! a table oracle (an array as the C-order list of element ids, with every view op implemented
//! naively on the list, including Python's slice rules); a random view-chain builder that applies
//! the same op to an `NDArray` and to its table; a builder of arrays with a random non-contiguous
//! layout for given C-order values; exact element comparison (NaN-aware, sign of zero); and a
//! dtype dispatch macro.
//!
//! The only library calls made here to build inputs are `NDArray::from_vec`, `as_strided` and the
//! view ops under test (whose result layouts the oracle recomputes on its own).

#![allow(dead_code)]

use quill::{CpuElement, DType, Element, NDArray, Scalar, SliceArg};

/// Calls `$body` with `$T` bound to the Rust element type of `$dtype`.
#[macro_export]
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            quill::DType::F32 => {
                type $T = f32;
                $body
            }
            quill::DType::F64 => {
                type $T = f64;
                $body
            }
            quill::DType::F16 => {
                type $T = quill::f16;
                $body
            }
            quill::DType::BF16 => {
                type $T = quill::bf16;
                $body
            }
            quill::DType::I32 => {
                type $T = i32;
                $body
            }
            quill::DType::I64 => {
                type $T = i64;
                $body
            }
            quill::DType::U8 => {
                type $T = u8;
                $body
            }
            quill::DType::Bool => {
                type $T = bool;
                $body
            }
        }
    };
}

pub const ALL_DTYPES: [DType; 8] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::Bool,
];

// ---------------------------------------------------------------------------------------------
// RNG

/// SplitMix64: deterministic, tiny, good enough for test data.
#[derive(Clone, Debug)]
pub struct Prng(u64);

impl Prng {
    pub fn new(seed: u64) -> Prng {
        Prng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        (self.next_u64() % n as u64) as usize
    }
    /// Uniform in `lo..=hi`.
    pub fn int(&mut self, lo: isize, hi: isize) -> isize {
        assert!(lo <= hi);
        lo + (self.next_u64() % ((hi - lo) as u64 + 1)) as isize
    }
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        self.shuffle(&mut p);
        p
    }
}

// ---------------------------------------------------------------------------------------------
// Index arithmetic

pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// The C-order multi-index of element `k`.
pub fn unravel(shape: &[usize], mut k: usize) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = k % shape[d];
        k /= shape[d];
    }
    idx
}

/// The C-order position of a multi-index.
pub fn ravel(shape: &[usize], idx: &[usize]) -> usize {
    let mut k = 0;
    for d in 0..shape.len() {
        assert!(idx[d] < shape[d], "index {idx:?} outside shape {shape:?}");
        k = k * shape[d] + idx[d];
    }
    k
}

/// The flat offset of every element of a raw strided layout, in C order (an odometer in i128,
/// so that no intermediate can overflow). Panics on a negative offset.
pub fn naive_offsets(shape: &[usize], strides: &[isize], offset: usize) -> Vec<usize> {
    assert_eq!(shape.len(), strides.len());
    let n = numel(shape);
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let mut idx = vec![0usize; shape.len()];
    loop {
        let off = offset as i128
            + idx
                .iter()
                .zip(strides)
                .map(|(&i, &s)| i as i128 * s as i128)
                .sum::<i128>();
        out.push(usize::try_from(off).expect("negative offset"));
        let mut d = shape.len();
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// The naive offsets of an array's own layout.
pub fn offsets_of(a: &NDArray) -> Vec<usize> {
    naive_offsets(a.shape(), a.strides(), a.offset())
}

/// True when the elements are one forward run of the buffer (the meaning of C-contiguous).
pub fn naive_is_contiguous(offs: &[usize]) -> bool {
    offs.windows(2).all(|w| w[1] == w[0] + 1)
}

/// True when no two elements share an offset.
pub fn all_distinct(offs: &[usize]) -> bool {
    let mut v = offs.to_vec();
    v.sort_unstable();
    v.windows(2).all(|w| w[0] != w[1])
}

/// `buf[o]` for each offset.
pub fn gather<T: Copy>(buf: &[T], offs: &[usize]) -> Vec<T> {
    offs.iter().map(|&o| buf[o]).collect()
}

// ---------------------------------------------------------------------------------------------
// Element comparison

/// Exact equality: floats by value, with NaN equal to NaN and -0.0 different from 0.0.
pub fn same<T: Element>(a: T, b: T) -> bool {
    match (a.to_scalar(), b.to_scalar()) {
        (Scalar::F(x), Scalar::F(y)) => (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits(),
        (x, y) => x == y,
    }
}

#[track_caller]
pub fn assert_same<T: Element>(got: &[T], want: &[T], ctx: &str) {
    assert_eq!(got.len(), want.len(), "{ctx}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(same(g, w), "{ctx}: element {i}: got {g:?}, want {w:?}");
    }
}

/// A value of `T` that identifies `id` (exact for ids below 256 in every dtype but bool, and
/// below 2^24 in f32 / i32 / f64 / i64).
pub fn from_id<T: Element>(id: usize) -> T {
    T::from_scalar(Scalar::I(id as i64))
}

/// `n` pseudo-random values of `T` (bool: a random pattern).
pub fn random_values<T: Element>(rng: &mut Prng, n: usize) -> Vec<T> {
    (0..n)
        .map(|_| match T::DTYPE {
            DType::Bool => T::from_scalar(Scalar::B(rng.chance(0.5))),
            DType::U8 => T::from_scalar(Scalar::I(rng.below(256) as i64)),
            d if d.is_float() => T::from_scalar(Scalar::F(rng.int(-100, 100) as f64 * 0.25)),
            _ => T::from_scalar(Scalar::I(rng.int(-100_000, 100_000) as i64)),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Python slice rules

/// The positions `start:stop:step` selects on an axis of `n` (CPython's `PySlice_AdjustIndices`,
/// then the obvious loop).
pub fn py_slice(start: Option<isize>, stop: Option<isize>, step: isize, n: usize) -> Vec<usize> {
    assert!(step != 0);
    let n = n as i128;
    let (lower, upper) = if step < 0 { (-1, n - 1) } else { (0, n) };
    let adjust = |v: Option<isize>, default: i128| -> i128 {
        match v {
            None => default,
            Some(v) => {
                let mut v = v as i128;
                if v < 0 {
                    v += n;
                    if v < lower {
                        v = lower;
                    }
                } else if v > upper {
                    v = upper;
                }
                v
            }
        }
    };
    let start = adjust(start, if step < 0 { upper } else { lower });
    let stop = adjust(stop, if step < 0 { lower } else { upper });
    let mut out = Vec::new();
    let mut i = start;
    while (step > 0 && i < stop) || (step < 0 && i > stop) {
        out.push(i as usize);
        i += step as i128;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The table oracle

/// An array as its shape and the C-order list of its elements' ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub shape: Vec<usize>,
    pub vals: Vec<usize>,
}

impl Table {
    pub fn contiguous(shape: &[usize]) -> Table {
        Table {
            shape: shape.to_vec(),
            vals: (0..numel(shape)).collect(),
        }
    }

    pub fn at(&self, idx: &[usize]) -> usize {
        self.vals[ravel(&self.shape, idx)]
    }

    /// The table of `shape` whose element `i` is this table's element `src(i)`.
    fn remap(&self, shape: Vec<usize>, src: impl Fn(&[usize]) -> Vec<usize>) -> Table {
        let vals = (0..numel(&shape))
            .map(|k| self.at(&src(&unravel(&shape, k))))
            .collect();
        Table { shape, vals }
    }

    pub fn permute(&self, axes: &[usize]) -> Table {
        let shape = axes.iter().map(|&a| self.shape[a]).collect();
        self.remap(shape, |i| {
            let mut old = vec![0; axes.len()];
            for (k, &a) in axes.iter().enumerate() {
                old[a] = i[k];
            }
            old
        })
    }

    pub fn flip(&self, axes: &[usize]) -> Table {
        self.remap(self.shape.clone(), |i| {
            let mut old = i.to_vec();
            for &a in axes {
                old[a] = self.shape[a] - 1 - i[a];
            }
            old
        })
    }

    pub fn broadcast_to(&self, target: &[usize]) -> Table {
        let lead = target.len() - self.shape.len();
        self.remap(target.to_vec(), |t| {
            (0..self.shape.len())
                .map(|j| if self.shape[j] == 1 { 0 } else { t[lead + j] })
                .collect()
        })
    }

    pub fn reshape(&self, shape: &[usize]) -> Table {
        assert_eq!(numel(shape), self.vals.len());
        Table {
            shape: shape.to_vec(),
            vals: self.vals.clone(),
        }
    }

    /// NumPy basic indexing (the arguments must be valid for this shape).
    pub fn slice(&self, args: &[SliceArg]) -> Table {
        enum Out {
            Axis(usize, Vec<usize>),
            New,
        }
        let ndim = self.shape.len();
        let consumed = args
            .iter()
            .filter(|a| matches!(a, SliceArg::Index(_) | SliceArg::Range { .. }))
            .count();
        let mut fixed: Vec<Option<usize>> = vec![None; ndim];
        let mut outs = Vec::new();
        let mut axis = 0;
        let mut saw_ellipsis = false;
        for a in args {
            match *a {
                SliceArg::NewAxis => outs.push(Out::New),
                SliceArg::Ellipsis => {
                    saw_ellipsis = true;
                    for _ in 0..ndim - consumed {
                        outs.push(Out::Axis(axis, (0..self.shape[axis]).collect()));
                        axis += 1;
                    }
                }
                SliceArg::Index(i) => {
                    let n = self.shape[axis] as isize;
                    let j = if i < 0 { i + n } else { i };
                    assert!((0..n).contains(&j));
                    fixed[axis] = Some(j as usize);
                    axis += 1;
                }
                SliceArg::Range { start, stop, step } => {
                    outs.push(Out::Axis(
                        axis,
                        py_slice(start, stop, step, self.shape[axis]),
                    ));
                    axis += 1;
                }
            }
        }
        let _ = saw_ellipsis;
        while axis < ndim {
            outs.push(Out::Axis(axis, (0..self.shape[axis]).collect()));
            axis += 1;
        }
        let shape: Vec<usize> = outs
            .iter()
            .map(|o| match o {
                Out::Axis(_, p) => p.len(),
                Out::New => 1,
            })
            .collect();
        self.remap(shape, |i| {
            let mut old: Vec<usize> = fixed.iter().map(|f| f.unwrap_or(0)).collect();
            for (k, o) in outs.iter().enumerate() {
                if let Out::Axis(a, p) = o {
                    old[*a] = p[i[k]];
                }
            }
            old
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Random shapes and layouts

/// A random shape of rank `0..=max_rank`, dims in `0..=max_dim` (0 and 1 are common).
pub fn random_shape(
    rng: &mut Prng,
    max_rank: usize,
    max_dim: usize,
    max_numel: usize,
) -> Vec<usize> {
    loop {
        let rank = rng.below(max_rank + 1);
        let shape: Vec<usize> = (0..rank)
            .map(|_| {
                if rng.chance(0.04) {
                    0
                } else if rng.chance(0.2) {
                    1
                } else {
                    rng.int(1, max_dim as isize) as usize
                }
            })
            .collect();
        if numel(&shape) <= max_numel {
            return shape;
        }
    }
}

/// Random strides that keep the elements of `shape` at distinct offsets (a random dim order,
/// random gaps and random signs), and the offset and buffer length that make them fit.
pub fn random_layout(rng: &mut Prng, shape: &[usize]) -> (Vec<isize>, usize, usize) {
    let rank = shape.len();
    let order = rng.permutation(rank); // order[0] is the innermost dim
    let mut strides = vec![0isize; rank];
    let mut acc: isize = 1;
    for &d in &order {
        let s = acc * rng.int(1, 2);
        strides[d] = s;
        acc = s * shape[d].max(1) as isize + rng.int(0, 1);
    }
    for s in strides.iter_mut() {
        if rng.chance(0.4) {
            *s = -*s;
        }
    }
    let pad = rng.below(3);
    let (mut neg, mut pos) = (0usize, 0usize);
    if numel(shape) > 0 {
        for (&d, &s) in shape.iter().zip(&strides) {
            let ext = (d - 1) * s.unsigned_abs();
            if s < 0 {
                neg += ext;
            } else {
                pos += ext;
            }
        }
    }
    let offset = pad + neg;
    let len = offset + pos + 1 + rng.below(3);
    (strides, offset, len)
}

/// An array of `shape` whose C-order elements are `values`, over a larger buffer filled with
/// `filler`, with a random non-overlapping layout (permuted, gapped, reversed, offset).
pub fn strided_from<T: CpuElement>(
    rng: &mut Prng,
    values: &[T],
    shape: &[usize],
    filler: T,
) -> NDArray {
    assert_eq!(values.len(), numel(shape));
    let (strides, offset, len) = random_layout(rng, shape);
    let mut buf = vec![filler; len];
    for (&o, &v) in naive_offsets(shape, &strides, offset).iter().zip(values) {
        buf[o] = v;
    }
    let a = NDArray::from_vec(buf, &[len])
        .unwrap()
        .as_strided(shape, &strides, offset)
        .unwrap();
    assert_eq!(a.shape(), shape);
    a
}

/// Prime factors of `n > 0`, in some order.
fn factors(mut n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut p = 2;
    while p * p <= n {
        while n.is_multiple_of(p) {
            out.push(p);
            n /= p;
        }
        p += 1;
    }
    if n > 1 {
        out.push(n);
    }
    out
}

/// A random shape with `n` elements and rank at most `max_rank`.
pub fn random_shape_with_numel(rng: &mut Prng, n: usize, max_rank: usize) -> Vec<usize> {
    if n == 0 {
        let rank = rng.int(1, max_rank.min(4) as isize) as usize;
        let mut s: Vec<usize> = (0..rank).map(|_| rng.below(4)).collect();
        let z = rng.below(rank);
        s[z] = 0;
        return s;
    }
    let mut f = factors(n);
    rng.shuffle(&mut f);
    let groups = if f.is_empty() {
        0
    } else {
        rng.int(1, f.len().min(max_rank) as isize) as usize
    };
    let mut shape = vec![1usize; groups];
    for (i, p) in f.into_iter().enumerate() {
        let g = if i < groups { i } else { rng.below(groups) };
        shape[g] *= p;
    }
    while shape.len() < max_rank && rng.chance(0.3) {
        let at = rng.below(shape.len() + 1);
        shape.insert(at, 1);
    }
    shape
}

// ---------------------------------------------------------------------------------------------
// Random view chains

/// An array together with the oracle's view of it: `table` holds, per element in C order, the id
/// it must read as; `buf` holds the id stored at each position of the array's current buffer
/// (the identity for the original buffer; the table at copy time after a copy).
pub struct Chain {
    pub arr: NDArray,
    pub table: Table,
    pub buf: Vec<usize>,
    pub log: Vec<String>,
    /// Only ops whose result is writable and lives in the original buffer.
    pub writable: bool,
    pub max_numel: usize,
}

pub const MAX_RANK: usize = 8;

impl Chain {
    /// A chain over `arr`, a contiguous array whose element `i` has id `i`.
    pub fn new(arr: NDArray, writable: bool) -> Chain {
        assert!(arr.is_contiguous() && arr.offset() == 0);
        let n = arr.buffer_len();
        Chain {
            table: Table::contiguous(arr.shape()),
            buf: (0..n).collect(),
            arr,
            log: Vec::new(),
            writable,
            max_numel: 4096,
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "chain [{}] -> shape {:?} strides {:?} offset {}",
            self.log.join(", "),
            self.arr.shape(),
            self.arr.strides(),
            self.arr.offset()
        )
    }

    /// The ids the array must read as, looked up through its own layout (checks the layout).
    pub fn ids_through_layout(&self) -> Vec<usize> {
        gather(&self.buf, &offsets_of(&self.arr))
    }

    fn ndim(&self) -> usize {
        self.arr.ndim()
    }

    fn set(&mut self, arr: NDArray, table: Table, what: String) {
        if !arr.shares_storage_with(&self.arr) {
            // A copy: its buffer holds the elements in C order from offset 0.
            assert!(
                !self.writable,
                "writable chain made a copy at {what}: {}",
                self.describe()
            );
            assert!(arr.is_contiguous());
            let mut buf = vec![usize::MAX; arr.buffer_len()];
            for (&o, &v) in offsets_of(&arr).iter().zip(&table.vals) {
                buf[o] = v;
            }
            self.buf = buf;
        }
        self.arr = arr;
        self.table = table;
        self.log.push(what);
        assert_eq!(
            self.arr.shape(),
            self.table.shape.as_slice(),
            "{}",
            self.describe()
        );
    }

    /// Applies one random view op to both the array and the table.
    pub fn step(&mut self, rng: &mut Prng) {
        let nd = self.ndim();
        match rng.below(11) {
            0 | 1 => {
                let p = rng.permutation(nd);
                let axes: Vec<isize> = p
                    .iter()
                    .map(|&a| {
                        if rng.chance(0.3) {
                            a as isize - nd as isize
                        } else {
                            a as isize
                        }
                    })
                    .collect();
                let a = self.arr.permute(&axes).unwrap();
                let t = self.table.permute(&p);
                self.set(a, t, format!("permute {axes:?}"));
            }
            2..=4 => {
                let args = self.random_slice_args(rng);
                let a = self.arr.slice(&args).unwrap();
                let t = self.table.slice(&args);
                self.set(a, t, format!("slice {args:?}"));
            }
            5 => {
                let axes: Vec<usize> = (0..nd).filter(|_| rng.chance(0.5)).collect();
                let a = self
                    .arr
                    .flip(&axes.iter().map(|&a| a as isize).collect::<Vec<_>>())
                    .unwrap();
                let t = self.table.flip(&axes);
                self.set(a, t, format!("flip {axes:?}"));
            }
            6 if !self.writable => {
                let stretch = |rng: &mut Prng| {
                    if rng.chance(0.05) {
                        0
                    } else {
                        rng.int(1, 3) as usize
                    }
                };
                // Broadcast: stretch some size-1 dims, maybe add leading dims.
                let mut target: Vec<usize> = self
                    .arr
                    .shape()
                    .iter()
                    .map(|&d| {
                        if d == 1 && rng.chance(0.6) {
                            stretch(rng)
                        } else {
                            d
                        }
                    })
                    .collect();
                while target.len() < MAX_RANK && rng.chance(0.3) {
                    target.insert(0, stretch(rng));
                }
                if numel(&target) > self.max_numel {
                    return;
                }
                let a = self.arr.broadcast_to(&target).unwrap();
                let t = self.table.broadcast_to(&target);
                self.set(a, t, format!("broadcast_to {target:?}"));
            }
            7 => {
                let n = self.table.vals.len();
                let shape = random_shape_with_numel(rng, n, MAX_RANK);
                let mut req: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
                if n > 0 && !req.is_empty() && rng.chance(0.3) {
                    let i = rng.below(req.len());
                    req[i] = -1;
                }
                let t = self.table.reshape(&shape);
                if self.writable {
                    match self.arr.view(&req) {
                        Ok(a) => self.set(a, t, format!("view {req:?}")),
                        Err(quill::Error::ReshapeNeedsCopy { .. }) => {
                            // The same request through reshape must copy, and get it right.
                            let a = self.arr.reshape(&req).unwrap();
                            assert!(!a.shares_storage_with(&self.arr));
                            assert_eq!(a.shape(), t.shape.as_slice());
                            let got = a.astype(DType::F64).to_vec::<f64>().unwrap();
                            let want = self.arr.astype(DType::F64).to_vec::<f64>().unwrap();
                            assert_same(&got, &want, &format!("reshape copy {req:?}"));
                        }
                        Err(e) => panic!("view {req:?}: {e}"),
                    }
                } else {
                    let a = self.arr.reshape(&req).unwrap();
                    self.set(a, t, format!("reshape {req:?}"));
                }
            }
            8 => {
                if nd >= 2 {
                    let (a0, b0) = (rng.below(nd), rng.below(nd));
                    let mut p: Vec<usize> = (0..nd).collect();
                    p.swap(a0, b0);
                    let a = self
                        .arr
                        .transpose(a0 as isize - nd as isize, b0 as isize)
                        .unwrap();
                    let t = self.table.permute(&p);
                    self.set(a, t, format!("transpose {a0} {b0}"));
                }
            }
            9 if rng.chance(0.5) || nd >= MAX_RANK => {
                let shape: Vec<usize> = self
                    .table
                    .shape
                    .iter()
                    .copied()
                    .filter(|&d| d != 1)
                    .collect();
                let a = self.arr.squeeze_all();
                let t = self.table.reshape(&shape);
                self.set(a, t, "squeeze_all".into());
            }
            9 => {
                if nd < MAX_RANK {
                    let ax = rng.int(-(nd as isize) - 1, nd as isize);
                    let a = self.arr.unsqueeze(ax).unwrap();
                    let pos = if ax < 0 { ax + nd as isize + 1 } else { ax } as usize;
                    let mut shape = self.table.shape.clone();
                    shape.insert(pos, 1);
                    let t = self.table.reshape(&shape);
                    self.set(a, t, format!("unsqueeze {ax}"));
                }
            }
            _ => {
                // A fresh view of the buffer through explicit strides and an offset.
                let len = self.arr.buffer_len();
                let shape = random_shape(rng, 4, 5, self.max_numel);
                let (strides, offset) = if self.writable {
                    let (st, off, need) = random_layout(rng, &shape);
                    if need > len {
                        return;
                    }
                    (st, off + rng.below(len - need + 1))
                } else {
                    let st: Vec<isize> = shape.iter().map(|_| rng.int(-7, 7)).collect();
                    let (mut lo, mut hi) = (0isize, 0isize);
                    if numel(&shape) > 0 {
                        for (&d, &s) in shape.iter().zip(&st) {
                            let e = (d as isize - 1) * s;
                            if e < 0 {
                                lo += e;
                            } else {
                                hi += e;
                            }
                        }
                    }
                    if hi - lo >= len as isize {
                        return;
                    }
                    (
                        st,
                        (-lo + rng.int(0, len as isize - 1 - (hi - lo))) as usize,
                    )
                };
                let a = self.arr.as_strided(&shape, &strides, offset).unwrap();
                let vals = gather(&self.buf, &naive_offsets(&shape, &strides, offset));
                let t = Table {
                    shape: shape.clone(),
                    vals,
                };
                self.set(a, t, format!("as_strided {shape:?} {strides:?} {offset}"));
            }
        }
    }

    /// Random valid NumPy basic-indexing arguments for the current shape.
    pub fn random_slice_args(&self, rng: &mut Prng) -> Vec<SliceArg> {
        let shape = self.arr.shape().to_vec();
        let nd = shape.len();
        let used = rng.below(nd + 1);
        // With an ellipsis before explicit entry `k`, it stands for axes k..k + nd - used.
        let ellipsis_at = if rng.chance(0.2) {
            Some(rng.below(used + 1))
        } else {
            None
        };
        let axes: Vec<usize> = match ellipsis_at {
            Some(k) => (0..k).chain(k + nd - used..nd).collect(),
            None => (0..used).collect(),
        };
        let mut rank = nd;
        let mut args = Vec::new();
        for (k, &axis) in axes.iter().enumerate() {
            if ellipsis_at == Some(k) {
                args.push(SliceArg::Ellipsis);
            }
            if rank < MAX_RANK && rng.chance(0.15) {
                args.push(SliceArg::NewAxis);
                rank += 1;
            }
            let n = shape[axis];
            let bound = |rng: &mut Prng| {
                if rng.chance(0.4) {
                    None
                } else {
                    Some(rng.int(-(n as isize) - 2, n as isize + 2))
                }
            };
            if n > 0 && rng.chance(0.1) {
                args.push(SliceArg::Index(rng.int(-(n as isize), n as isize - 1)));
                rank -= 1;
            } else {
                // Mostly non-empty ranges: an empty one ends the interesting part of a chain.
                let mut tries = 0;
                let (start, stop, step) = loop {
                    let mag = [1, 1, 1, 1, 1, 1, 2, 2, 2, 3][rng.below(10)];
                    let step = mag * if rng.chance(0.4) { -1 } else { 1 };
                    let (a, b) = (bound(rng), bound(rng));
                    tries += 1;
                    if tries > 6 || n == 0 || !py_slice(a, b, step, n).is_empty() {
                        break (a, b, step);
                    }
                };
                args.push(SliceArg::Range { start, stop, step });
            }
        }
        if ellipsis_at == Some(axes.len()) {
            args.push(SliceArg::Ellipsis);
        }
        if rank < MAX_RANK && rng.chance(0.1) {
            args.push(SliceArg::NewAxis);
        }
        args
    }
}

/// A contiguous i64 array of `shape` whose element `i` is `i` (the ids of `Chain`).
pub fn iota_i64(shape: &[usize]) -> NDArray {
    let n = numel(shape);
    NDArray::from_vec((0..n as i64).collect::<Vec<_>>(), shape).unwrap()
}
