//! The data-cache sizes the GEMM's block sizes are derived from, read once at run time: CPUID
//! (leaf 4 on Intel, 0x8000001D on AMD) on x86-64, else `/sys/devices/system/cpu/cpu0/cache`,
//! else defaults that suit most desktop and server cores of the last decade.

use std::sync::OnceLock;

/// Sizes in bytes of the level-1 data, level-2 and level-3 caches one core sees (L3 is the
/// whole shared cache).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheSizes {
    /// Level-1 data cache; sizes the depth block (KC), so a B micro-panel stays in L1.
    pub l1d: usize,
    /// Level-2 cache; sizes the packed A block (MC rows).
    pub l2: usize,
    /// Level-3 cache, all of it; sizes the packed B block (NC columns).
    pub l3: usize,
}

impl CacheSizes {
    /// Used for every level that neither CPUID nor sysfs reports.
    pub const DEFAULT: CacheSizes = CacheSizes {
        l1d: 32 << 10,
        l2: 512 << 10,
        l3: 8 << 20,
    };

    /// This machine's caches, read once.
    pub fn get() -> CacheSizes {
        static C: OnceLock<CacheSizes> = OnceLock::new();
        *C.get_or_init(|| {
            let found = cpuid().unwrap_or_default();
            let found = found.or(sysfs().unwrap_or_default());
            found.finish()
        })
    }
}

/// Levels found so far; `None` where a source said nothing.
#[derive(Clone, Copy, Default, Debug)]
struct Partial {
    l1d: Option<usize>,
    l2: Option<usize>,
    l3: Option<usize>,
}

impl Partial {
    fn or(self, o: Partial) -> Partial {
        Partial {
            l1d: self.l1d.or(o.l1d),
            l2: self.l2.or(o.l2),
            l3: self.l3.or(o.l3),
        }
    }

    /// Fills gaps with the defaults and rejects absurd values (a hypervisor may report zeros or
    /// garbage), so the block sizes derived from them stay sane.
    fn finish(self) -> CacheSizes {
        let d = CacheSizes::DEFAULT;
        let pick = |v: Option<usize>, lo: usize, hi: usize, def: usize| {
            v.filter(|&x| (lo..=hi).contains(&x)).unwrap_or(def)
        };
        CacheSizes {
            l1d: pick(self.l1d, 8 << 10, 1 << 20, d.l1d),
            l2: pick(self.l2, 64 << 10, 64 << 20, d.l2),
            l3: pick(self.l3, 256 << 10, 4 << 30, d.l3),
        }
    }

    fn set(&mut self, level: u32, unified_or_data: bool, bytes: usize) {
        match (level, unified_or_data) {
            (1, true) => self.l1d = Some(bytes),
            (2, true) => self.l2 = Some(bytes),
            (3, true) => self.l3 = Some(bytes),
            _ => {}
        }
    }
}

/// The deterministic cache-parameter leaf: 4 on Intel, 0x8000001D on AMD (same register
/// layout). `None` when the CPU offers neither.
#[cfg(target_arch = "x86_64")]
fn cpuid() -> Option<Partial> {
    use std::arch::x86_64::__cpuid;
    // Leaf 0 and 0x80000000 always answer; the leaves read below are checked against the
    // maxima they report.
    let r = __cpuid(0);
    let (max, vendor) = (r.eax, [r.ebx, r.edx, r.ecx]);
    let name: Vec<u8> = vendor.iter().flat_map(|w| w.to_le_bytes()).collect();
    let leaf = match &name[..] {
        b"GenuineIntel" if max >= 4 => 4,
        b"AuthenticAMD" | b"HygonGenuine" => {
            let ext = __cpuid(0x8000_0000).eax;
            if ext < 0x8000_001D {
                return None;
            }
            0x8000_001D
        }
        _ => return None,
    };
    let mut p = Partial::default();
    for sub in 0..16 {
        // Past the last cache a subleaf reports type 0.
        let r = std::arch::x86_64::__cpuid_count(leaf, sub);
        let kind = r.eax & 0x1f;
        if kind == 0 {
            break;
        }
        let level = (r.eax >> 5) & 0x7;
        let ways = ((r.ebx >> 22) & 0x3ff) as usize + 1;
        let parts = ((r.ebx >> 12) & 0x3ff) as usize + 1;
        let line = (r.ebx & 0xfff) as usize + 1;
        let sets = r.ecx as usize + 1;
        // Type 1 is data, 3 unified; 2 (instruction) is skipped.
        p.set(level, kind == 1 || kind == 3, ways * parts * line * sets);
    }
    Some(p)
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid() -> Option<Partial> {
    None
}

/// Linux's view of cpu0's caches.
fn sysfs() -> Option<Partial> {
    let base = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut p = Partial::default();
    for entry in std::fs::read_dir(base).ok()?.flatten() {
        let dir = entry.path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        let (Ok(level), Some(bytes)) = (level.trim().parse(), parse_size(&size)) else {
            continue;
        };
        let kind = kind.trim();
        p.set(level, kind == "Data" || kind == "Unified", bytes);
    }
    Some(p)
}

/// "48K", "1024K", "32M" or a plain byte count.
fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mult) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("48K\n"), Some(48 << 10));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn absurd_values_fall_back() {
        let p = Partial {
            l1d: Some(0),
            l2: Some(usize::MAX),
            l3: None,
        };
        assert_eq!(p.finish(), CacheSizes::DEFAULT);
    }

    #[test]
    fn detected_sizes_are_ordered() {
        let c = CacheSizes::get();
        eprintln!("cpuid {:?}, sysfs {:?}, used {c:?}", cpuid(), sysfs());
        assert!(
            c.l1d >= 8 << 10 && c.l1d < c.l2 && c.l2 <= c.l3.max(c.l2),
            "{c:?}"
        );
    }

    #[test]
    fn cpuid_agrees_with_sysfs_where_both_answer() {
        // Both describe the same hardware; a disagreement means a misread register field.
        let (Some(a), Some(b)) = (cpuid(), sysfs()) else {
            return;
        };
        if let (Some(x), Some(y)) = (a.l1d, b.l1d) {
            assert_eq!(x, y);
        }
        if let (Some(x), Some(y)) = (a.l2, b.l2) {
            assert_eq!(x, y);
        }
    }
}
