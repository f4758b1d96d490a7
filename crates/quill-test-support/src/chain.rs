//! Random chains of view ops on an `NDArray` (permute, transpose, slice with steps, indices,
//! NewAxis and Ellipsis, flip, broadcast, reshape / view, squeeze / unsqueeze, `as_strided`),
//! each applied to the array and to its oracle table, so that after every step the array must
//! read as the table says. A writable chain keeps to ops that stay in the original buffer.

use crate::arrays::offsets_of;
use crate::compare::assert_same;
use crate::index::{gather, naive_offsets, numel};
use crate::prng::Prng;
use crate::shapes::{random_layout, random_shape, random_shape_with_numel};
use crate::slicing::py_slice_positions;
use crate::table::Table;
use quill::{DType, NDArray, SliceArg};

/// An array together with the oracle's view of it: `table` holds, per element in C order, the id
/// it must read as; `buf` holds the id stored at each position of the array's current buffer
/// (the identity for the original buffer; the table at copy time after a copy).
pub struct Chain {
    /// The array after the ops so far.
    pub arr: NDArray,
    /// The ids `arr` must read as, in C order, as the oracle computed them.
    pub table: Table,
    /// The id stored at each position of `arr`'s buffer.
    pub buf: Vec<usize>,
    /// One line per op applied, for failure messages (see `describe`).
    pub log: Vec<String>,
    /// Only ops whose result is writable and lives in the original buffer.
    pub writable: bool,
    /// The largest element count a broadcast or a fresh `as_strided` view may reach (4096 from
    /// `new`), so a long chain stays cheap to check element by element.
    pub max_numel: usize,
}

/// The rank a chain's array never exceeds: the ops that add dims (unsqueeze, broadcast, new
/// axes in a slice, reshape) stop there, and tests may assert it.
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

    /// The ops applied so far and the array's current shape, strides and offset, for the
    /// context of a failed assertion.
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
                let t = self.table.slice(&args).expect("valid slice args");
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
                        rng.int(1usize, 3)
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
                let t = self.table.broadcast_to(&target).expect("broadcastable");
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
                let t = self.table.reshape(&shape).expect("same count");
                if self.writable {
                    match self.arr.view(&req) {
                        Ok(a) => self.set(a, t, format!("view {req:?}")),
                        Err(quill::Error::ReshapeNeedsCopy { .. }) => {
                            // The same request through reshape must copy, and get it right.
                            let a = self.arr.reshape(&req).unwrap();
                            assert!(!a.shares_storage_with(&self.arr));
                            assert_eq!(a.shape(), t.shape.as_slice());
                            let got = a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap();
                            let want = self
                                .arr
                                .astype(DType::F64)
                                .unwrap()
                                .to_vec::<f64>()
                                .unwrap();
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
                let t = self.table.reshape(&shape).expect("same count");
                self.set(a, t, "squeeze_all".into());
            }
            9 => {
                if nd < MAX_RANK {
                    let ax: isize = rng.int(-(nd as isize) - 1, nd as isize);
                    let a = self.arr.unsqueeze(ax).unwrap();
                    let pos = if ax < 0 { ax + nd as isize + 1 } else { ax } as usize;
                    let mut shape = self.table.shape.clone();
                    shape.insert(pos, 1);
                    let t = self.table.reshape(&shape).expect("same count");
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
                    let st: Vec<isize> = shape.iter().map(|_| rng.int(-7isize, 7)).collect();
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
                    if tries > 6 || n == 0 || !py_slice_positions(a, b, step, n).is_empty() {
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
