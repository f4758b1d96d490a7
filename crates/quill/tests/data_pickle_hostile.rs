//! The data-only unpickler against hostile pickles written opcode by opcode: globals that
//! would run code (through every opcode that can call one) are refused by name and nothing
//! runs; deep nesting, cycles, truncation and huge declared lengths are errors, not stack
//! overflows, hangs or huge allocations. The deep-nesting tests run on the default test thread
//! (a 2 MiB stack), which a recursive decoder or a recursive drop would overflow.

use quill::data::pickle::{unpickle, Value, MAX_DEPTH};
use std::path::PathBuf;

/// A length-prefixed SHORT_BINUNICODE string.
fn short_str(s: &str) -> Vec<u8> {
    let mut v = vec![0x8c, s.len() as u8];
    v.extend_from_slice(s.as_bytes());
    v
}

/// A BINUNICODE string.
fn bin_str(s: &str) -> Vec<u8> {
    let mut v = vec![b'X'];
    v.extend_from_slice(&(s.len() as u32).to_le_bytes());
    v.extend_from_slice(s.as_bytes());
    v
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn err(bytes: &[u8]) -> String {
    match unpickle(bytes) {
        Ok(p) => panic!("decoded, to a {}", p.describe(p.root())),
        Err(e) => e.to_string(),
    }
}

/// A file whose existence would prove that a command ran.
fn sentinel(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("quill-pickle-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

const DANGEROUS: &[(&str, &str)] = &[
    ("os", "system"),
    ("posix", "system"),
    ("subprocess", "Popen"),
    ("subprocess", "call"),
    ("builtins", "eval"),
    ("builtins", "exec"),
    ("__builtin__", "eval"),
    ("builtins", "getattr"),
];

#[test]
fn code_running_globals_are_refused_by_name_through_every_opcode() {
    let flag = sentinel("globals");
    let cmd = format!("touch {}", flag.display());
    for &(m, n) in DANGEROUS {
        let name = format!("{m}.{n}");
        let global = format!("c{m}\n{n}\n").into_bytes();
        let stack_global = cat(&[&short_str(m), &short_str(n), b"\x93"]);
        let arg = bin_str(&cmd);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (
                "GLOBAL+REDUCE",
                cat(&[b"\x80\x02", &global, &arg, b"\x85R."]),
            ),
            (
                "STACK_GLOBAL+REDUCE",
                cat(&[b"\x80\x04", &stack_global, &arg, b"\x85R."]),
            ),
            ("GLOBAL alone", cat(&[b"\x80\x02", &global, b"."])),
            (
                "INST",
                cat(&[b"(", &arg, format!("i{m}\n{n}\n").as_bytes(), b"."]),
            ),
            ("OBJ", cat(&[b"(", &global, &arg, b"o."])),
            ("NEWOBJ", cat(&[b"\x80\x02", &global, &arg, b"\x85\x81."])),
            (
                "NEWOBJ_EX",
                cat(&[b"\x80\x04", &stack_global, &arg, b"\x85}\x92."]),
            ),
            ("BUILD", cat(&[b"\x80\x02", &global, b"}b."])),
        ];
        for (how, bytes) in cases {
            let e = err(&bytes);
            assert!(
                e.contains(&name) && e.contains("refuse"),
                "{how} of {name}: {e}"
            );
        }
    }
    assert!(!flag.exists(), "a command ran");
}

#[test]
fn accepted_constructors_cannot_be_used_to_call_or_build_objects() {
    // numpy.ndarray is an accepted global (as _reconstruct's argument) but not a callable.
    let nd = b"cnumpy\nndarray\n";
    let e = err(&cat(&[b"\x80\x02", nd, b")\x81."]));
    assert!(e.contains("NEWOBJ of numpy.ndarray refused"), "{e}");
    let e = err(&cat(&[b"(", nd, b"o."]));
    assert!(e.contains("OBJ of numpy.ndarray refused"), "{e}");
    let e = err(&cat(&[b"\x80\x02", nd, b")R."]));
    assert!(e.contains("numpy.ndarray"), "{e}");
    let e = err(&cat(&[b"\x80\x02", nd, b")b."]));
    assert!(e.contains("BUILD of a global \"numpy.ndarray\""), "{e}");
    // BUILD on plain data: a dict, a list.
    let e = err(b"\x80\x02})b.");
    assert!(e.contains("BUILD of a dict"), "{e}");
    let e = err(b"\x80\x02])b.");
    assert!(e.contains("BUILD of a list"), "{e}");
    // `bytes(n)` would allocate n zero bytes: only bytes() and bytes(b) are accepted.
    let e = err(b"\x80\x02c__builtin__\nbytes\nJ\xff\xff\xff\x7f\x85R.");
    assert!(
        e.contains("__builtin__.bytes called with unexpected arguments (int 2147483647)"),
        "{e}"
    );
    // Persistent ids and out-of-band buffers reach outside the file.
    assert!(err(b"\x80\x02X\x01\x00\x00\x00aQ.").contains("persistent"));
    assert!(err(b"\x80\x05\x97.").contains("out-of-band"));
}

#[test]
fn a_million_nested_tuples_is_an_error_not_a_stack_overflow() {
    let mut b = b"\x80\x02N".to_vec();
    b.extend(std::iter::repeat_n(0x85u8, 1_000_000));
    b.push(b'.');
    let e = err(&b);
    assert!(
        e.contains(&format!("deeper than {MAX_DEPTH} levels")),
        "{e}"
    );
    // The limit itself is allowed: exactly MAX_DEPTH levels decode, one more does not.
    let nest = |levels: usize| {
        let mut b = b"\x80\x02N".to_vec();
        b.extend(std::iter::repeat_n(0x85u8, levels));
        b.push(b'.');
        unpickle(&b)
    };
    let ok = nest(MAX_DEPTH as usize).expect("MAX_DEPTH levels");
    assert!(matches!(ok.value(ok.root()), Some(Value::Tuple(t)) if t.len() == 1));
    assert!(nest(MAX_DEPTH as usize + 1).is_err());
}

#[test]
fn two_hundred_thousand_nested_lists_and_dicts_are_errors() {
    const N: usize = 200_000;
    // Inner lists appended to outer ones: `]` N times, then APPEND N - 1 times.
    let mut b = b"\x80\x02".to_vec();
    b.extend(std::iter::repeat_n(b']', N));
    b.extend(std::iter::repeat_n(b'a', N - 1));
    b.push(b'.');
    assert!(err(&b).contains("deeper than"), "lists");
    // Nested dicts: {0: {0: {0: ...}}}.
    let mut b = b"\x80\x02}".to_vec();
    for _ in 0..N {
        b.extend_from_slice(b"K\x00}");
    }
    b.extend(std::iter::repeat_n(b's', N));
    b.push(b'.');
    assert!(err(&b).contains("deeper than"), "dicts");
    // Outer lists filled after they were nested (through the memo), which no running count
    // sees: L0.append(L1); L1.append(L2); ... The final check walks the chain iteratively.
    let mut b = b"\x80\x02]r\x00\x00\x00\x00".to_vec();
    for i in 1..N as u32 {
        b.push(b']');
        b.push(b'r');
        b.extend_from_slice(&i.to_le_bytes());
        b.extend_from_slice(b"a0j"); // append, pop the parent, get the child back
        b.extend_from_slice(&i.to_le_bytes());
    }
    b.extend_from_slice(b"0j\x00\x00\x00\x00.");
    assert!(err(&b).contains("deeper than"), "lists built outside in");
}

#[test]
fn cycles_are_refused_and_shared_values_are_not_cycles() {
    // L = [L], as pickle.dumps writes it: EMPTY_LIST, BINPUT 0, BINGET 0, APPEND.
    let e = err(b"\x80\x02]q\x00h\x00a.");
    assert!(e.contains("cycle") && e.contains("list of 1 items"), "{e}");
    // d = {1: d}, a list through a tuple, and a dict under a key.
    assert!(err(b"\x80\x02}q\x00K\x01h\x00s.").contains("cycle"));
    assert!(err(b"\x80\x02]q\x00h\x00\x85a.").contains("cycle"));
    assert!(err(b"\x80\x02}q\x00h\x00\x85K\x01s.").contains("cycle"));
    // A cycle below the root, and one as MEMOIZE (protocol 4) builds it.
    assert!(err(b"\x80\x02]]q\x00h\x00aa.").contains("cycle"));
    assert!(err(b"\x80\x04]\x94h\x00a.").contains("cycle"));
    // (L, L) shares one list: a DAG, which decodes.
    let p = unpickle(b"\x80\x02]q\x00K\x07ah\x00h\x00\x86.").unwrap();
    let Some(Value::Tuple(t)) = p.value(p.root()) else {
        panic!("not a tuple")
    };
    assert_eq!(t[0], t[1]);
    assert_eq!(p.describe(t[0]), "list of 1 items");
    // A wide DAG whose naive expansion is 2^64 nodes: T_k = (T_{k-1}, T_{k-1}).
    let mut b = b"\x80\x02N".to_vec();
    for _ in 0..64 {
        b.extend_from_slice(b"2\x86");
    }
    b.push(b'.');
    unpickle(&b).unwrap();
}

#[test]
fn truncations_and_huge_lengths_are_errors_without_allocating() {
    // A small but complete pickle: every proper prefix fails cleanly.
    let good = b"\x80\x02}q\x00(X\x04\x00\x00\x00dataq\x01]q\x02(K\x01G?\xf0\x00\x00\x00\x00\x00\x00\x8a\x02\x00\x01C\x02abeX\x06\x00\x00\x00labelsq\x03N\x88\x86u.";
    let p = unpickle(good).expect("the complete pickle");
    let data = p.get(p.root(), "data").unwrap();
    let Some(Value::List(items)) = p.value(data) else {
        panic!("data is not a list")
    };
    let got: Vec<&Value> = items.iter().map(|&r| p.value(r).unwrap()).collect();
    let want = [
        Value::Int(1),
        Value::Float(1.0),
        Value::Int(256),
        Value::Bytes(b"ab".to_vec()),
    ];
    assert_eq!(got, want.iter().collect::<Vec<_>>());
    for cut in 0..good.len() {
        assert!(unpickle(&good[..cut]).is_err(), "prefix of {cut} bytes");
    }
    // Declared lengths far beyond the data: BINBYTES8, BINUNICODE8, BYTEARRAY8, BINBYTES,
    // BINUNICODE, LONG4.
    for b in [
        &b"\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7f"[..],
        b"\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x40abc",
        b"\x80\x05\x96\xff\xff\xff\xff\xff\xff\xff\xff",
        b"\x80\x03B\xff\xff\xff\xff",
        b"\x80\x02X\xff\xff\xff\xffabc",
        b"\x80\x02\x8b\xff\xff\xff\xff\x01",
    ] {
        let e = err(b);
        assert!(e.contains("truncated") || e.contains("overflows"), "{e}");
    }
    // An array whose shape claims 2^40 rows of the bytes it holds, and one that overflows.
    let frombuffer = |shape: &[u8]| {
        cat(&[
            b"\x80\x05\x8c\x13numpy._core.numeric\x8c\x0b_frombuffer\x93(\x96\x04\x00\x00\x00\x00\x00\x00\x00abcd",
            b"\x8c\x05numpy\x8c\x05dtype\x93\x8c\x02u1\x89\x88\x87R",
            shape,
            b"\x8c\x01Ct",
            b"R.",
        ])
    };
    let e = err(&frombuffer(b"\x8a\x06\x00\x00\x00\x00\x00\x01\x85"));
    assert!(
        e.contains("needs 1099511627776 bytes, the pickle holds 4"),
        "{e}"
    );
    let e = err(&frombuffer(
        b"\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x40\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x40\x86",
    ));
    assert!(e.contains("overflows"), "{e}");
    // 100,000 dimensions: refused by count before any message prints them.
    let mut many = b"(".to_vec();
    many.extend(std::iter::repeat_n(b"K\x01".as_slice(), 100_000).flatten());
    many.push(b't');
    let e = err(&frombuffer(&many));
    assert!(e.contains("100000 dimensions") && e.len() < 300, "{e}");
    let p = unpickle(&frombuffer(b"K\x02K\x02\x86")).unwrap();
    let Some(Value::Array(a)) = p.value(p.root()) else {
        panic!("not an array")
    };
    assert_eq!(
        (a.shape.as_slice(), a.data.as_slice()),
        (&[2, 2][..], &b"abcd"[..])
    );
}

#[test]
fn numpy_empty_array_in_protocol_2_decodes() {
    // What `pickle.dumps({'data': np.zeros((0, 3072), np.uint8), 'labels': []}, protocol=2)`
    // writes with NumPy 2: the empty data buffer is `__builtin__.bytes()`.
    let b = b"\x80\x02}q\x00(X\x04\x00\x00\x00dataq\x01cnumpy._core.multiarray\n_reconstruct\nq\x02cnumpy\nndarray\nq\x03K\x00\x85q\x04c_codecs\nencode\nq\x05X\x01\x00\x00\x00bq\x06X\x06\x00\x00\x00latin1q\x07\x86q\x08Rq\t\x87q\nRq\x0b(K\x01K\x00M\x00\x0c\x86q\x0ccnumpy\ndtype\nq\rX\x02\x00\x00\x00u1q\x0e\x89\x88\x87q\x0fRq\x10(K\x03X\x01\x00\x00\x00|q\x11NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tq\x12b\x89c__builtin__\nbytes\nq\x13)Rq\x14tq\x15bX\x06\x00\x00\x00labelsq\x16]q\x17u.";
    let p = unpickle(b).unwrap();
    let data = p.get(p.root(), "data").and_then(|r| p.value(r));
    let Some(Value::Array(a)) = data else {
        panic!("no data array")
    };
    assert_eq!(a.shape, vec![0, 3072]);
    assert!(a.data.is_empty());
    let labels = p.get(p.root(), "labels").and_then(|r| p.value(r));
    assert_eq!(labels, Some(&Value::List(Vec::new())));
}

#[test]
fn error_messages_show_values_shallowly() {
    // A 100 kB string as a REDUCE argument list: the message shows a bounded preview.
    let big = "x".repeat(100_000);
    let b = cat(&[b"\x80\x02c_codecs\nencode\n", &bin_str(&big), b"\x85R."]);
    let e = err(&b);
    assert!(
        e.contains("_codecs.encode") && e.len() < 400,
        "{} chars",
        e.len()
    );
    // A global name of 100 kB is not echoed whole either.
    let b = cat(&[b"\x80\x02c", big.as_bytes(), b"\nx\n."]);
    let e = err(&b);
    assert!(e.contains("refuses") && e.len() < 400, "{} chars", e.len());
}

#[test]
fn protocol_0_text_is_raw_unicode_escape() {
    // Bytes 0x80..0xff are latin-1 characters, `\uXXXX` an escape: what pickle.dumps(..., 0)
    // writes for "café €".
    let p = unpickle(b"(Vcaf\xe9 \\u20ac\np0\nI42\nL7L\nF0.5\nt.").unwrap();
    let Some(Value::Tuple(t)) = p.value(p.root()) else {
        panic!("not a tuple")
    };
    let got: Vec<&Value> = t.iter().map(|&r| p.value(r).unwrap()).collect();
    let want = [
        Value::Str("café €".into()),
        Value::Int(42),
        Value::Int(7),
        Value::Float(0.5),
    ];
    assert_eq!(got, want.iter().collect::<Vec<_>>());
    assert!(err(b"V\\u12\n.").contains("truncated \\u escape"));
    assert!(err(b"V\\uzzzz\n.").contains("bad escape"));
    assert!(err(b"I99999999999999999999\n.").contains("not an i64"));
}
