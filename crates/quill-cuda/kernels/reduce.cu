// reduce.cu: reductions over the middle axis of a CONTIGUOUS buffer viewed as [outer, red, inner]
// (the host compacts/permutes first). out has outer * inner elements, contiguous.
//
//   reduce_OP_rows_TAG (const T* x, long long outer, long long red, long long inner, T* out)
//       inner == 1: one block per row (grid-stride over rows), block of 256 (any multiple of 32
//       up to 1024): per-thread partials, warp shuffles, then shared memory across warps.
//   reduce_OP_cols_TAG (same parameters)
//       inner > 1: one thread per (outer, inner) column, grid-stride over outer * inner; the
//       threads of a warp read adjacent columns, so every step over red is a coalesced load.
//   argmax_rows_TAG / argmin_rows_TAG / argmax_cols_TAG / argmin_cols_TAG
//       (const T* x, long long outer, long long red, long long inner, long long* out)
//
// OP: sum prod max min; TAG: f32 f64 f16 bf16 i32 i64. Accumulation (A) is in float for
// f16/bf16/f32, double for f64 and wrapping long long for the integers; the result is stored as
// T. max/min propagate NaN (NumPy). arg*: the first index of the extreme, a NaN counting as the
// extreme for both (NumPy). An empty reduction (red == 0) gives 0 for sum, 1 for prod, the
// identity (-inf/+inf, or the truncated i64 limit) for max/min, and index -1 for arg*; the host
// should reject max/min/arg* of an empty axis as NumPy does.

template <class A> QD A lowest();
template <> QD float lowest<float>() { return -qinf_f(); }
template <> QD double lowest<double>() { return -qinf_d(); }
template <> QD long long lowest<long long>() { return QUILL_LLONG_MIN; }
template <class A> QD A highest();
template <> QD float highest<float>() { return qinf_f(); }
template <> QD double highest<double>() { return qinf_d(); }
template <> QD long long highest<long long>() { return QUILL_LLONG_MAX; }

struct R_sum {
    template <class A> static QD A identity() { return A(0); }
    template <class A> QD A operator()(A a, A b) const { return qadd(a, b); }
};
struct R_prod {
    template <class A> static QD A identity() { return A(1); }
    template <class A> QD A operator()(A a, A b) const { return qmul(a, b); }
};
struct R_max {
    template <class A> static QD A identity() { return lowest<A>(); }
    template <class A> QD A operator()(A a, A b) const { return qmax(a, b); }
};
struct R_min {
    template <class A> static QD A identity() { return highest<A>(); }
    template <class A> QD A operator()(A a, A b) const { return qmin(a, b); }
};

// (value, index) for arg reductions; index -1 marks "no element yet".
template <class A>
struct ArgP {
    A v;
    long long i;
};
template <class A>
QD ArgP<A> shfl_down(ArgP<A> p, int o) {
    ArgP<A> r;
    r.v = shfl_down(p.v, o);
    r.i = shfl_down(p.i, o);
    return r;
}
// The better of two candidates; commutative, so any combination order gives the same answer:
// NaN beats everything, then the larger (smaller) value, then the smaller index.
template <bool MAX>
struct R_arg {
    template <class A> static QD ArgP<A> identity() {
        ArgP<A> p;
        p.v = A(0);
        p.i = -1;
        return p;
    }
    template <class A> QD ArgP<A> operator()(ArgP<A> a, ArgP<A> b) const {
        if (b.i < 0) return a;
        if (a.i < 0) return b;
        const bool an = qisnan(a.v), bn = qisnan(b.v);
        if (an || bn) return (an && bn) ? (b.i < a.i ? b : a) : (an ? a : b);
        if (MAX ? (b.v > a.v) : (b.v < a.v)) return b;
        return (b.v == a.v && b.i < a.i) ? b : a;
    }
};

// An element as a reduction operand: A for plain reductions, ArgP<A> (value, position along
// red) for arg*; and how the result is stored.
template <class D, class A> struct Elem {
    static QD A get(const typename D::S* p, long long) { return (A)D::load(*p); }
    static QD void put(typename D::S* out, long long k, A a) { out[k] = D::store((typename D::C)a); }
};
template <class D, class A> struct Elem<D, ArgP<A> > {
    static QD ArgP<A> get(const typename D::S* p, long long j) {
        ArgP<A> e;
        e.v = (A)D::load(*p);
        e.i = j;
        return e;
    }
    static QD void put(long long* out, long long k, ArgP<A> a) { out[k] = a.i; }
};

// Both strategies walk red with four partial accumulators, to keep four loads in flight.
// inner == 1: block per row, threads stride through the row.
template <class D, class V, class R, class O>
QD void rows_body(const typename D::S* x, long long outer, long long red, O* out) {
    typedef Elem<D, V> E;
    const R r;
    const V id = R::template identity<typename D::A>();
    const long long B = blockDim.x;
    for (long long row = blockIdx.x; row < outer; row += gridDim.x) {
        const typename D::S* xr = x + row * red;
        V a0 = id, a1 = id, a2 = id, a3 = id;
        long long j = threadIdx.x;
        for (; j + 3 * B < red; j += 4 * B) {
            a0 = r(a0, E::get(xr + j, j));
            a1 = r(a1, E::get(xr + j + B, j + B));
            a2 = r(a2, E::get(xr + j + 2 * B, j + 2 * B));
            a3 = r(a3, E::get(xr + j + 3 * B, j + 3 * B));
        }
        for (; j < red; j += B) a0 = r(a0, E::get(xr + j, j));
        const V v = block_reduce(r(r(a0, a1), r(a2, a3)), r, id);
        if (threadIdx.x == 0) E::put(out, row, v);
    }
}

// inner > 1: thread per (outer, inner) column, walking red with stride inner.
template <class D, class V, class R, class O>
QD void cols_body(const typename D::S* x, long long outer, long long red, long long inner,
                  O* out) {
    typedef Elem<D, V> E;
    const R r;
    const V id = R::template identity<typename D::A>();
    GRID_STRIDE(long long, t, outer * inner) {
        const long long o = t / inner;
        const typename D::S* xc = x + o * red * inner + (t - o * inner);
        V a0 = id, a1 = id, a2 = id, a3 = id;
        long long j = 0;
        for (; j + 3 < red; j += 4) {
            a0 = r(a0, E::get(xc + j * inner, j));
            a1 = r(a1, E::get(xc + (j + 1) * inner, j + 1));
            a2 = r(a2, E::get(xc + (j + 2) * inner, j + 2));
            a3 = r(a3, E::get(xc + (j + 3) * inner, j + 3));
        }
        for (; j < red; ++j) a0 = r(a0, E::get(xc + j * inner, j));
        E::put(out, t, r(r(a0, a1), r(a2, a3)));
    }
}

#define QUILL_REDUCE_K(OP, TAG, D)                                                            \
    extern "C" __global__ void reduce_##OP##_rows_##TAG(const D::S* x, long long outer,        \
                                                        long long red, long long inner,       \
                                                        D::S* out) {                          \
        rows_body<D, D::A, R_##OP>(x, outer, red, out);                                       \
    }                                                                                         \
    extern "C" __global__ void reduce_##OP##_cols_##TAG(const D::S* x, long long outer,        \
                                                        long long red, long long inner,       \
                                                        D::S* out) {                          \
        cols_body<D, D::A, R_##OP>(x, outer, red, inner, out);                                \
    }
#define QUILL_ARG_K(OP, MAX, TAG, D)                                                          \
    extern "C" __global__ void OP##_rows_##TAG(const D::S* x, long long outer, long long red,  \
                                               long long inner, long long* out) {             \
        rows_body<D, ArgP<D::A>, R_arg<MAX> >(x, outer, red, out);                            \
    }                                                                                         \
    extern "C" __global__ void OP##_cols_##TAG(const D::S* x, long long outer, long long red,  \
                                               long long inner, long long* out) {             \
        cols_body<D, ArgP<D::A>, R_arg<MAX> >(x, outer, red, inner, out);                     \
    }
#define QUILL_REDUCE_TAG(TAG, D)                                                              \
    QUILL_REDUCE_K(sum, TAG, D) QUILL_REDUCE_K(prod, TAG, D) QUILL_REDUCE_K(max, TAG, D)      \
    QUILL_REDUCE_K(min, TAG, D) QUILL_ARG_K(argmax, true, TAG, D) QUILL_ARG_K(argmin, false, TAG, D)
QUILL_FLOAT_TAGS(QUILL_REDUCE_TAG)
QUILL_REDUCE_TAG(i32, TI32)
QUILL_REDUCE_TAG(i64, TI64)
