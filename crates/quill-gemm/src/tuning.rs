//! The GEMM's tuning as data. [`TABLE`] holds a row per kernel path ([`Features`]: AMX,
//! AVX512_BF16, AVX-512, AVX2, portable) and range of cache sizes ([`Caches`]): how deep its
//! blocks go ([`Depth`]) and when its fusing kernel packs B itself ([`FuseLimits`]). The
//! constants below choose between the GEMM's paths (threads, stripes, A or B read in place,
//! the packing order). Block sizes a row does not fix follow from the caches
//! ([`Depth::Caches`]).
//!
//! Every measured number says where it was measured: a `docs/perf-log/` file, with the command
//! and the CPU. docs/perf-log/2026-12-07.md, section "quill-gemm tuning provenance", holds the
//! measurements that had been told in comments beside the code. A number measured on one CPU
//! serves every CPU its row's key covers until a run elsewhere says otherwise: add a row with
//! narrower [`Caches`] (rows are searched in order, the first match wins) and its `source`.

use crate::CacheSizes;

/// The kernel path a row tunes: a kernel family ([`Kernel`](crate::Kernel)) and, for bf16,
/// whether the CPU's bf16 instructions take the operands as they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Features {
    /// bf16 on AMX tiles (`tdpbf16ps`; the `Amx` family).
    Amx,
    /// bf16 pairs on AVX512_BF16 (`vdpbf16ps`; the `Avx512` family on a CPU that has it).
    Avx512Bf16,
    /// f32 and f64 on AVX-512F (the `Avx512` family, and `Amx`, whose f32 and f64 run these
    /// kernels).
    Avx512,
    /// f32 and f64 on AVX2 + FMA (the `Avx2` family).
    Avx2,
    /// f32 and f64 in portable Rust (the `Generic` family).
    Generic,
}

/// The cache sizes a row serves: L1d and L2 each within an inclusive range of bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caches {
    /// Smallest and largest L1d.
    pub l1d: (usize, usize),
    /// Smallest and largest L2.
    pub l2: (usize, usize),
}

impl Caches {
    /// Any caches.
    pub const ANY: Caches = Caches {
        l1d: (0, usize::MAX),
        l2: (0, usize::MAX),
    };

    /// Whether `c` lies in these ranges.
    pub fn holds(&self, c: CacheSizes) -> bool {
        (self.l1d.0..=self.l1d.1).contains(&c.l1d) && (self.l2.0..=self.l2.1).contains(&c.l2)
    }
}

/// How deep a kernel's depth blocks (KC) go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// From the caches: a B micro-panel fills half of L1d, but at least [`STEPS_PER_C_LINE`]
    /// steps per cache line of the C tile and at most [`MAX_STEPS`] (`Gemm::for_caches`).
    Caches,
    /// This many packed steps whatever L1d holds, for a kernel that streams its panels from
    /// L2 and loses more to C's trips between depth blocks.
    Steps(usize),
}

/// When a kernel with a fusing form (one that packs its B panel as the first row tile
/// multiplies it) uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FuseLimits {
    /// Fuse only where B's rows lie fewer than this many bytes apart (`usize::MAX`: any).
    pub below: usize,
    /// From this many rows, a product few enough rows to read B in place
    /// ([`IN_PLACE_ROWS`]) has the fusing kernel pack it instead (`usize::MAX`: never).
    pub rows: usize,
}

/// One row of [`TABLE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// The kernel path the row serves (the key, with `caches`).
    pub features: Features,
    /// The caches the row serves.
    pub caches: Caches,
    /// The depth blocks.
    pub depth: Depth,
    /// When the fusing kernel runs; `None`: the path has none.
    pub fuse: Option<FuseLimits>,
    /// How the row's numbers were measured: the perf-log file, command and CPU.
    pub source: &'static str,
}

impl Tuning {
    /// The first row of [`TABLE`] for `features` whose caches hold `caches`. Every path has a
    /// row for any caches, so there always is one.
    pub fn find(features: Features, caches: CacheSizes) -> &'static Tuning {
        TABLE
            .iter()
            .find(|t| t.features == features && t.caches.holds(caches))
            .expect("tuning.rs: every path has a row for any caches")
    }
}

/// Rows from which the AVX2 kernels (6-row tiles) fuse a few-row product's B packing: three
/// row tiles.
const AVX2_FUSE_ROWS: usize = 2 * 6 + 1;

/// The rows, searched in order.
pub static TABLE: &[Tuning] = &[
    Tuning {
        features: Features::Amx,
        caches: Caches::ANY,
        // 2048 depth values: up to k = 2048 the C tiles stay in tile registers from first to
        // last step, since tiles read from L2 nearly as fast as from L1.
        depth: Depth::Steps(1024),
        fuse: None,
        source: "docs/perf-log/2026-11-27.md, 'Deeper AMX blocks': Intel Xeon (Emerald \
                 Rapids, AMX), one thread pinned with `taskset -c 0`, 7-11 alternating rounds \
                 of `python scripts/gemm_bench.py --only bf16` against the L1-sized 384-deep \
                 blocks: 1024^3 1.26-1.40x, 2048^3 1.40x, 512 x 2048 x 512 1.09x, k <= 384 \
                 within noise",
    },
    Tuning {
        features: Features::Avx512Bf16,
        caches: Caches::ANY,
        depth: Depth::Caches,
        fuse: Some(FuseLimits {
            below: usize::MAX,
            rows: usize::MAX,
        }),
        source: "docs/perf-log/2026-11-29.md, fused bf16 packing: AMD EPYC Zen 4 (family 25 \
                 model 17), one thread, builds c718b34 and 0fb53c5 timed alternately three \
                 times: 64 x 1024 x 1024 1.12x, 32 x 512 x 512 1.12x, 64^3 1.10x; rows a page \
                 apart fuse too (the kernel prefetches 16 rows ahead)",
    },
    Tuning {
        features: Features::Avx512,
        caches: Caches::ANY,
        depth: Depth::Caches,
        // Any row stride: its 24 FMAs a step hide B's loads. Few rows keep reading B in place.
        fuse: Some(FuseLimits {
            below: usize::MAX,
            rows: usize::MAX,
        }),
        source: "docs/perf-log/2026-11-30.md, fused f32 / f64 packing and few-row fusing: AMD \
                 EPYC Zen 4 (family 25 model 17), `python scripts/gemm_bench.py --bin base=... \
                 --bin new=... --only f32|f64 --threads 2|1`, 11 rounds: rows 4 KiB apart fused \
                 1.00-1.09x; 30 to 36 rows fused 0.98-1.05x (f32), 13 to 36 rows 0.91-1.01x \
                 (f64), so few rows read B in place",
    },
    Tuning {
        features: Features::Avx2,
        caches: Caches::ANY,
        depth: Depth::Caches,
        // Rows a page or more apart defeat the prefetchers, and its 12 FMAs a step cannot
        // hide those loads; from three row tiles a few-row product packs B as it goes.
        fuse: Some(FuseLimits {
            below: ROW_GROUP_STRIDE,
            rows: AVX2_FUSE_ROWS,
        }),
        source: "docs/perf-log/2026-11-30.md, fused f32 / f64 packing and few-row fusing: AMD \
                 EPYC Zen 4 (family 25 model 17), `python scripts/gemm_bench.py --kernel avx2 \
                 --only f32|f64`, 11 rounds: rows 4 KiB apart fused 0.95x (64 x 1024 x 1024) \
                 and 0.97x (1024^3) on one thread; 13 to 36 rows fused 0.95-1.26x, 8 and 12 \
                 rows 1.01x",
    },
    Tuning {
        features: Features::Generic,
        caches: Caches::ANY,
        depth: Depth::Caches,
        fuse: None,
        source: "not measured: the portable kernel has no fusing form, and its blocks follow \
                 the caches",
    },
];

/// With [`Depth::Caches`], the fewest depth steps per cache line of the C tile: a kernel call
/// loads and stores its C tile once (its rows often in one L1 set), so a call must be long
/// against that trip. This lengthens only the AVX-512 tiles (24 lines: 512 steps).
/// Measured (docs/perf-log/2026-11-27.md, Intel Xeon Emerald Rapids, 2 vCPUs, one thread,
/// f32 1024^3): 119-129 GFLOP/s at KC 192, 135 at 384, 141-143 at 512; AVX2 alike from 256 to
/// 768.
pub const STEPS_PER_C_LINE: usize = 32;
/// With [`Depth::Caches`], the deepest block in packed steps (see [`STEPS_PER_C_LINE`]).
pub const MAX_STEPS: usize = 512;

/// Complex multiply-adds (m k n) from which `matmul_complex` takes the 3M method, its three
/// real products and four passes beating one real product of four times the work.
/// Measured: docs/perf-log/2026-12-08.md ('Complex products', AMD EPYC Zen 4, 2 threads,
/// `cargo run --release -p quill-gemm --example complex`).
pub const GAUSS_WORK: usize = 1 << 19;

/// Multiply-adds each thread must be given before a product is split: waking a pool thread
/// and meeting it again costs what one core computes in about this many. Each thread's stripe
/// of a small product reads A in place as a one-thread product does, and the caller runs a
/// stripe itself, so a helper that wakes late costs little.
/// Measured: docs/perf-log/2026-11-25.md (AMD EPYC Zen 5, 2 threads, `python
/// scripts/gemm_bench.py --threads 2 --rounds 5`: 128^3 split in two 1.27x faster with the
/// AVX-512 kernel, 1.63x with AVX2, at 1 M) and docs/perf-log/2026-11-27.md (AMD EPYC Zen 4,
/// 2 threads, 256 K: 100^3 1.6x, 1000 x 32 x 32 1.7x, 200^3 1.2x).
pub const PER_THREAD: usize = 1 << 18;

/// Multiply-adds up to which a one-thread product, or one thread's stripe, skips packing A
/// (about 100^3: A sits in L1 or L2 and each value serves few B panels, so a copy would not
/// pay). Measured: docs/perf-log/2026-11-27.md, 'Edge stampings, A in place up to 100^3'
/// (Intel Xeon Emerald Rapids, `taskset -c 0,1`, `python scripts/gemm_bench.py --only f32
/// --threads 1`: 72^3 to 100^3 1.08-1.18x, 1000 x 32 x 32 1.5x against 2^18).
pub const DIRECT_WORK: usize = 1 << 20;

/// Above this many multiply-adds a product whose B the nest would read in place (few rows)
/// takes the nest instead of the direct path, which packs all of B. Measured: 16 x 256 x 256
/// ran 0.85x through the direct path (docs/perf-log/2026-12-07.md, 'quill-gemm tuning
/// provenance'; CPU not recorded).
pub const DIRECT_FEW_ROWS_WORK: usize = 1 << 18;

/// Multiply-adds up to which a product on several threads is split into stripes (of rows or
/// columns) whatever its shape (about 645^3): a row stripe packs all of B on every thread,
/// which only a larger product's nest repays with its shared packing, against two meetings
/// per depth block. Measured: docs/perf-log/2026-11-29.md (AMD EPYC Zen 4, 2 threads, 21
/// rounds, 2^28 against 2^26: 1.00-1.15x at 512^3 to 128 x 784 x 1024, bf16 0.96-0.97x at
/// 512 x 784 x 512; above it stripes 0.99-1.02x against the nest) and
/// docs/perf-log/2026-11-30.md (2^34: still a wash).
pub const STRIPE_WORK: usize = 1 << 28;

/// Values in a depth block of B above which the nest's threads share its packing; a large
/// product with a B this narrow takes stripes of rows instead, each thread packing all of B
/// rather than meeting twice per depth block. Measured: docs/perf-log/2026-11-29.md (AMD EPYC
/// Zen 4, 2 threads, `--rounds 21 --reps 9`: rows 1.00-1.04x against the nest with AVX2 at
/// n = 64 and 128; with AVX-512 n = 128 read 0.99x, n = 64 and 32 1.02x).
pub const SHARED_B_PACK: usize = 1 << 15;

/// Rows of A up to which a product reads a unit-stride f32 / f64 B in place, each B panel
/// serving too few micro-tiles to repay its copy. Measured: docs/perf-log/2026-11-26.md
/// (Intel Xeon Emerald Rapids, 2 threads, B 512 x 512: 24 to 36 rows 1.2-1.4x in place with
/// either kernel; from 48 rows packing as fast or faster).
pub const IN_PLACE_ROWS: usize = 36;

/// B's rows are not read in place when they lie a multiple of this many bytes apart: a
/// panel's column then maps onto a few cache sets, too few to hold its depth. Measured:
/// docs/perf-log/2026-11-27.md (AMD EPYC Zen 4, one thread: 32 x 32 @ 32 x 1024 2.2x faster
/// packed, 16 x 512 @ 512 x 1024 1.3x; rows 2 KiB apart still in place, packing them
/// 0.73-0.87x).
pub const ALIASING_STRIDE: usize = 4096;

/// Steps of a row-major B block packed at a time across all its panels, where B's rows lie
/// [`ROW_GROUP_STRIDE`] bytes or more apart: a panel by itself reads one short run per row,
/// rows a whole B row apart, which defeats the prefetchers and costs a TLB walk per run; a
/// group of rows across all panels reads each row in one sweep. Measured:
/// docs/perf-log/2026-11-27.md (AMD EPYC Zen 4, one thread: 8 rows against 16, 16 x 1024 @
/// 1024 x 1024 1.13x with the AVX2 kernel, 1.03x with AVX-512, 64 x 1024 x 1024 1.02-1.03x; 2
/// and 4 rows slower than 16, a row at a time 0.76-0.91x).
pub const ROW_GROUP: usize = 8;
/// Bytes between B's rows from which the row-group order is used (and from which the AVX2
/// kernels stop fusing B's packing: [`FuseLimits::below`]). Measured:
/// docs/perf-log/2026-11-27.md and docs/perf-log/2026-11-30.md (AMD EPYC Zen 4: from 2 KiB,
/// whole products 0.98-1.04x; with shorter rows the group order's writes ran 128^3 to 300^3
/// about 0.9x).
pub const ROW_GROUP_STRIDE: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path has a row for any caches (so `find` never fails), each row names a
    /// perf-log file or says it was not measured, and every perf-log file named exists where
    /// the repository's docs are at hand.
    #[test]
    fn every_path_has_a_row_with_a_source() {
        let paths = [
            Features::Amx,
            Features::Avx512Bf16,
            Features::Avx512,
            Features::Avx2,
            Features::Generic,
        ];
        for f in paths {
            assert!(
                TABLE
                    .iter()
                    .any(|t| t.features == f && t.caches == Caches::ANY),
                "{f:?}"
            );
        }
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/perf-log");
        for t in TABLE {
            let named: Vec<&str> = t
                .source
                .split_whitespace()
                .filter(|w| w.starts_with("docs/perf-log/"))
                .map(|w| w.trim_end_matches([',', ';', ')']))
                .collect();
            assert!(
                !named.is_empty() || t.source.starts_with("not measured"),
                "{:?}: {}",
                t.features,
                t.source
            );
            for f in named {
                let file = docs.join(f.trim_start_matches("docs/perf-log/"));
                assert!(
                    !docs.exists() || file.exists(),
                    "{f} (from {:?})",
                    t.features
                );
            }
        }
    }

    /// The first matching row wins, and a narrower row ahead of an `ANY` one takes only the
    /// caches it names.
    #[test]
    fn find_takes_the_first_match() {
        let c = CacheSizes {
            l1d: 32 << 10,
            l2: 1 << 20,
            l3: 32 << 20,
        };
        assert_eq!(Tuning::find(Features::Amx, c).depth, Depth::Steps(1024));
        assert_eq!(
            Tuning::find(Features::Avx2, c).fuse,
            Some(FuseLimits {
                below: 4096,
                rows: 13
            })
        );
        let zen3 = Caches {
            l1d: (32 << 10, 32 << 10),
            l2: (512 << 10, 512 << 10),
        };
        assert!(!zen3.holds(c));
        assert!(zen3.holds(CacheSizes { l2: 512 << 10, ..c }));
        assert!(Caches::ANY.holds(c));
    }
}
