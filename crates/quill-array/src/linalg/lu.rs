//! LU with partial pivoting on faer's in-place factorization, with the thread count chosen for
//! the matrix's size rather than read from faer's process-wide setting: below
//! [`THREADS_FROM`] the factorization, solves and inverse run on the calling thread, where the
//! pool's meetings per panel cost more than a second core gives (and set per call, the global
//! setting would let one thread's call change another's). One `n x n` faer matrix holds both
//! factors: L's unit diagonal is implied and its strict lower triangle sits below U.

use super::Field;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::lu::partial_pivoting::{factor, inverse, solve};
use faer::perm::PermRef;
use faer::{Mat, MatRef, Par};

/// The order from which LU work uses the thread pool. Measured: docs/perf-log/2026-12-08.md
/// ('faer's threads by size', AMD EPYC Zen 4, 2 threads: solve at 512 4.0-4.4 ms on one
/// thread against 4.6-4.7 on two, at 1024 31.0 against 27.7).
pub(super) const THREADS_FROM: usize = 768;

/// faer's parallelism for work on `n x n` matrices.
pub(super) fn par_for(n: usize) -> Par {
    if n < THREADS_FROM {
        Par::Seq
    } else {
        Par::rayon(0)
    }
}

/// P A = L U of a square matrix.
pub(super) struct Lu<T: Field> {
    lu: Mat<T>,
    fwd: Vec<usize>,
    bwd: Vec<usize>,
    par: Par,
}

impl<T: Field> Lu<T> {
    /// Factors the square `a`.
    pub(super) fn new(a: MatRef<'_, T>) -> Self {
        let n = a.nrows();
        let mut lu = a.to_owned();
        let (mut fwd, mut bwd) = (vec![0; n], vec![0; n]);
        let par = par_for(n);
        let req = factor::lu_in_place_scratch::<usize, T>(n, n, par, Default::default());
        let mut mem = MemBuffer::new(req);
        factor::lu_in_place(
            lu.as_mut(),
            &mut fwd,
            &mut bwd,
            par,
            MemStack::new(&mut mem),
            Default::default(),
        );
        Lu { lu, fwd, bwd, par }
    }

    /// The factors: U on and above the diagonal, L's strict lower triangle below it.
    pub(super) fn factors(&self) -> MatRef<'_, T> {
        self.lu.as_ref()
    }

    /// The row permutation's forward indices (row i of P A is row `fwd[i]` of A).
    pub(super) fn forward(&self) -> &[usize] {
        &self.fwd
    }

    fn perm(&self) -> PermRef<'_, usize> {
        PermRef::new_checked(&self.fwd, &self.bwd, self.fwd.len())
    }

    /// X with A X = B.
    pub(super) fn solve(&self, b: MatRef<'_, T>) -> Mat<T> {
        let mut x = b.to_owned();
        let req = solve::solve_in_place_scratch::<usize, T>(self.fwd.len(), b.ncols(), self.par);
        let mut mem = MemBuffer::new(req);
        let f = self.factors();
        solve::solve_in_place(
            f,
            f,
            self.perm(),
            x.as_mut(),
            self.par,
            MemStack::new(&mut mem),
        );
        x
    }

    /// A⁻¹. Its triangular inverses and product cost twice the factorization's flops and run
    /// on the pool from half [`THREADS_FROM`] (inv at 512 measured 9.2-11.8 ms on two threads
    /// against 10.9-17 on one, same log).
    pub(super) fn inverse(&self) -> Mat<T> {
        let n = self.fwd.len();
        let par = par_for(2 * n);
        let mut out = Mat::zeros(n, n);
        let mut mem = MemBuffer::new(inverse::inverse_scratch::<usize, T>(n, par));
        let f = self.factors();
        inverse::inverse(
            out.as_mut(),
            f,
            f,
            self.perm(),
            par,
            MemStack::new(&mut mem),
        );
        out
    }
}
