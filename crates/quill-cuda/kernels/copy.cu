// copy.cu: strided copy (compaction and setitem), fill, and dtype casts.
//
//   copy_TAG  (const T* src, Layout ls, T* dst, Layout ld, long long n)   + copy32_TAG
//   fill_TAG  (T* dst, Layout ld, T value, long long n)                    + fill32_TAG
//   cast_S_D  (const S* src, Layout ls, D* dst, long long n)  dst contiguous, + cast32_S_D
//
// Copies move storage bits and never convert, so f16/bf16 NaN payloads and -0 survive.
// complex64 / complex128 (c64, c128) have copy and fill kernels but no casts.

// Contiguous copy: 16-byte packs when both ends are 16-byte aligned, then the tail.
template <class S>
QD void copy_contig(const S* src, S* dst, long long n) {
    long long start = 0;
    if (aligned16(src) && aligned16(dst)) {
        const long long V = 16 / sizeof(S);
        const long long np = n / V;
        const Pack<S>* sp = (const Pack<S>*)src;
        Pack<S>* dp = (Pack<S>*)dst;
        GRID_STRIDE(long long, j, np) dp[j] = sp[j];
        start = np * V;
    }
    GRID_STRIDE_FROM(i, start, n) dst[i] = src[i];
}

template <class S, class I>
QD void copy_body(const S* src, const Layout& ls, S* dst, const Layout& ld, long long n) {
    // Uniform across the grid: every thread takes the same branch.
    if (is_contig(ls, n) && is_contig(ld, n)) {
        copy_contig(src + ls.offset, dst + ld.offset, n);
        return;
    }
    if (is_contig(ld, n)) {  // compaction of a strided view: no index math on the store side
        S* d = dst + ld.offset;
        GRID_STRIDE(I, i, n) d[i] = src[offset_at(ls, i)];
        return;
    }
    GRID_STRIDE(I, i, n) dst[offset_at(ld, i)] = src[offset_at(ls, i)];
}

template <class S, class I>
QD void fill_body(S* dst, const Layout& ld, S value, long long n) {
    if (is_contig(ld, n)) {
        S* d = dst + ld.offset;
        long long start = 0;
        if (aligned16(d)) {
            const long long V = 16 / sizeof(S);
            const long long np = n / V;
            Pack<S> p;
#pragma unroll
            for (int k = 0; k < (int)V; ++k) p.v[k] = value;
            GRID_STRIDE(long long, j, np) ((Pack<S>*)d)[j] = p;
            start = np * V;
        }
        GRID_STRIDE_FROM(i, start, n) d[i] = value;
        return;
    }
    GRID_STRIDE(I, i, n) dst[offset_at(ld, i)] = value;
}

// D::from(SD::canon(x)): the conversion rules live in common.cuh beside the dtype tags.
template <class SD, class DD, class I>
QD void cast_body(const typename SD::S* src, const Layout& ls, typename DD::S* dst, long long n) {
    if (is_contig(ls, n)) {
        const typename SD::S* s = src + ls.offset;
        GRID_STRIDE(long long, i, n) dst[i] = DD::from(SD::canon(s[i]));
        return;
    }
    GRID_STRIDE(I, i, n) dst[i] = DD::from(SD::canon(src[offset_at(ls, i)]));
}

#define QUILL_COPY_KERNELS(TAG, D)                                                          \
    extern "C" __global__ void copy_##TAG(const D::S* src, Layout ls, D::S* dst, Layout ld,  \
                                          long long n) {                                    \
        copy_body<D::S, long long>(src, ls, dst, ld, n);                                    \
    }                                                                                       \
    extern "C" __global__ void copy32_##TAG(const D::S* src, Layout ls, D::S* dst, Layout ld, \
                                            long long n) {                                  \
        copy_body<D::S, unsigned int>(src, ls, dst, ld, n);                                 \
    }                                                                                       \
    extern "C" __global__ void fill_##TAG(D::S* dst, Layout ld, D::S value, long long n) {   \
        fill_body<D::S, long long>(dst, ld, value, n);                                      \
    }                                                                                       \
    extern "C" __global__ void fill32_##TAG(D::S* dst, Layout ld, D::S value, long long n) { \
        fill_body<D::S, unsigned int>(dst, ld, value, n);                                   \
    }
QUILL_ALL_TAGS(QUILL_COPY_KERNELS)
QUILL_COMPLEX_TAGS(QUILL_COPY_KERNELS)

#define QUILL_CAST_KERNEL(STAG, SD, DTAG, DD)                                                 \
    extern "C" __global__ void cast_##STAG##_##DTAG(const SD::S* src, Layout ls, DD::S* dst,  \
                                                    long long n) {                            \
        cast_body<SD, DD, long long>(src, ls, dst, n);                                        \
    }                                                                                         \
    extern "C" __global__ void cast32_##STAG##_##DTAG(const SD::S* src, Layout ls, DD::S* dst, \
                                                      long long n) {                          \
        cast_body<SD, DD, unsigned int>(src, ls, dst, n);                                     \
    }
#define QUILL_CAST_FROM(STAG, SD) QUILL_ALL_TAGS2(QUILL_CAST_KERNEL, STAG, SD)
QUILL_ALL_TAGS(QUILL_CAST_FROM)
