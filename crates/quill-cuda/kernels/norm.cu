// norm.cu: RMS normalisation over the last axis of a CONTIGUOUS [rows, cols] buffer (the CUDA
// kernel of the fused op rms_norm; quill-array/src/fused/rms_norm.rs defines the op). One block
// per row (grid-stride over rows, so any grid works), block of 256 (any multiple of 32 up to
// 1024); float accumulation for f32, double for f64.
//
//   rms_norm_TAG (const T* x, const T* w, T* y, T* rstd, long long rows, long long cols,
//                 double eps)       y: [rows, cols] = x * rstd * w, rstd: [rows]
//
// rstd = 1 / sqrt(mean(x^2) + eps), the statistic the backward reads.

struct NormAdd {
    template <class A> QD A operator()(A a, A b) const { return a + b; }
};

QD float nm_rsqrt(float x) { return 1.0f / sqrtf(x); }
QD double nm_rsqrt(double x) { return 1.0 / sqrt(x); }

template <class D>
QD void rms_norm_body(const typename D::S* x, const typename D::S* w, typename D::S* y,
                      typename D::S* rstd, long long rows, long long cols, double eps) {
    typedef typename D::A A;
    typedef typename D::C C;
    __shared__ A sh_r;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const typename D::S* xr = x + row * cols;
        A s = A(0);
        for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
            const A v = (A)D::load(xr[j]);
            s += v * v;
        }
        s = block_reduce(s, NormAdd(), A(0));
        if (threadIdx.x == 0) {
            const A r = nm_rsqrt(s / (A)cols + (A)eps);
            sh_r = r;
            rstd[row] = D::store((C)r);
        }
        // Every thread reads sh_r before it can reach the next row's block_reduce barriers,
        // and thread 0 rewrites it only after those: one barrier here is enough.
        __syncthreads();
        const A r = sh_r;
        typename D::S* yr = y + row * cols;
        for (long long j = threadIdx.x; j < cols; j += blockDim.x)
            yr[j] = D::store((C)((A)D::load(xr[j]) * r * (A)D::load(w[j])));
    }
}

#define QUILL_RMS_NORM_K(TAG, D)                                                              \
    extern "C" __global__ void rms_norm_##TAG(const D::S* x, const D::S* w, D::S* y,           \
                                              D::S* rstd, long long rows, long long cols,     \
                                              double eps) {                                   \
        rms_norm_body<D>(x, w, y, rstd, rows, cols, eps);                                     \
    }
QUILL_RMS_NORM_K(f32, TF32)
QUILL_RMS_NORM_K(f64, TF64)
