// optim.cu: fused optimizer updates, one pass over a contiguous parameter, its gradient and
// its state (the CPU rules in quill's optim/adam.rs and optim/sgd.rs, element for element).
// f32 parameters update in f32 and f64 in f64, as on the CPU; scalars arrive already
// converted from the host's f64 arithmetic, as PyTorch converts its scalar arguments.

// Adam / AdamW: m = lerp(m, g, w1); v = v*b2 + w2*g*g; p = p*decay + neg_step*m/(sqrt(v)/bc2+eps).
// `small` picks the lerp form that is exact at weight 0 (PyTorch's), `coupled` adds l2*p to g
// (Adam's weight decay), `decoupled` scales p by `decay` first (AdamW's).
#define QUILL_ADAM(TAG, T)                                                                    \
    extern "C" __global__ void adam_step_##TAG(T* p, const T* g, T* m, T* v, long long n,     \
                                              T neg_step, T bc2_sqrt, T w1, int small, T b2,  \
                                              T w2, T eps, T decay, T l2, int decoupled,      \
                                              int coupled) {                                  \
        GRID_STRIDE(long long, i, n) {                                                        \
            T pv = p[i];                                                                      \
            T gi = coupled ? g[i] + l2 * pv : g[i];                                           \
            if (decoupled) pv = pv * decay;                                                   \
            T mi = m[i];                                                                      \
            mi = small ? mi + w1 * (gi - mi) : gi - (gi - mi) * ((T)1 - w1);                   \
            T vi = v[i] * b2 + w2 * gi * gi;                                                  \
            m[i] = mi;                                                                        \
            v[i] = vi;                                                                        \
            p[i] = pv + neg_step * mi / (sqrt(vi) / bc2_sqrt + eps);                          \
        }                                                                                     \
    }
QUILL_ADAM(f32, float)
QUILL_ADAM(f64, double)

// SGD with momentum buffer `buf` (may be null when momentum is off): g += wd*p (skipped at
// wd = 0, so inf/NaN parameters stay local), buf = first ? g : buf*mom + (1-damp)*g,
// p += neg_lr * (nesterov ? g + mom*buf : buf).
#define QUILL_SGD(TAG, T)                                                                     \
    extern "C" __global__ void sgd_step_##TAG(T* p, const T* g, T* buf, long long n,          \
                                             T neg_lr, T wd, int has_wd, T mom, T keep,       \
                                             int nesterov, int first) {                       \
        GRID_STRIDE(long long, i, n) {                                                        \
            T gi = has_wd ? g[i] + wd * p[i] : g[i];                                          \
            if (buf) {                                                                        \
                T b = first ? gi : buf[i] * mom + keep * gi;                                  \
                buf[i] = b;                                                                   \
                gi = nesterov ? gi + mom * b : b;                                             \
            }                                                                                 \
            p[i] = p[i] + neg_lr * gi;                                                        \
        }                                                                                     \
    }
QUILL_SGD(f32, float)
QUILL_SGD(f64, double)
