// elementwise.cu: unary, binary, scalar, compare and where kernels. Outputs are contiguous; the
// input layouts are already broadcast to the output shape by the host.
//
// Which (op, dtype) kernels exist comes from quill-core's op tables: the host (kernels.rs) puts
// the lists QUILL_UNARY_KERNELS, QUILL_PREDICATE_KERNELS, QUILL_BINARY_KERNELS and
// QUILL_COMPARE_KERNELS (entries M(OP, TAG, TagType)) before this source. Each op needs its
// functor here: QUILL_UNARY(name, expr) (or QUILL_UNARY_MATH(name, floatfn, doublefn) for a
// math function), QUILL_PREDICATE, QUILL_BINARY or QUILL_COMPARE.
//
//   unary_OP_TAG    (const T* x, Layout lx, T* out, long long n)                     + unary32_
//   unary_PRED_TAG  (const T* x, Layout lx, unsigned char* out, long long n)          + unary32_
//                   for the predicates (isnan, logical_not, ...): a bool result
//   binary_OP_TAG   (const T* a, Layout la, const T* b, Layout lb, T* out, long long n) + binary32_
//   compare_OP_TAG  (const T* a, Layout la, const T* b, Layout lb, unsigned char* out, long long n)
//                                                                                    + compare32_
//   scalar_OP_TAG   (const T* a, Layout la, double s, T* out, long long n)   a OP s
//   rscalar_OP_TAG  (const T* a, Layout la, double s, T* out, long long n)   s OP a
//   where_TAG       (const unsigned char* c, Layout lc, const T* a, Layout la, const T* b,
//                    Layout lb, T* out, long long n)                                 + where32_
//
// Values are computed in the tag's compute type C (float for f16/bf16/f32, double for f64).
// Integer arithmetic wraps like NumPy: it goes through unsigned types, since signed overflow is
// undefined in C++ and the optimiser may exploit it.

// ---- scalar helpers, overloaded on the compute type (qadd/qsub/qmul are in common.cuh) ------
QD float qneg(float x) { return -x; }
QD double qneg(double x) { return -x; }
QD int qneg(int x) { return (int)(0u - (unsigned int)x); }  // -INT_MIN wraps to INT_MIN
QD long long qneg(long long x) { return (long long)(0ull - (unsigned long long)x); }
QD unsigned int qneg(unsigned int x) { return 0u - x; }     // u8: -1 == 255, as NumPy
QD unsigned long long qneg(unsigned long long x) { return 0ull - x; }

QD float qabs(float x) { return fabsf(x); }
QD double qabs(double x) { return fabs(x); }
QD int qabs(int x) { return x < 0 ? qneg(x) : x; }
QD long long qabs(long long x) { return x < 0 ? qneg(x) : x; }
QD unsigned int qabs(unsigned int x) { return x; }
QD unsigned long long qabs(unsigned long long x) { return x; }

// sign(+-0) keeps the zero and sign(NaN) is NaN (NumPy); both fall through to `x`.
// x + 0 maps -0 to +0 (NumPy's sign(-0.0) is 0.0) and keeps NaN.
QD float qsign(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x + 0.0f); }
QD double qsign(double x) { return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : x + 0.0); }
QD int qsign(int x) { return (x > 0) - (x < 0); }
QD long long qsign(long long x) { return (x > 0) - (x < 0); }
QD unsigned int qsign(unsigned int x) { return x != 0u; }
QD unsigned long long qsign(unsigned long long x) { return x != 0ull; }

// relu(NaN) is NaN (PyTorch): `x <= 0` is false for NaN.
QD float qrelu(float x) { return x <= 0.0f ? 0.0f : x; }
QD double qrelu(double x) { return x <= 0.0 ? 0.0 : x; }
QD int qrelu(int x) { return x < 0 ? 0 : x; }
QD long long qrelu(long long x) { return x < 0 ? 0 : x; }
QD unsigned int qrelu(unsigned int x) { return x; }
QD unsigned long long qrelu(unsigned long long x) { return x; }

// One name per math function for float and double (f16/bf16 use the float one).
#define QUILL_MATH1(NAME, FF, FD)                        \
    QD float NAME(float x) { return FF(x); }            \
    QD double NAME(double x) { return FD(x); }
QUILL_MATH1(qexp, expf, exp)
QUILL_MATH1(qexp2, exp2f, exp2)
QUILL_MATH1(qlog, logf, log)
QUILL_MATH1(qlog2, log2f, log2)
QUILL_MATH1(qlog1p, log1pf, log1p)
QUILL_MATH1(qexpm1, expm1f, expm1)
QUILL_MATH1(qsqrt, sqrtf, sqrt)
QUILL_MATH1(qrsqrt, rsqrtf, rsqrt)
QUILL_MATH1(qsin, sinf, sin)
QUILL_MATH1(qcos, cosf, cos)
QUILL_MATH1(qtan, tanf, tan)
QUILL_MATH1(qtanh, tanhf, tanh)
QUILL_MATH1(qasin, asinf, asin)
QUILL_MATH1(qacos, acosf, acos)
QUILL_MATH1(qatan, atanf, atan)
QUILL_MATH1(qsinh, sinhf, sinh)
QUILL_MATH1(qcosh, coshf, cosh)
QUILL_MATH1(qasinh, asinhf, asinh)
QUILL_MATH1(qacosh, acoshf, acosh)
QUILL_MATH1(qatanh, atanhf, atanh)
QUILL_MATH1(qerf, erff, erf)
QUILL_MATH1(qfloor, floorf, floor)
QUILL_MATH1(qceil, ceilf, ceil)
QUILL_MATH1(qrint, rintf, rint)  // round half to even, as np.round / torch.round
QUILL_MATH1(qtrunc, truncf, trunc)
// Rounding leaves integers and bool as they are (NumPy).
#define QUILL_INT_IDENTITY(NAME)                            \
    QD int NAME(int x) { return x; }                         \
    QD long long NAME(long long x) { return x; }             \
    QD unsigned int NAME(unsigned int x) { return x; }       \
    QD unsigned long long NAME(unsigned long long x) { return x; } \
    QD bool NAME(bool x) { return x; }
QUILL_INT_IDENTITY(qfloor)
QUILL_INT_IDENTITY(qceil)
QUILL_INT_IDENTITY(qrint)
QUILL_INT_IDENTITY(qtrunc)

// Predicates' helpers (qisnan is in common.cuh); integers and bool are finite and unsigned-like
// where it matters.
QD bool qisinf(float x) { return isinf(x); }
QD bool qisinf(double x) { return isinf(x); }
QD bool qisfinite(float x) { return isfinite(x); }
QD bool qisfinite(double x) { return isfinite(x); }
QD bool qsignbit(float x) { return signbit(x); }
QD bool qsignbit(double x) { return signbit(x); }
QD bool qsignbit(int x) { return x < 0; }
QD bool qsignbit(long long x) { return x < 0; }
#define QUILL_INT_CONST(NAME, V)                            \
    QD bool NAME(int) { return V; }                          \
    QD bool NAME(long long) { return V; }                    \
    QD bool NAME(unsigned int) { return V; }                 \
    QD bool NAME(unsigned long long) { return V; }           \
    QD bool NAME(bool) { return V; }
QUILL_INT_CONST(qisinf, false)
QUILL_INT_CONST(qisfinite, true)
QD bool qsignbit(unsigned int) { return false; }
QD bool qsignbit(unsigned long long) { return false; }
QD bool qsignbit(bool) { return false; }
QD float qpow(float a, float b) { return powf(a, b); }
QD double qpow(double a, double b) { return pow(a, b); }
QD float qatan2(float a, float b) { return atan2f(a, b); }
QD double qatan2(double a, double b) { return atan2(a, b); }

// Integer power by squaring, wrapping. A negative exponent gives the truncated real result
// (1 for base 1, +-1 for base -1, else 0), as PyTorch; NumPy raises instead.
template <class T, class U>
QD T ipow(T base, T e) {
    if (e < 0) return base == 1 ? 1 : (base == -1 ? ((e & 1) ? -1 : 1) : 0);
    U r = 1, b = (U)base;
    for (unsigned long long k = (unsigned long long)e; k != 0; k >>= 1) {
        if (k & 1) r *= b;
        b *= b;
    }
    return (T)r;
}
QD int qpow(int a, int b) { return ipow<int, unsigned int>(a, b); }
QD long long qpow(long long a, long long b) { return ipow<long long, unsigned long long>(a, b); }
QD unsigned int qpow(unsigned int a, unsigned int b) {
    unsigned int r = 1;
    for (; b != 0; b >>= 1, a *= a)
        if (b & 1) r *= a;
    return r;
}
QD unsigned long long qpow(unsigned long long a, unsigned long long b) {
    unsigned long long r = 1;
    for (; b != 0; b >>= 1, a *= a)
        if (b & 1) r *= a;
    return r;
}

// Python's % (the sign of the divisor). Floats follow NumPy's npy_divmod: fmod, then shift by b
// when the signs differ; a zero result takes b's sign; x % 0 is NaN.
QD float qrem(float a, float b) {
    float m = fmodf(a, b);
    if (m != 0.0f) {
        if ((b < 0.0f) != (m < 0.0f)) m += b;
    } else {
        m = copysignf(0.0f, b);
    }
    return m;
}
QD double qrem(double a, double b) {
    double m = fmod(a, b);
    if (m != 0.0) {
        if ((b < 0.0) != (m < 0.0)) m += b;
    } else {
        m = copysign(0.0, b);
    }
    return m;
}
// Integers: x % 0 is 0 (NumPy); x % -1 is 0 (and avoids the INT_MIN % -1 overflow).
template <class T>
QD T irem(T a, T b) {
    if (b == 0 || b == -1) return 0;
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
QD int qrem(int a, int b) { return irem(a, b); }
QD long long qrem(long long a, long long b) { return irem(a, b); }
QD unsigned int qrem(unsigned int a, unsigned int b) { return b == 0u ? 0u : a % b; }
QD unsigned long long qrem(unsigned long long a, unsigned long long b) {
    return b == 0ull ? 0ull : a % b;
}
// NumPy's floor_divide (npy_floor_divide): x // 0 is x / 0 for floats, 0 for integers; the
// quotient of a - fmod(a, b), corrected down when the remainder's sign differs from b's.
#define QUILL_FLOORDIV(T, FMOD, FLOOR, COPYSIGN)                                               \
    QD T qfloordiv(T a, T b) {                                                               \
        if (b == T(0)) return a / b;                                                         \
        T m = FMOD(a, b);                                                                    \
        T div = (a - m) / b;                                                                 \
        if (m != T(0) && ((b < T(0)) != (m < T(0)))) div -= T(1);                            \
        if (div == T(0)) return COPYSIGN(T(0), a / b);                                       \
        T f = FLOOR(div);                                                                    \
        return div - f > T(0.5) ? f + T(1) : f;                                              \
    }
QUILL_FLOORDIV(float, fmodf, floorf, copysignf)
QUILL_FLOORDIV(double, fmod, floor, copysign)
// Integers: MIN // -1 wraps to MIN (negated through unsigned, which is defined).
template <class T>
QD T ifloordiv(T a, T b) {
    if (b == 0) return 0;
    if (b == -1) return T(0ull - (unsigned long long)a);
    T q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
QD int qfloordiv(int a, int b) { return ifloordiv(a, b); }
QD long long qfloordiv(long long a, long long b) { return ifloordiv(a, b); }
QD unsigned int qfloordiv(unsigned int a, unsigned int b) { return b == 0u ? 0u : a / b; }
QD unsigned long long qfloordiv(unsigned long long a, unsigned long long b) {
    return b == 0ull ? 0ull : a / b;
}

// ---- op functors (templates over the compute type) -----------------------------------------
#define QUILL_UNARY(NAME, EXPR) \
    struct U_##NAME { template <class T> QD T operator()(T x) const { return EXPR; } };
// An op that is one math function, given by its float and double versions: defines qNAME and
// the functor (QUILL_UNARY_MATH(log2, log2f, log2) is QUILL_MATH1(qlog2, ...) + QUILL_UNARY).
#define QUILL_UNARY_MATH(NAME, FF, FD) QUILL_MATH1(q##NAME, FF, FD) QUILL_UNARY(NAME, q##NAME(x))
QUILL_UNARY(neg, qneg(x))
QUILL_UNARY(abs, qabs(x))
QUILL_UNARY(sign, qsign(x))
QUILL_UNARY(exp, qexp(x))
QUILL_UNARY(exp2, qexp2(x))
QUILL_UNARY(log, qlog(x))
QUILL_UNARY(log2, qlog2(x))
QUILL_UNARY_MATH(log10, log10f, log10)
QUILL_UNARY(log1p, qlog1p(x))
QUILL_UNARY(expm1, qexpm1(x))
QUILL_UNARY(sqrt, qsqrt(x))
QUILL_UNARY(rsqrt, qrsqrt(x))
QUILL_UNARY(square, qmul(x, x))
QUILL_UNARY(reciprocal, T(1) / x)
QUILL_UNARY(sin, qsin(x))
QUILL_UNARY(cos, qcos(x))
QUILL_UNARY(tan, qtan(x))
QUILL_UNARY(tanh, qtanh(x))
QUILL_UNARY(asin, qasin(x))
QUILL_UNARY(acos, qacos(x))
QUILL_UNARY(atan, qatan(x))
QUILL_UNARY(sinh, qsinh(x))
QUILL_UNARY(cosh, qcosh(x))
QUILL_UNARY(asinh, qasinh(x))
QUILL_UNARY(acosh, qacosh(x))
QUILL_UNARY(atanh, qatanh(x))
QUILL_UNARY(sigmoid, T(1) / (T(1) + qexp(-x)))  // exp overflow gives 1/inf = 0: no NaN
QUILL_UNARY(relu, qrelu(x))
// Exact GELU, x * Phi(x); and the tanh approximation (PyTorch approximate="tanh").
QUILL_UNARY(gelu, T(0.5) * x * (T(1) + qerf(x * T(0.70710678118654752440))))
QUILL_UNARY(gelu_tanh,
            T(0.5) * x * (T(1) + qtanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x))))
QUILL_UNARY(erf, qerf(x))
QUILL_UNARY(floor, qfloor(x))
QUILL_UNARY(ceil, qceil(x))
QUILL_UNARY(round, qrint(x))
QUILL_UNARY(trunc, qtrunc(x))

// Predicates: a bool of the input in its compute type.
#define QUILL_PREDICATE(NAME, EXPR) \
    struct P_##NAME { template <class T> QD bool operator()(T x) const { return EXPR; } };
QUILL_PREDICATE(logical_not, x == T(0))  // NaN is true, so logical_not(NaN) is false
QUILL_PREDICATE(isnan, qisnan(x))
QUILL_PREDICATE(isinf, qisinf(x))
QUILL_PREDICATE(isfinite, qisfinite(x))
QUILL_PREDICATE(signbit, qsignbit(x))

// Shifts as NumPy: by the compute type's width or more (or a negative count) a left shift
// gives 0 and a right shift 0 or -1. Casts to long long keep unsigned compares warning-free;
// the left shift runs unsigned (no UB for negative values) and wraps.
template <class T> QD T qshl(T a, T b) {
    long long n = (long long)b;
    if (n < 0 || n >= (long long)(8 * sizeof(T))) return T(0);
    return T((unsigned long long)a << n);
}
template <class T> QD T qshr(T a, T b) {
    long long n = (long long)b;
    // Sign fill; T(-1) < T(0) keeps unsigned types (u64's top bit included) at 0.
    if (n < 0 || n >= (long long)(8 * sizeof(T))) return (T(-1) < T(0) && (long long)a < 0) ? T(-1) : T(0);
    return T(a >> n);
}

#define QUILL_BINARY(NAME, EXPR) \
    struct B_##NAME { template <class T> QD T operator()(T a, T b) const { return EXPR; } };
QUILL_BINARY(add, qadd(a, b))
QUILL_BINARY(sub, qsub(a, b))
QUILL_BINARY(mul, qmul(a, b))
QUILL_BINARY(div, a / b)
QUILL_BINARY(pow, qpow(a, b))
QUILL_BINARY(maximum, qmax(a, b))
QUILL_BINARY(minimum, qmin(a, b))
QUILL_BINARY(remainder, qrem(a, b))
QUILL_BINARY(floor_divide, qfloordiv(a, b))
QUILL_BINARY(atan2, qatan2(a, b))
QUILL_BINARY(logical_and, a && b)
QUILL_BINARY(logical_or, a || b)
QUILL_BINARY(logical_xor, a != b)
QUILL_BINARY(bitwise_and, T(a & b))
QUILL_BINARY(bitwise_or, T(a | b))
QUILL_BINARY(bitwise_xor, T(a ^ b))
QUILL_BINARY(bitwise_left_shift, qshl(a, b))
QUILL_BINARY(bitwise_right_shift, qshr(a, b))

// Comparisons: IEEE semantics in the compute type (NaN compares unequal; -0 == +0).
#define QUILL_COMPARE(NAME, OP) \
    struct C_##NAME { template <class T> QD bool operator()(T a, T b) const { return a OP b; } };
QUILL_COMPARE(eq, ==)
QUILL_COMPARE(ne, !=)
QUILL_COMPARE(lt, <)
QUILL_COMPARE(le, <=)
QUILL_COMPARE(gt, >)
QUILL_COMPARE(ge, >=)

// ---- kernel bodies -------------------------------------------------------------------------
// out[i] = f(x[i]) over n elements. Contiguous input: 16-byte packs when both pointers are
// aligned (4 floats, 8 halves, 16 bytes per thread and step), then a scalar tail.
template <class D, class I, class F>
QD void map1(const typename D::S* x, const Layout& lx, typename D::S* out, long long n, F f) {
    typedef typename D::S S;
    if (is_contig(lx, n)) {
        const S* xp = x + lx.offset;
        long long start = 0;
        if (aligned16(xp) && aligned16(out)) {
            const int V = 16 / sizeof(S);
            const long long np = n / V;
            GRID_STRIDE(long long, j, np) {
                Pack<S> p = ((const Pack<S>*)xp)[j];
#pragma unroll
                for (int k = 0; k < V; ++k) p.v[k] = D::store(f(D::load(p.v[k])));
                ((Pack<S>*)out)[j] = p;
            }
            start = np * V;
        }
        GRID_STRIDE_FROM(i, start, n) out[i] = D::store(f(D::load(xp[i])));
        return;
    }
    GRID_STRIDE(I, i, n) out[i] = D::store(f(D::load(x[offset_at(lx, i)])));
}

// out[i] = f(a[i], b[i]). Fast path when each operand is contiguous or one broadcast value
// (x + bias-scalar, x * mask): no index math, packed loads for the contiguous ones.
template <class D, class I, class F>
QD void map2(const typename D::S* a, const Layout& la, const typename D::S* b, const Layout& lb,
             typename D::S* out, long long n, F f) {
    typedef typename D::S S;
    typedef typename D::C C;
    if (n <= 0) return;
    const bool sa = is_const(la), sb = is_const(lb);
    if ((sa || is_contig(la, n)) && (sb || is_contig(lb, n))) {
        const S* ap = a + la.offset;
        const S* bp = b + lb.offset;
        const C av = D::load(ap[0]), bv = D::load(bp[0]);  // n > 0: element 0 exists
        long long start = 0;
        if ((sa || aligned16(ap)) && (sb || aligned16(bp)) && aligned16(out)) {
            const int V = 16 / sizeof(S);
            const long long np = n / V;
            GRID_STRIDE(long long, j, np) {
                Pack<S> pa, pb, r;
                if (!sa) pa = ((const Pack<S>*)ap)[j];
                if (!sb) pb = ((const Pack<S>*)bp)[j];
#pragma unroll
                for (int k = 0; k < V; ++k)
                    r.v[k] = D::store(f(sa ? av : D::load(pa.v[k]), sb ? bv : D::load(pb.v[k])));
                ((Pack<S>*)out)[j] = r;
            }
            start = np * V;
        }
        GRID_STRIDE_FROM(i, start, n)
            out[i] = D::store(f(sa ? av : D::load(ap[i]), sb ? bv : D::load(bp[i])));
        return;
    }
    GRID_STRIDE(I, i, n)
        out[i] = D::store(f(D::load(a[offset_at(la, i)]), D::load(b[offset_at(lb, i)])));
}

template <class D, class I, class F>
QD void compare_body(const typename D::S* a, const Layout& la, const typename D::S* b,
                     const Layout& lb, unsigned char* out, long long n, F f) {
    if (is_contig(la, n) && is_contig(lb, n)) {
        const typename D::S* ap = a + la.offset;
        const typename D::S* bp = b + lb.offset;
        GRID_STRIDE(long long, i, n) out[i] = f(D::load(ap[i]), D::load(bp[i])) ? 1 : 0;
        return;
    }
    GRID_STRIDE(I, i, n)
        out[i] = f(D::load(a[offset_at(la, i)]), D::load(b[offset_at(lb, i)])) ? 1 : 0;
}

// out[i] = f(x[i]) ? 1 : 0: the predicates' bool output.
template <class D, class I, class F>
QD void test1(const typename D::S* x, const Layout& lx, unsigned char* out, long long n, F f) {
    if (is_contig(lx, n)) {
        const typename D::S* xp = x + lx.offset;
        GRID_STRIDE(long long, i, n) out[i] = f(D::load(xp[i])) ? 1 : 0;
        return;
    }
    GRID_STRIDE(I, i, n) out[i] = f(D::load(x[offset_at(lx, i)])) ? 1 : 0;
}

// Selects storage bits (no conversion); any nonzero condition byte is true.
template <class S, class I>
QD void where_body(const unsigned char* c, const Layout& lc, const S* a, const Layout& la,
                   const S* b, const Layout& lb, S* out, long long n) {
    if (is_contig(lc, n) && is_contig(la, n) && is_contig(lb, n)) {
        const unsigned char* cp = c + lc.offset;
        const S* ap = a + la.offset;
        const S* bp = b + lb.offset;
        GRID_STRIDE(long long, i, n) out[i] = cp[i] ? ap[i] : bp[i];
        return;
    }
    GRID_STRIDE(I, i, n)
        out[i] = c[offset_at(lc, i)] ? a[offset_at(la, i)] : b[offset_at(lb, i)];
}

// ---- stamping ------------------------------------------------------------------------------
#define QUILL_UNARY_K(OP, TAG, D)                                                            \
    extern "C" __global__ void unary_##OP##_##TAG(const D::S* x, Layout lx, D::S* out,        \
                                                  long long n) {                             \
        map1<D, long long>(x, lx, out, n, U_##OP());                                         \
    }                                                                                        \
    extern "C" __global__ void unary32_##OP##_##TAG(const D::S* x, Layout lx, D::S* out,      \
                                                    long long n) {                           \
        map1<D, unsigned int>(x, lx, out, n, U_##OP());                                      \
    }
#define QUILL_PREDICATE_K(OP, TAG, D)                                                        \
    extern "C" __global__ void unary_##OP##_##TAG(const D::S* x, Layout lx, unsigned char* out, \
                                                  long long n) {                             \
        test1<D, long long>(x, lx, out, n, P_##OP());                                        \
    }                                                                                        \
    extern "C" __global__ void unary32_##OP##_##TAG(const D::S* x, Layout lx,                 \
                                                    unsigned char* out, long long n) {       \
        test1<D, unsigned int>(x, lx, out, n, P_##OP());                                     \
    }
#define QUILL_BINARY_K(OP, TAG, D)                                                           \
    extern "C" __global__ void binary_##OP##_##TAG(const D::S* a, Layout la, const D::S* b,   \
                                                   Layout lb, D::S* out, long long n) {      \
        map2<D, long long>(a, la, b, lb, out, n, B_##OP());                                  \
    }                                                                                        \
    extern "C" __global__ void binary32_##OP##_##TAG(const D::S* a, Layout la, const D::S* b, \
                                                     Layout lb, D::S* out, long long n) {    \
        map2<D, unsigned int>(a, la, b, lb, out, n, B_##OP());                               \
    }
#define QUILL_COMPARE_K(OP, TAG, D)                                                          \
    extern "C" __global__ void compare_##OP##_##TAG(const D::S* a, Layout la, const D::S* b,  \
                                                    Layout lb, unsigned char* out,           \
                                                    long long n) {                           \
        compare_body<D, long long>(a, la, b, lb, out, n, C_##OP());                          \
    }                                                                                        \
    extern "C" __global__ void compare32_##OP##_##TAG(const D::S* a, Layout la,               \
                                                      const D::S* b, Layout lb,              \
                                                      unsigned char* out, long long n) {     \
        compare_body<D, unsigned int>(a, la, b, lb, out, n, C_##OP());                       \
    }
// The scalar is converted to the compute type once (float for f16/bf16/f32), as PyTorch does.
#define QUILL_SCALAR_K(OP, TAG, D)                                                           \
    extern "C" __global__ void scalar_##OP##_##TAG(const D::S* a, Layout la, double s,        \
                                                   D::S* out, long long n) {                 \
        const D::C c = (D::C)s;                                                              \
        map1<D, long long>(a, la, out, n, [=](D::C x) { return B_##OP()(x, c); });           \
    }
#define QUILL_RSCALAR_K(OP, TAG, D)                                                          \
    extern "C" __global__ void rscalar_##OP##_##TAG(const D::S* a, Layout la, double s,       \
                                                    D::S* out, long long n) {                \
        const D::C c = (D::C)s;                                                              \
        map1<D, long long>(a, la, out, n, [=](D::C x) { return B_##OP()(c, x); });           \
    }
#define QUILL_WHERE_K(TAG, D)                                                                \
    extern "C" __global__ void where_##TAG(const unsigned char* c, Layout lc, const D::S* a,  \
                                           Layout la, const D::S* b, Layout lb, D::S* out,   \
                                           long long n) {                                    \
        where_body<D::S, long long>(c, lc, a, la, b, lb, out, n);                            \
    }                                                                                        \
    extern "C" __global__ void where32_##TAG(const unsigned char* c, Layout lc, const D::S* a, \
                                             Layout la, const D::S* b, Layout lb, D::S* out, \
                                             long long n) {                                  \
        where_body<D::S, unsigned int>(c, lc, a, la, b, lb, out, n);                         \
    }

// The table-driven kernels: the lists come from the host (see the top of this file).
QUILL_UNARY_KERNELS(QUILL_UNARY_K)
QUILL_PREDICATE_KERNELS(QUILL_PREDICATE_K)
QUILL_BINARY_KERNELS(QUILL_BINARY_K)
QUILL_COMPARE_KERNELS(QUILL_COMPARE_K)

// a OP s and s OP a for floats (kernels.rs: SCALAR_OPS, RSCALAR_OPS).
#define QUILL_SCALAR_KERNELS(T, D)                                                           \
    QUILL_SCALAR_K(add, T, D) QUILL_SCALAR_K(sub, T, D) QUILL_SCALAR_K(mul, T, D)            \
    QUILL_SCALAR_K(div, T, D) QUILL_SCALAR_K(pow, T, D) QUILL_SCALAR_K(maximum, T, D)        \
    QUILL_SCALAR_K(minimum, T, D)                                                            \
    QUILL_RSCALAR_K(sub, T, D) QUILL_RSCALAR_K(div, T, D) QUILL_RSCALAR_K(pow, T, D)
QUILL_FLOAT_TAGS(QUILL_SCALAR_KERNELS)

QUILL_ALL_TAGS(QUILL_WHERE_K)

// complex64 / complex128: select, + - * / and negation (common.cuh has their arithmetic);
// kernels.rs lists them (COMPLEX_BINARY_OPS, COMPLEX_UNARY_OPS).
#define QUILL_COMPLEX_KERNELS(TAG, D)                                                        \
    QUILL_WHERE_K(TAG, D) QUILL_BINARY_K(add, TAG, D) QUILL_BINARY_K(sub, TAG, D)            \
    QUILL_BINARY_K(mul, TAG, D) QUILL_BINARY_K(div, TAG, D) QUILL_UNARY_K(neg, TAG, D)
QUILL_COMPLEX_TAGS(QUILL_COMPLEX_KERNELS)
