//! Python's slice rule: the positions `range(n)[start:stop:step]` selects, found by filtering
//! every candidate position rather than by a length formula (the oracle's independent version
//! of what quill-core's `resolve_range` computes).

/// The positions `start:stop:step` selects on an axis of `n`, in order. `step != 0`.
pub fn py_slice_positions(
    start: Option<isize>,
    stop: Option<isize>,
    step: isize,
    n: usize,
) -> Vec<usize> {
    assert!(step != 0);
    let n = n as i128;
    let step = step as i128;
    let wrap = |v: isize| if v < 0 { v as i128 + n } else { v as i128 };
    if step > 0 {
        // The first position: start, counted from the end if negative, never before 0.
        let first = start.map_or(0, |s| wrap(s).max(0));
        let end = stop.map_or(n, wrap);
        (0..n)
            .filter(|&i| i >= first && i < end && (i - first) % step == 0)
            .map(|i| i as usize)
            .collect()
    } else {
        // The first position: start, counted from the end if negative, never past the last.
        let first = start.map_or(n - 1, |s| wrap(s).min(n - 1));
        let end = stop.map_or(-1, wrap);
        (0..n)
            .rev()
            .filter(|&i| i <= first && i > end && (first - i) % (-step) == 0)
            .map(|i| i as usize)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPython's own algorithm (`PySlice_AdjustIndices`, then the obvious loop), a second,
    /// differently built implementation to hold the filter above to.
    fn cpython(start: Option<isize>, stop: Option<isize>, step: isize, n: usize) -> Vec<usize> {
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

    #[test]
    fn filter_agrees_with_cpython_everywhere_small() {
        let bounds: Vec<Option<isize>> = std::iter::once(None)
            .chain((-9..=9).map(Some))
            .chain([Some(isize::MIN), Some(isize::MAX)])
            .collect();
        for n in 0..7 {
            for &a in &bounds {
                for &b in &bounds {
                    for step in [-4, -3, -2, -1, 1, 2, 3, 4, isize::MAX, isize::MIN + 1] {
                        assert_eq!(
                            py_slice_positions(a, b, step, n),
                            cpython(a, b, step, n),
                            "[{a:?}:{b:?}:{step}] of {n}"
                        );
                    }
                }
            }
        }
    }
}
