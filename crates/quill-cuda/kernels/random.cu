// random.cu: counter-based random numbers from Philox4x32-10 (Salmon et al., SC'11), the
// generator of cuRAND's curand_Philox4x32_10 and PyTorch's CUDA generator. Stateless: the same
// (seed, offset) gives the same numbers for any launch configuration.
//
//   philox_uniform_TAG (T* out, long long n, unsigned long long seed, unsigned long long offset)
//   philox_normal_TAG  (T* out, long long n, unsigned long long seed, unsigned long long offset)
//   dropout_mask_TAG   (T* out, long long n, unsigned long long seed, unsigned long long offset,
//                       float p)
//   TAG: f32 f64 f16 bf16.
//
// Stream: key = (seed low word, seed high word); the 128-bit counter value offset + k (carry
// into the third word) yields 32-bit words 4k..4k+3 (x, y, z, w) of the stream.
//   uniform f32/f16/bf16 and dropout: element i <- word i, 24 bits: (word >> 8) * 2^-24 in
//     [0, 1). f16/bf16 round that toward zero so no value can round up to 1.0.
//   uniform f64: element i <- words 2i (high) and 2i+1, 53 bits * 2^-53 in [0, 1).
//   normal (Box-Muller): elements 2j, 2j+1 <- r cos(2 pi u2), r sin(2 pi u2) with
//     r = sqrt(-2 log u1), u1 in (0, 1] from word 2j, u2 in [0, 1) from word 2j+1 (f32/f16/bf16);
//     for f64, u1 from words 4j, 4j+1 and u2 from words 4j+2, 4j+3 (53 bits each).
//   dropout: out[i] = (u_i >= p) ? 1/(1-p) : 0 with the 24-bit u_i of the f32 uniform stream,
//     so the mask is the same for every dtype; p == 1 gives all zeros.
// Counter values used (the host advances its offset by at least this): ceil(n / 4) for
// f32/f16/bf16 uniform, normal and every dropout; ceil(n / 2) for f64 uniform and normal.

struct U4 {
    unsigned int x, y, z, w;
};

QD U4 philox4x32_10(unsigned long long ctr_lo, unsigned int ctr_hi, unsigned long long seed) {
    unsigned int c0 = (unsigned int)ctr_lo, c1 = (unsigned int)(ctr_lo >> 32), c2 = ctr_hi, c3 = 0;
    unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)(seed >> 32);
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {  // key schedule: bumped between rounds, as curand_Philox4x32_10
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        const unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        const unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    U4 r = {c0, c1, c2, c3};
    return r;
}

QD float u24(unsigned int w) { return (float)(w >> 8) * 5.9604644775390625e-8f; }  // [0, 1)
QD float u24_open0(unsigned int w) {  // (0, 1]: Box-Muller's log argument
    return (float)((w >> 8) + 1u) * 5.9604644775390625e-8f;
}
QD double u53(unsigned int hi, unsigned int lo) {
    return (double)((((unsigned long long)hi << 32) | lo) >> 11) * 1.1102230246251565e-16;
}
QD double u53_open0(unsigned int hi, unsigned int lo) {
    return (double)(((((unsigned long long)hi << 32) | lo) >> 11) + 1ull) * 1.1102230246251565e-16;
}
QD unsigned short f2h_rz(float f) {
    unsigned short h;
    asm("cvt.rz.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
QD unsigned short f2bf_rz(float f) { return (unsigned short)(__float_as_uint(f) >> 16); }

// sincospi(2 u) is accurate for the whole range; sincos(2 pi u) would round 2 pi u first.
QD void box_muller(float u1, float u2, float& z0, float& z1) {
    const float r = sqrtf(-2.0f * logf(u1));
    float s, c;
    sincospif(2.0f * u2, &s, &c);
    z0 = r * c;
    z1 = r * s;
}
QD void box_muller(double u1, double u2, double& z0, double& z1) {
    const double r = sqrt(-2.0 * log(u1));
    double s, c;
    sincospi(2.0 * u2, &s, &c);
    z0 = r * c;
    z1 = r * s;
}

// K consecutive elements, stored with one vector store when whole and aligned.
template <class S, int K>
struct alignas(K * sizeof(S) > 16 ? 16 : K * sizeof(S)) Chunk {
    S v[K];
};

// Counter value k (k = 0, 1, ...) fills elements [K k, K k + K) through gen(words, chunk).
template <class S, int K, class G>
QD void philox_fill(S* out, long long n, unsigned long long seed, unsigned long long offset, G gen) {
    if (n <= 0) return;
    const long long chunks = (n - 1) / K + 1;
    GRID_STRIDE(long long, k, chunks) {
        const unsigned long long lo = offset + (unsigned long long)k;
        const U4 w = philox4x32_10(lo, lo < offset ? 1u : 0u, seed);  // 128-bit carry
        Chunk<S, K> c;
        gen(w, c.v);
        const long long base = k * K;
        if (base + K <= n && ((unsigned long long)(out + base) % alignof(Chunk<S, K>)) == 0) {
            *(Chunk<S, K>*)(out + base) = c;
        } else {
            for (int j = 0; j < K && base + j < n; ++j) out[base + j] = c.v[j];
        }
    }
}

// ---- uniform ---------------------------------------------------------------------------------
#define QUILL_UNIFORM24(TAG, T, CONV)                                                          \
    extern "C" __global__ void philox_uniform_##TAG(T* out, long long n, unsigned long long seed, \
                                                    unsigned long long offset) {                \
        philox_fill<T, 4>(out, n, seed, offset, [](U4 w, T(&v)[4]) {                            \
            v[0] = CONV(u24(w.x));                                                              \
            v[1] = CONV(u24(w.y));                                                              \
            v[2] = CONV(u24(w.z));                                                              \
            v[3] = CONV(u24(w.w));                                                              \
        });                                                                                     \
    }
#define QUILL_IDENTITY(x) (x)
QUILL_UNIFORM24(f32, float, QUILL_IDENTITY)
QUILL_UNIFORM24(f16, unsigned short, f2h_rz)
QUILL_UNIFORM24(bf16, unsigned short, f2bf_rz)

extern "C" __global__ void philox_uniform_f64(double* out, long long n, unsigned long long seed,
                                              unsigned long long offset) {
    philox_fill<double, 2>(out, n, seed, offset, [](U4 w, double(&v)[2]) {
        v[0] = u53(w.x, w.y);
        v[1] = u53(w.z, w.w);
    });
}

// ---- normal ----------------------------------------------------------------------------------
// Computed in float, then rounded to nearest by the tag's store.
#define QUILL_NORMAL24(TAG, D)                                                                 \
    extern "C" __global__ void philox_normal_##TAG(D::S* out, long long n,                      \
                                                   unsigned long long seed,                     \
                                                   unsigned long long offset) {                 \
        philox_fill<D::S, 4>(out, n, seed, offset, [](U4 w, D::S(&v)[4]) {                      \
            float z0, z1, z2, z3;                                                               \
            box_muller(u24_open0(w.x), u24(w.y), z0, z1);                                       \
            box_muller(u24_open0(w.z), u24(w.w), z2, z3);                                       \
            v[0] = D::store(z0);                                                                \
            v[1] = D::store(z1);                                                                \
            v[2] = D::store(z2);                                                                \
            v[3] = D::store(z3);                                                                \
        });                                                                                     \
    }
QUILL_NORMAL24(f32, TF32)
QUILL_NORMAL24(f16, TF16)
QUILL_NORMAL24(bf16, TBF16)

extern "C" __global__ void philox_normal_f64(double* out, long long n, unsigned long long seed,
                                             unsigned long long offset) {
    philox_fill<double, 2>(out, n, seed, offset, [](U4 w, double(&v)[2]) {
        box_muller(u53_open0(w.x, w.y), u53(w.z, w.w), v[0], v[1]);
    });
}

// ---- dropout mask ----------------------------------------------------------------------------
// The scale is computed in the compute type (double for f64) and rounded once by store.
#define QUILL_DROPOUT(TAG, D)                                                                  \
    extern "C" __global__ void dropout_mask_##TAG(D::S* out, long long n,                       \
                                                  unsigned long long seed,                      \
                                                  unsigned long long offset, float p) {         \
        const D::S scale = D::store(D::C(1) / (D::C(1) - (D::C)p));                             \
        const D::S zero = D::store(D::C(0));                                                    \
        philox_fill<D::S, 4>(out, n, seed, offset, [=](U4 w, D::S(&v)[4]) {                     \
            v[0] = u24(w.x) >= p ? scale : zero;                                                \
            v[1] = u24(w.y) >= p ? scale : zero;                                                \
            v[2] = u24(w.z) >= p ? scale : zero;                                                \
            v[3] = u24(w.w) >= p ? scale : zero;                                                \
        });                                                                                     \
    }
QUILL_FLOAT_TAGS(QUILL_DROPOUT)
