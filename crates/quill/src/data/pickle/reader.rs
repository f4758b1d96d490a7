//! The byte-level side of the pickle machine: reading opcode arguments with every length
//! checked against the bytes left, and decoding protocol 0's text arguments (integers, memo
//! keys, raw-unicode-escape strings) and LONG1/LONG4's little-endian integers.

use super::machine::bad;
use super::preview_str;
use quill_core::Result;

/// The input, read front to back; every read is checked against the bytes left.
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let left = self.buf.len() - self.pos;
        if n > left {
            return Err(bad(format!(
                "truncated: {n} bytes wanted at offset {}, {left} left",
                self.pos
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub(super) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub(super) fn le<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub(super) fn len4(&mut self) -> Result<usize> {
        Ok(u32::from_le_bytes(self.le()?) as usize)
    }
    pub(super) fn len8(&mut self) -> Result<usize> {
        let n = u64::from_le_bytes(self.le()?);
        usize::try_from(n).map_err(|_| bad(format!("declared length {n} overflows")))
    }
    /// The bytes up to the next newline (the argument of protocol 0's opcodes).
    pub(super) fn line_bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let rest = &self.buf[self.pos..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| bad(format!("unterminated {what} at offset {}", self.pos)))?;
        self.pos += end + 1;
        Ok(&rest[..end])
    }
    /// As [`Reader::line_bytes`], as UTF-8 text.
    pub(super) fn line(&mut self, what: &str) -> Result<&'a str> {
        let at = self.pos;
        std::str::from_utf8(self.line_bytes(what)?)
            .map_err(|_| bad(format!("{what} at offset {at} is not UTF-8")))
    }
}

/// A little-endian two's-complement integer of `b.len()` bytes (LONG1/LONG4).
pub(super) fn long_le(b: &[u8]) -> Result<i64> {
    if b.len() > 8 {
        return Err(bad(format!(
            "an integer of {} bytes does not fit in i64",
            b.len()
        )));
    }
    let fill = if b.last().is_some_and(|&x| x & 0x80 != 0) {
        0xff
    } else {
        0
    };
    let mut a = [fill; 8];
    a[..b.len()].copy_from_slice(b);
    Ok(i64::from_le_bytes(a))
}

pub(super) fn parse_int(s: &str) -> Result<i64> {
    s.trim()
        .parse::<i64>()
        .map_err(|_| bad(format!("integer {} is not an i64", preview_str(s))))
}

pub(super) fn parse_key(s: &str) -> Result<usize> {
    s.trim()
        .parse::<usize>()
        .map_err(|_| bad(format!("memo key {} is not a number", preview_str(s))))
}

/// Decodes Python's `raw-unicode-escape` (protocol 0's UNICODE): `\uXXXX` and `\UXXXXXXXX`
/// are escapes, every other byte is the latin-1 character of that value.
pub(super) fn raw_unicode_escape(s: &[u8]) -> Result<String> {
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let digits = match (s[i], s.get(i + 1)) {
            (b'\\', Some(b'u')) => 4,
            (b'\\', Some(b'U')) => 8,
            (b, _) => {
                out.push(char::from(b));
                i += 1;
                continue;
            }
        };
        let hex = s
            .get(i + 2..i + 2 + digits)
            .ok_or_else(|| bad("truncated \\u escape in UNICODE"))?;
        let c = std::str::from_utf8(hex)
            .ok()
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .and_then(char::from_u32)
            .ok_or_else(|| {
                bad(format!(
                    "bad escape {:?} in UNICODE",
                    String::from_utf8_lossy(hex)
                ))
            })?;
        out.push(c);
        i += 2 + digits;
    }
    Ok(out)
}
