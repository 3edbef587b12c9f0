// The `codes` kernel mode's GEMM (kernels/codes.py builds and calls it), AVX2 with FMA (AVX-512 CPUs run it too):
// out[M, N] = x[M, K] . W[N, K]^T in fp32, where W is read either as fp32 or as per-group integer codes that decode
// to exactly the same fp32 values (w = q * scale[g], then + offset[g] when there are offsets: the two IEEE
// operations the Python reference `codes.decode` runs, never fused).
//
// What it promises: each output element is one fixed reduction, whatever M, N, the element's row or column, the
// thread count, or whether W came as codes: 16 lane sums over k = lane (mod 16) in increasing k (lanes 0-7 and
// 8-15 in two 8-lane registers), each step a fused multiply-add, then `reduce16`'s fixed horizontal sum. So a
// row's bits never depend on the other rows in the call (a 17-token query and a 256-token prefill chunk agree row
// by row), and coded weights give the fp32 weights' bits while reading ~1.1-1.5 bytes a weight instead of 4.
// Any change to these bits must bump KERNEL_VERSION in kernels/codes.py (tests/test_codes.py pins them).
//
// Work split: threads own contiguous ranges of 4-column tiles (never a split of K); register blocks of 3 rows x
// 2 columns x 2 halves (one row alone: 4 columns), the next tile fetched into L2 while one computes.
#include <immintrin.h>

#include "reduce16.h"
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

namespace {

constexpr int NT = 4;           // columns per tile (decoded together into the buffer)
constexpr int MT = 3;           // rows per register block
constexpr int MB = 64;          // rows per cache block
constexpr long SERIAL = 1 << 22;  // multiply-adds below which one thread beats waking the pool

// 8 weights (lanes k..k+7 of a 16-lane step) from their codes: q * scale, then + offset (never fused).
inline __m256 decode8(const int8_t* q, const float* s, const float* o, int k, int group) {
    const int g = k >> __builtin_ctz(group);
    __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(q + k))));
    __m256 w = _mm256_mul_ps(v, _mm256_set1_ps(s[g]));
    return o ? _mm256_add_ps(w, _mm256_set1_ps(o[g])) : w;
}

inline void decode(const int8_t* q, const float* s, const float* o, int k_len, int group, float* dst) {
    for (int k = 0; k < k_len; k += 8) _mm256_storeu_ps(dst + k, decode8(q, s, o, k, group));
}

// Where a tile's weights come from: fp32 rows, or codes decoded in registers.
// `at(j, k)` is lanes k..k+7 of column j; `from(j0)` the same weights from column j0 on.
struct Fp32Weights {
    const float* const* w;
    inline __m256 at(int j, int k) const { return _mm256_loadu_ps(w[j] + k); }
    inline Fp32Weights from(int j0) const { return {w + j0}; }
};

// The next tile's bytes fetched into L2 while this one computes, spread over this tile's k steps.
struct Ahead {
    const char* p[3];
    long lines[3];
    int count = 0;
    int per_step = 0;
    inline void add(const void* at, long bytes) {
        if (at && bytes > 0) p[count] = (const char*)at, lines[count++] = (bytes + 63) / 64;
    }
    inline void plan(int k_len) {
        long total = 0;
        for (int r = 0; r < count; ++r) total += lines[r];
        const long steps = k_len / 16;
        per_step = count ? (int)((total + steps - 1) / steps) : 0;
    }
    inline void step(int k) const {
        for (int u = 0; u < per_step; ++u) {
            long l = (long)(k >> 4) * per_step + u;
            int r = 0;
            while (r < count && l >= lines[r]) l -= lines[r++];
            if (r < count) _mm_prefetch(p[r] + l * 64, _MM_HINT_T1);
        }
    }
};

struct CodeWeights {
    const int8_t* const* q;
    const float* const* s;
    const float* const* o;
    int group;
    long ahead;
    inline __m256 at(int j, int k) const {
        if ((k & 63) == 0) {
            _mm_prefetch((const char*)(q[j] + ahead + k), _MM_HINT_T0);
            _mm_prefetch((const char*)(q[j] + 2 * ahead + k), _MM_HINT_T1);
        }
        return decode8(q[j], s[j], o[j], k, group);
    }
    inline CodeWeights from(int j0) const { return {q + j0, s + j0, o + j0, group, ahead}; }
};

// R rows x C columns: 16 lane sums over k = lane (mod 16) in increasing k (lanes 0-7 in lo, 8-15 in hi), then
// reduce16.
template <int R, int C, class W>
inline void block(const float* x, long ldx, const W& w, int k_len, float* out, long ldo, const Ahead* ahead) {
    __m256 lo[R][C], hi[R][C];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) lo[i][j] = hi[i][j] = _mm256_setzero_ps();
    for (int k = 0; k < k_len; k += 16) {
        if (ahead) ahead->step(k);
        __m256 wv[C];
        for (int j = 0; j < C; ++j) wv[j] = w.at(j, k);
        for (int i = 0; i < R; ++i) {
            const __m256 xv = _mm256_loadu_ps(x + i * ldx + k);
            for (int j = 0; j < C; ++j) lo[i][j] = _mm256_fmadd_ps(xv, wv[j], lo[i][j]);
        }
        for (int j = 0; j < C; ++j) wv[j] = w.at(j, k + 8);
        for (int i = 0; i < R; ++i) {
            const __m256 xv = _mm256_loadu_ps(x + i * ldx + k + 8);
            for (int j = 0; j < C; ++j) hi[i][j] = _mm256_fmadd_ps(xv, wv[j], hi[i][j]);
        }
    }
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) out[i * ldo + j] = reduce16(lo[i][j], hi[i][j]);
}

template <int C, class W>
inline void rows(const float* x, long ldx, int m, const W& w, int k_len, float* out, long ldo, const Ahead* ahead) {
    int i = 0;
    for (; i + MT <= m; i += MT, ahead = nullptr) block<MT, C>(x + i * ldx, ldx, w, k_len, out + i * ldo, ldo, ahead);
    switch (m - i) {
        case 2: block<2, C>(x + i * ldx, ldx, w, k_len, out + i * ldo, ldo, ahead); break;
        case 1: block<1, C>(x + i * ldx, ldx, w, k_len, out + i * ldo, ldo, ahead); break;
        default: break;
    }
}

// One tile of c <= NT columns: one row alone takes all c at once (4 x 2 accumulators); more rows take them two
// at a time (3 x 2 x 2), the first pair fetching the next tile.
template <class W>
inline void tile(const float* x, long ldx, int m, const W& w, int c, int k_len, float* out, long ldo,
                 const Ahead* ahead) {
    if (m == 1) {
        switch (c) {
            case 4: block<1, 4>(x, ldx, w, k_len, out, ldo, ahead); break;
            case 3: block<1, 3>(x, ldx, w, k_len, out, ldo, ahead); break;
            case 2: block<1, 2>(x, ldx, w, k_len, out, ldo, ahead); break;
            default: block<1, 1>(x, ldx, w, k_len, out, ldo, ahead); break;
        }
        return;
    }
    for (int j0 = 0; j0 < c; j0 += 2, ahead = nullptr) {
        if (c - j0 >= 2)
            rows<2>(x, ldx, m, w.from(j0), k_len, out + j0, ldo, ahead);
        else
            rows<1>(x, ldx, m, w.from(j0), k_len, out + j0, ldo, ahead);
    }
}

struct Weight {
    long n;
    const float* wf;
    const int8_t* q;
    const float* s;
    const float* o;
    long group;
    float* out;
    long ldo;
};

__attribute__((flatten)) void one_tile(const float* x, long k, long r0, int rm, const Weight& W, long c0,
                                       float* buf, const Ahead* ahead) {
    const long n = W.n, groups = k / W.group;
    const int c = (int)(n - c0 < NT ? n - c0 : NT);
    const float* xr = x + r0 * k;
    float* dst = W.out + r0 * W.ldo + c0;
    const int8_t* qj[NT];
    const float *sj[NT], *oj[NT], *wj[NT];
    for (int j = 0; j < c; ++j) {
        const long col = c0 + j;
        if (W.wf) {
            wj[j] = W.wf + col * k;
            continue;
        }
        qj[j] = W.q + col * k;
        sj[j] = W.s + col * groups;
        oj[j] = W.o ? W.o + col * groups : nullptr;
        if (rm > MT) {
            decode(qj[j], sj[j], oj[j], (int)k, (int)W.group, buf + j * k);
            wj[j] = buf + j * k;
        }
    }
    if (!W.wf && rm <= MT)
        tile(xr, k, rm, CodeWeights{qj, sj, oj, (int)W.group, NT * k}, c, (int)k, dst, W.ldo, nullptr);
    else
        tile(xr, k, rm, Fp32Weights{wj}, c, (int)k, dst, W.ldo, ahead);
}

// The weight's column tiles as one range split between the threads, never a split of K; each thread decodes a
// coded tile once per row block into its buffer (more than MT rows) or in registers (MT rows or fewer), and fetches
// the next tile into L2 while this one computes.
void gemm(const float* x, long m, long k, const Weight& W, long max_threads) {
    const long tiles = (W.n + NT - 1) / NT, work = m * W.n * k;
    const int threads = (work < SERIAL || max_threads < 1) ? 1 : (int)max_threads;
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nth = omp_get_num_threads();
        const long lo = tiles * t / nth, hi = tiles * (t + 1) / nth;
        float* buf = W.wf ? nullptr : (float*)aligned_alloc(64, sizeof(float) * NT * k);
        for (long r0 = 0; r0 < m; r0 += MB) {
            const int rm = (int)(m - r0 < MB ? m - r0 : MB);
            for (long tt = lo; tt < hi; ++tt) {
                Ahead ahead;
                if (tt + 1 < hi) {
                    const long c1 = (tt + 1) * NT, cn = W.n - c1 < NT ? W.n - c1 : NT;
                    if (W.wf) {
                        ahead.add(W.wf + c1 * k, cn * k * 4);
                    } else {
                        const long groups = k / W.group;
                        ahead.add(W.q + c1 * k, cn * k);
                        ahead.add(W.s + c1 * groups, cn * groups * 4);
                        ahead.add(W.o ? W.o + c1 * groups : nullptr, cn * groups * 4);
                    }
                    ahead.plan((int)k);
                }
                one_tile(x, k, r0, rm, W, tt * NT, buf, &ahead);
            }
        }
        free(buf);
    }
}

}  // namespace

extern "C" {

// x [m, k] @ W^T -> out [m, n] (row stride ldo), W as fp32 rows (wf) or as codes (q, s, o, group); the caller
// (kernels/codes.py) checks the shapes: k and group multiples of 16, group a power of two dividing k.
int codes_gemm(const float* x, long m, long n, long k, const float* wf, const int8_t* q, const float* s,
               const float* o, long group, long max_threads, float* out, long ldo) {
    gemm(x, m, k, Weight{n, wf, q, s, o, group, out, ldo}, max_threads);
    return 0;
}

}  // extern "C"
