// softmax.cu: softmax, log_softmax and logsumexp over the last axis of a CONTIGUOUS [rows, cols]
// buffer. One block per row (grid-stride over rows, so any grid works), block of 256 (any
// multiple of 32 up to 1024); float accumulation for f32/f16/bf16, double for f64.
//
//   softmax_TAG     (const T* x, T* out, long long rows, long long cols)   out: [rows, cols]
//   log_softmax_TAG (const T* x, T* out, long long rows, long long cols)   out: [rows, cols]
//   logsumexp_TAG   (const T* x, T* out, long long rows, long long cols)   out: [rows]
//
// Numerically stable: exponents are taken relative to the row maximum. The maximum and the sum
// of exponentials come from ONE read of the row ("online softmax", Milakov & Gimelshein 2018):
// each thread keeps (m, s) with s = sum exp(x - m) and rescales s when m grows; the output pass
// reads the row a second time. Special rows, as PyTorch: all -inf gives NaN softmax/log_softmax
// and -inf logsumexp; any NaN gives NaN; +inf entries give NaN softmax and +inf logsumexp.

QD float sm_exp(float x) { return expf(x); }
QD double sm_exp(double x) { return exp(x); }
QD float sm_log(float x) { return logf(x); }
QD double sm_log(double x) { return log(x); }
QD float sm_neg_inf(float) { return -qinf_f(); }
QD double sm_neg_inf(double) { return -qinf_d(); }

template <class A>
struct MS {
    A m;  // running maximum (never NaN: a NaN fails every comparison and lands in s)
    A s;  // sum of exp(x - m)
};
template <class A>
QD MS<A> shfl_down(MS<A> p, int o) {
    MS<A> r;
    r.m = shfl_down(p.m, o);
    r.s = shfl_down(p.s, o);
    return r;
}

// Adds element x. -inf adds exactly 0 and is skipped (exp(-inf - -inf) would be NaN); x == m
// adds exactly 1, which also makes a row of several +inf sum to a finite count (logsumexp inf).
template <class A>
QD MS<A> ms_push(MS<A> p, A x) {
    if (x == sm_neg_inf(x)) return p;
    if (x > p.m) {
        p.s = p.s * sm_exp(p.m - x) + A(1);  // first element: m = -inf, s = 0: 0 * 0 + 1
        p.m = x;
    } else if (x == p.m) {
        p.s += A(1);
    } else {
        p.s += sm_exp(x - p.m);  // NaN x ends up here and makes s NaN
    }
    return p;
}

// s rescaled to a maximum m >= p.m; equal maxima (including both infinite) need no exp.
template <class A>
QD A ms_scaled(MS<A> p, A m) { return p.m == m ? p.s : p.s * sm_exp(p.m - m); }

struct MsCombine {
    template <class A> QD MS<A> operator()(MS<A> a, MS<A> b) const {
        MS<A> r;
        r.m = a.m < b.m ? b.m : a.m;
        r.s = ms_scaled(a, r.m) + ms_scaled(b, r.m);
        return r;
    }
};

// MODE 0: softmax, 1: log_softmax, 2: logsumexp.
template <class D, int MODE>
QD void softmax_body(const typename D::S* x, typename D::S* out, long long rows, long long cols) {
    typedef typename D::A A;
    typedef typename D::C C;
    __shared__ A sh_m, sh_s;
    MS<A> id;
    id.m = sm_neg_inf(A(0));
    id.s = A(0);
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const typename D::S* xr = x + row * cols;
        MS<A> p = id;
        for (long long j = threadIdx.x; j < cols; j += blockDim.x)
            p = ms_push(p, (A)D::load(xr[j]));
        p = block_reduce(p, MsCombine(), id);
        if (threadIdx.x == 0) {
            sh_m = p.m;
            sh_s = p.s;
        }
        // Every thread reads sh_* before it can reach the next row's block_reduce barriers, and
        // thread 0 rewrites them only after those: one barrier here is enough.
        __syncthreads();
        const A m = sh_m, s = sh_s;
        if (MODE == 2) {
            if (threadIdx.x == 0) out[row] = D::store((C)(m + sm_log(s)));  // all -inf: -inf
            continue;
        }
        typename D::S* orow = out + row * cols;
        const A ls = sm_log(s);
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
            const A v = (A)D::load(xr[j]);
            // (v - m) - log s, not v - (m + log s): v - m is exact near the maximum.
            orow[j] = D::store((C)(MODE == 0 ? sm_exp(v - m) / s : (v - m) - ls));
        }
    }
}

#define QUILL_SOFTMAX_K(TAG, D)                                                               \
    extern "C" __global__ void softmax_##TAG(const D::S* x, D::S* out, long long rows,         \
                                             long long cols) {                                \
        softmax_body<D, 0>(x, out, rows, cols);                                               \
    }                                                                                         \
    extern "C" __global__ void log_softmax_##TAG(const D::S* x, D::S* out, long long rows,     \
                                                 long long cols) {                            \
        softmax_body<D, 1>(x, out, rows, cols);                                               \
    }                                                                                         \
    extern "C" __global__ void logsumexp_##TAG(const D::S* x, D::S* out, long long rows,       \
                                               long long cols) {                              \
        softmax_body<D, 2>(x, out, rows, cols);                                               \
    }
QUILL_FLOAT_TAGS(QUILL_SOFTMAX_K)
