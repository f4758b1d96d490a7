// common.cuh: prepended to every quill-cuda kernel module; each module is ONE NVRTC translation
// unit (this text followed by the module's .cu text). Nothing is #included: CI compiles with no
// include path, so half/bfloat16 conversions, limits and small helpers are written here.
//
// Kernel naming: NAME_TAG, where TAG is the element type (f32 f64 f16 bf16 i8 i16 i32 i64 u8 u16
// u32 u64 bool).
// Elementwise kernels come in pairs: the plain one does its index math in 64 bits; the twin with
// "32" appended to the family word (the text before the first '_': copy32_f32, cast32_f32_f16,
// unary32_exp2_f32, binary32_add_i64, compare32_lt_u8, where32_bool) does it in 32 bits. The
// host may pick a 32-bit kernel only when n <= 2^31 - 1, every element offset of every layout
// is < 2^31, and gridDim.x * blockDim.x <= 2^31 (so no index wraps).

#define QUILL_MAX_DIMS 8

// Passed BY VALUE to kernels; the host mirrors it with #[repr(C)] (144 bytes). Strides are in
// elements, signed, possibly 0 (broadcast) or negative. The host coalesces dims and drops size-1
// dims, so ndim may be 0 (one element at `offset`, or that element broadcast to all n).
struct Layout {
    long long offset;
    int ndim;
    int pad_;
    long long shape[QUILL_MAX_DIMS];
    long long strides[QUILL_MAX_DIMS];
};

#define QD __device__ __forceinline__

// Buffer offset of C-order element `linear`: divide/mod from the last dim. A plain loop over
// ndim (not unrolled over QUILL_MAX_DIMS): the layout stays in the kernel parameter space and
// is read with ld.param at a computed address (no local-memory copy), and each kernel carries
// one division sequence per layout instead of eight, which keeps the modules fast to JIT.
QD long long offset_of(const Layout& l, long long linear) {
    long long off = l.offset;
#pragma unroll 1
    for (int d = l.ndim - 1; d >= 0; --d) {
        // Unsigned: both are non-negative, and div.u64 is cheaper than div.s64.
        long long q = (long long)((unsigned long long)linear / (unsigned long long)l.shape[d]);
        off += (linear - q * l.shape[d]) * l.strides[d];
        linear = q;
    }
    return off;
}

// 32-bit version (see the host contract above). Unsigned division is the cheap one; int is
// enough for the products: every partial sum is itself an element offset (other digits 0).
QD int offset_of32(const Layout& l, unsigned int linear) {
    int off = (int)l.offset;
#pragma unroll 1
    for (int d = l.ndim - 1; d >= 0; --d) {
        unsigned int s = (unsigned int)l.shape[d];
        unsigned int q = linear / s;
        off += (int)(linear - q * s) * (int)l.strides[d];
        linear = q;
    }
    return off;
}

// Overloads so one template body serves both index widths.
QD long long offset_at(const Layout& l, long long i) { return offset_of(l, i); }
QD int offset_at(const Layout& l, unsigned int i) { return offset_of32(l, i); }

// True when element i of the layout is at offset + i for every i < n. ndim == 0 counts only for
// n <= 1 (otherwise it is a broadcast scalar, which the general path handles).
QD bool is_contig(const Layout& l, long long n) {
    if (l.ndim == 0) return n <= 1;
    return l.ndim == 1 && l.strides[0] == 1 && l.shape[0] == n;
}

// All n elements read one value at `offset` (a fully broadcast operand).
QD bool is_const(const Layout& l) {
    return l.ndim == 0 || (l.ndim == 1 && l.strides[0] == 0);
}

QD bool aligned16(const void* p) { return ((unsigned long long)p & 15ull) == 0; }

// Grid-stride loop with index type I (long long, or unsigned int for the 32-bit kernels).
#define GRID_STRIDE(I, i, n)                                                              \
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < (I)(n);                \
         i += (I)blockDim.x * (I)gridDim.x)
// 64-bit grid-stride loop over [start, n): the scalar tail after a vectorised part.
#define GRID_STRIDE_FROM(i, start, n)                                                     \
    for (long long i = (start) + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); \
         i += (long long)blockDim.x * gridDim.x)

// 16 bytes of elements, for vectorised contiguous paths (one 128-bit load/store per pack).
template <class S>
struct alignas(16) Pack {
    S v[16 / sizeof(S)];
};

// ---- half (IEEE binary16) and bfloat16, stored as unsigned short --------------------------

QD float h2f(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
QD unsigned short f2h(float f) {  // round to nearest even; NaN stays NaN; overflow gives inf
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
// Direct f64 -> f16: going through f32 would round twice (a double just above a half-way point
// could land exactly on it in f32 and then round to even, the wrong way).
QD unsigned short d2h(double d) {
    unsigned short h;
    asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d));
    return h;
}
QD float bf2f(unsigned short b) { return __uint_as_float(((unsigned int)b) << 16); }
QD unsigned short f2bf(float f) {  // round to nearest even on the bits
    unsigned int u = __float_as_uint(f);
    // NaN: rounding could carry into the exponent and truncation could leave a zero mantissa
    // (inf), so keep the sign and top payload bits and set the quiet bit.
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);  // may carry into the exponent; above bf16 max -> inf
    return (unsigned short)(u >> 16);
}
// f64 -> bf16 and i64 -> bf16 without double rounding: round toward zero to f32 and set the
// lowest bit when inexact ("round to odd"); f32 keeps 16 more bits than bf16, so the final
// round-to-nearest-even then gives the correctly rounded result.
QD unsigned short d2bf(double d) {
    float f = __double2float_rz(d);
    if ((double)f != d && f == f) f = __uint_as_float(__float_as_uint(f) | 1u);
    return f2bf(f);
}
QD unsigned short ll2bf(long long v) {
    float f = __ll2float_rz(v);
    if ((long long)f != v) f = __uint_as_float(__float_as_uint(f) | 1u);
    return f2bf(f);
}

QD float qinf_f() { return __int_as_float(0x7f800000); }
QD double qinf_d() { return __longlong_as_double(0x7ff0000000000000LL); }
#define QUILL_LLONG_MIN (-9223372036854775807LL - 1)
#define QUILL_LLONG_MAX 9223372036854775807LL

// x86's float -> integer conversions (see the dtype tags below). NaN fails both comparisons.
QD int x86_i32(double v) {
    return (v > -2147483649.0 && v < 2147483648.0) ? (int)v : (int)0x80000000u;
}
QD long long x86_i64(double v) {
    return (v >= -9223372036854775808.0 && v < 9223372036854775808.0) ? (long long)v
                                                                       : QUILL_LLONG_MIN;
}
QD unsigned int x86_u32(double v) {
    return v >= 2147483648.0 ? (unsigned int)x86_i32(v - 2147483648.0) ^ 0x80000000u
                             : (unsigned int)x86_i32(v);
}
QD unsigned long long x86_u64(double v) {
    return v >= 9223372036854775808.0
               ? (unsigned long long)x86_i64(v - 9223372036854775808.0) ^ (1ull << 63)
               : (unsigned long long)x86_i64(v);
}
QD unsigned short ull2bf(unsigned long long v) {
    float f = __ull2float_rz(v);
    if ((unsigned long long)f != v) f = __uint_as_float(__float_as_uint(f) | 1u);
    return f2bf(f);
}

// ---- dtype tags ----------------------------------------------------------------------------
// S: storage type; C: compute type of elementwise ops (f16/bf16 compute in float); A: reduction
// accumulator. load/store convert S <-> C. canon() gives the value in one of five canonical
// types (float, double, long long, unsigned long long, bool) and from() converts each of them to
// S with NumPy's cast semantics on x86-64, the same as the CPU backend's (quill-core's dtype
// module): float -> i32/i64 truncates toward zero and gives the minimum for NaN or out of range
// (cvttsd2si's "integer indefinite"); float -> i8/u8/i16/u16 keeps the low bits of that i32
// result; float -> u32/u64 is the compiler's unsigned conversion (from 2^31, resp. 2^63, up:
// subtract it, convert signed, flip the top bit); int -> int wraps; anything -> bool is x != 0;
// bool -> number is 0/1; rounding to f16/bf16 is to nearest even.

struct TF32 {
    typedef float S; typedef float C; typedef float A;
    static QD C load(S v) { return v; }
    static QD S store(C v) { return v; }
    static QD float canon(S v) { return v; }
    static QD S from(float v) { return v; }
    static QD S from(double v) { return (float)v; }
    static QD S from(long long v) { return (float)v; }
    static QD S from(unsigned long long v) { return (float)v; }
    static QD S from(bool v) { return v ? 1.0f : 0.0f; }
};
struct TF64 {
    typedef double S; typedef double C; typedef double A;
    static QD C load(S v) { return v; }
    static QD S store(C v) { return v; }
    static QD double canon(S v) { return v; }
    static QD S from(float v) { return (double)v; }
    static QD S from(double v) { return v; }
    static QD S from(long long v) { return (double)v; }
    static QD S from(unsigned long long v) { return (double)v; }
    static QD S from(bool v) { return v ? 1.0 : 0.0; }
};
struct TF16 {
    typedef unsigned short S; typedef float C; typedef float A;
    static QD C load(S v) { return h2f(v); }
    static QD S store(C v) { return f2h(v); }
    static QD float canon(S v) { return h2f(v); }
    static QD S from(float v) { return f2h(v); }
    static QD S from(double v) { return d2h(v); }
    // Correctly rounded: integers below 65520 (the f16 overflow threshold) are exact in f32, and
    // every larger one rounds to >= 65520 in f32 and so to inf either way.
    static QD S from(long long v) { return f2h((float)v); }
    static QD S from(unsigned long long v) { return f2h((float)v); }
    static QD S from(bool v) { return v ? (S)0x3c00 : (S)0; }
};
struct TBF16 {
    typedef unsigned short S; typedef float C; typedef float A;
    static QD C load(S v) { return bf2f(v); }
    static QD S store(C v) { return f2bf(v); }
    static QD float canon(S v) { return bf2f(v); }
    static QD S from(float v) { return f2bf(v); }
    static QD S from(double v) { return d2bf(v); }
    static QD S from(long long v) { return ll2bf(v); }
    static QD S from(unsigned long long v) { return ull2bf(v); }
    static QD S from(bool v) { return v ? (S)0x3f80 : (S)0; }
};
// An integer tag: storage S, compute type C (at least 32 bits: narrow types compute there and
// wrap when stored), canonical type K (long long, or unsigned long long for u64), and the
// float -> S conversion FROMF.
#define QUILL_INT_TAG(NAME, SS, CC, KK, FROMF)                                                \
    struct NAME {                                                                             \
        typedef SS S; typedef CC C; typedef long long A;                                      \
        static QD C load(S v) { return v; }                                                   \
        static QD S store(C v) { return (S)v; }                                               \
        static QD KK canon(S v) { return (KK)v; }                                             \
        static QD S from(float v) { return (S)FROMF((double)v); }                             \
        static QD S from(double v) { return (S)FROMF(v); }                                    \
        static QD S from(long long v) { return (S)v; }                                        \
        static QD S from(unsigned long long v) { return (S)v; }                               \
        static QD S from(bool v) { return v ? 1 : 0; }                                        \
    };
QUILL_INT_TAG(TI8, signed char, int, long long, x86_i32)
QUILL_INT_TAG(TI16, short, int, long long, x86_i32)
QUILL_INT_TAG(TI32, int, int, long long, x86_i32)
QUILL_INT_TAG(TI64, long long, long long, long long, x86_i64)
QUILL_INT_TAG(TU8, unsigned char, unsigned int, long long, x86_i32)
QUILL_INT_TAG(TU16, unsigned short, unsigned int, long long, x86_i32)
// NumPy's half -> uint32 loop goes through int64 (NaN and infinities give 0); from a half
// this tag sees only the float value, so NaN and out-of-range halves get the f32 route's
// answer on a GPU (the CPU gives NumPy's). In-range values agree.
QUILL_INT_TAG(TU32, unsigned int, unsigned int, long long, x86_u32)
QUILL_INT_TAG(TU64, unsigned long long, unsigned long long, unsigned long long, x86_u64)
struct TBool {  // one byte, 0 or 1; any nonzero byte reads as true
    typedef unsigned char S; typedef bool C; typedef long long A;
    static QD C load(S v) { return v != 0; }
    static QD S store(C v) { return v ? 1 : 0; }
    static QD bool canon(S v) { return v != 0; }
    static QD S from(float v) { return v != 0.0f; }  // NaN != 0: true, as in NumPy
    static QD S from(double v) { return v != 0.0; }
    static QD S from(long long v) { return v != 0; }
    static QD S from(unsigned long long v) { return v != 0; }
    static QD S from(bool v) { return v ? 1 : 0; }
};

// Stamping lists: M(TAG, TagType) for each dtype; the *2 variant carries two extra arguments
// through, so that one list can be nested in another (a macro cannot expand inside itself).
#define QUILL_ALL_TAGS(M)                                                                  \
    M(f32, TF32) M(f64, TF64) M(f16, TF16) M(bf16, TBF16) M(i32, TI32) M(i64, TI64) M(u8, TU8) \
    M(bool, TBool) M(i8, TI8) M(i16, TI16) M(u16, TU16) M(u32, TU32) M(u64, TU64)
#define QUILL_ALL_TAGS2(M, X, XD)                                                         \
    M(X, XD, f32, TF32) M(X, XD, f64, TF64) M(X, XD, f16, TF16) M(X, XD, bf16, TBF16)        \
    M(X, XD, i32, TI32) M(X, XD, i64, TI64) M(X, XD, u8, TU8) M(X, XD, bool, TBool)           \
    M(X, XD, i8, TI8) M(X, XD, i16, TI16) M(X, XD, u16, TU16) M(X, XD, u32, TU32)             \
    M(X, XD, u64, TU64)
#define QUILL_FLOAT_TAGS(M) M(f32, TF32) M(f64, TF64) M(f16, TF16) M(bf16, TBF16)

// ---- NaN-aware helpers shared by elementwise, reduce and softmax ---------------------------
QD bool qisnan(float x) { return x != x; }
QD bool qisnan(double x) { return x != x; }
QD bool qisnan(int) { return false; }
QD bool qisnan(long long) { return false; }
QD bool qisnan(unsigned int) { return false; }
QD bool qisnan(unsigned long long) { return false; }
QD bool qisnan(bool) { return false; }
// Wrapping integer arithmetic, as NumPy: through unsigned types, since signed overflow is
// undefined in C++ and the optimiser may exploit it. Float overloads for uniform use.
#define QUILL_ARITH(NAME, OP)                                                                 \
    QD float NAME(float a, float b) { return a OP b; }                                        \
    QD double NAME(double a, double b) { return a OP b; }                                     \
    QD int NAME(int a, int b) { return (int)((unsigned int)a OP (unsigned int)b); }           \
    QD long long NAME(long long a, long long b) {                                              \
        return (long long)((unsigned long long)a OP (unsigned long long)b);                   \
    }                                                                                         \
    QD unsigned int NAME(unsigned int a, unsigned int b) { return a OP b; }                   \
    QD unsigned long long NAME(unsigned long long a, unsigned long long b) { return a OP b; }
QUILL_ARITH(qadd, +)
QUILL_ARITH(qsub, -)
QUILL_ARITH(qmul, *)

// ---- complex64 / complex128 ------------------------------------------------------------------
// Two parts, real first (C99's and NumPy's layout; the host passes a fill value as the u64 /
// u128 of those bytes). Arithmetic as the CPU's: products by the schoolbook formula, quotients
// by Smith's method (scaled by the larger part of the divisor; x / 0 divides each part by zero).
// Only copies, fills, where, + - * / and negation have kernels; the host sends every other
// complex op through the CPU.
struct __align__(8) qc64 { float re, im; };
struct __align__(16) qc128 { double re, im; };
QD qc64 qcx(float re, float im) { qc64 z; z.re = re; z.im = im; return z; }
QD qc128 qcx(double re, double im) { qc128 z; z.re = re; z.im = im; return z; }
#define QUILL_COMPLEX_ARITH(Z, R)                                                              \
    QD Z qadd(Z a, Z b) { return qcx(a.re + b.re, a.im + b.im); }                             \
    QD Z qsub(Z a, Z b) { return qcx(a.re - b.re, a.im - b.im); }                             \
    QD Z qmul(Z a, Z b) { return qcx(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re); }  \
    QD Z qneg(Z a) { return qcx(-a.re, -a.im); }                                               \
    QD Z operator/(Z a, Z b) {                                                                 \
        const R br = b.re, bi = b.im;                                                          \
        const R abr = br < R(0) ? -br : br, abi = bi < R(0) ? -bi : bi;                        \
        if (abr >= abi) {                                                                      \
            if (br == R(0) && bi == R(0)) return qcx(a.re / abr, a.im / abr);                  \
            const R r = bi / br, d = br + bi * r;                                              \
            return qcx((a.re + a.im * r) / d, (a.im - a.re * r) / d);                          \
        }                                                                                      \
        const R r = br / bi, d = br * r + bi;                                                  \
        return qcx((a.re * r + a.im) / d, (a.im * r - a.re) / d);                              \
    }
QUILL_COMPLEX_ARITH(qc64, float)
QUILL_COMPLEX_ARITH(qc128, double)
struct TC64 {
    typedef qc64 S; typedef qc64 C;
    static QD C load(S v) { return v; }
    static QD S store(C v) { return v; }
};
struct TC128 {
    typedef qc128 S; typedef qc128 C;
    static QD C load(S v) { return v; }
    static QD S store(C v) { return v; }
};
#define QUILL_COMPLEX_TAGS(M) M(c64, TC64) M(c128, TC128)

// NumPy maximum/minimum: a NaN in either operand gives NaN (the first one seen).
template <class T> QD T qmax(T a, T b) { return qisnan(a) ? a : (qisnan(b) ? b : (a < b ? b : a)); }
template <class T> QD T qmin(T a, T b) { return qisnan(a) ? a : (qisnan(b) ? b : (b < a ? b : a)); }

// Warp shuffles for the block reductions (blockDim.x must be a multiple of 32, at most 1024).
QD float shfl_down(float v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
QD double shfl_down(double v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }
QD long long shfl_down(long long v, int o) { return __shfl_down_sync(0xffffffffu, v, o); }

// Block-wide reduction with combine f and identity id (shfl_down must exist for T); the result
// is valid in thread 0. Requires blockDim.x % 32 == 0 (at most 1024). Safe to call in a loop.
template <class T, class F>
QD T block_reduce(T v, F f, T id) {
    __shared__ T sh[32];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = f(v, shfl_down(v, o));
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : id;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v = f(v, shfl_down(v, o));
    }
    __syncthreads();  // sh is written again for the block's next row
    return v;
}
