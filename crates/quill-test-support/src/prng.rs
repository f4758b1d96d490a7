//! The one test PRNG: SplitMix64 (Steele, Lea and Flood), deterministic on every platform, tiny,
//! and good enough for test data. Every draw consumes exactly one `next_u64`, so a test's stream
//! only depends on its seed and its own sequence of calls.

/// SplitMix64. `Prng::new(seed)` mixes the seed first; `Prng::from_state(s)` starts from the raw
/// state, so that a seed recorded by proptest (or an older test) replays the same stream.
#[derive(Clone, Debug)]
pub struct Prng(u64);

/// Integer types `Prng::int` can draw (through i128, so no intermediate overflows).
pub trait PrngInt: Copy {
    /// Widens the value losslessly.
    fn to_i128(self) -> i128;
    /// Narrows back; panics when `v` is out of range (a drawn value never is).
    fn from_i128(v: i128) -> Self;
}

macro_rules! prng_int {
    ($($t:ty),*) => {$(
        impl PrngInt for $t {
            fn to_i128(self) -> i128 {
                self as i128
            }
            fn from_i128(v: i128) -> Self {
                <$t>::try_from(v).expect("Prng::int result out of range of its type")
            }
        }
    )*};
}
prng_int!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl Prng {
    /// The generator for `seed`: the seed is XORed with the golden-ratio constant first, which
    /// `from_state` skips (so `new(s)` and `from_state(s)` are different streams).
    pub fn new(seed: u64) -> Prng {
        Prng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// The generator whose next step starts from `state` exactly.
    pub fn from_state(state: u64) -> Prng {
        Prng(state)
    }

    /// The next 64 uniformly distributed bits; every other draw is built on exactly one call.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`; the modulo bias is irrelevant for tests).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0, "Prng::below(0)");
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`, in the type of the bounds.
    pub fn int<T: PrngInt>(&mut self, lo: T, hi: T) -> T {
        let (l, h) = (lo.to_i128(), hi.to_i128());
        assert!(l <= h, "Prng::int({l}, {h})");
        let span = u64::try_from(h - l + 1).expect("Prng::int: span wider than u64");
        T::from_i128(l + (self.next_u64() % span) as i128)
    }

    /// Uniform in [0, 1), with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// True with probability exactly `num / den` (no float rounding).
    pub fn odds(&mut self, num: usize, den: usize) -> bool {
        self.below(den) < num
    }

    /// Fisher-Yates.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }

    /// A uniformly random permutation of `0..n`.
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        self.shuffle(&mut p);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_values() {
        // The first outputs of SplitMix64 from state 0, as the reference C implementation
        // (Vigna, splitmix64.c) prints them.
        let mut r = Prng::from_state(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn int_stays_in_bounds_and_hits_both_ends() {
        let mut r = Prng::new(1);
        let v: Vec<i64> = (0..2000).map(|_| r.int(-3i64, 3)).collect();
        assert!(v.iter().all(|x| (-3..=3).contains(x)));
        assert!(v.contains(&-3) && v.contains(&3));
        let big: i64 = r.int(-(1i64 << 40), 1i64 << 40);
        assert!(big.abs() <= 1 << 40);
    }

    #[test]
    fn permutation_is_a_permutation() {
        let mut r = Prng::new(2);
        let mut p = r.permutation(50);
        assert_ne!(
            p,
            (0..50).collect::<Vec<_>>(),
            "50! orders, identity is astronomically rare"
        );
        p.sort_unstable();
        assert_eq!(p, (0..50).collect::<Vec<_>>());
    }
}
