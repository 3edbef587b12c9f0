// The codes GEMM on a CPU without AVX-512 (kernels/codes.py builds this folder there, or under
// GALAHAD_CODES_ISA=avx2): kernels/codes_gemm.cpp's entry points, promise and bits, with AVX2 and FMA.
//
// The same bits: each output element is the very reduction of the AVX-512 build, operation for operation. Its 16
// lane sums over k = lane (mod 16) in increasing k live in two 8-lane registers (lanes 0-7 and 8-15), each step
// the same fused multiply-add per lane; then `reduce16` runs _mm512_reduce_add_ps's additions (GCC's
// avx512fintrin.h __MM512_REDUCE_OP: lanes i+8 + i, then i+4 + i, then i + i+2, then lane 0 + lane 1, operands
// in its order). The decode is the same two IEEE operations per weight. Only the register blocking differs (16
// ymm registers: 3 rows x 2 columns x 2 halves), and that never changes an element's reduction. So on one CPU
// this build and the AVX-512 build give the same bytes (tests/test_codes_avx2.py runs both).
//
// What is not ISA-specific (`Ahead`, `Weight`, the tile walk, the entry points) is kernels/codes_gemm.cpp's,
// copied rather than shared: that file's bytes are its build id, which every codes artifact's runtime
// fingerprint holds, so editing it to include a shared header would make every AVX-512 machine's codes
// artifacts foreign (`catalog recompile`) for no change in bits. The next change that must rebuild it anyway
// moves those parts into one header both include.
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

// Where a tile's weights come from (as in the AVX-512 build): fp32 rows, or codes decoded in registers.
// `at(j, k)` is lanes k..k+7 of column j; `from(j0)` the same weights from column j0 on.
struct Fp32Weights {
    const float* const* w;
    inline __m256 at(int j, int k) const { return _mm256_loadu_ps(w[j] + k); }
    inline Fp32Weights from(int j0) const { return {w + j0}; }
};

// The next tile's bytes fetched into L2 while this one computes (kernels/codes_gemm.cpp's `Ahead`).
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

// As kernels/codes_gemm.cpp's: every weight's tiles as one range split between the threads, never a split of K.
void gemm_many(const float* x, long m, long k, const Weight* ws, int count, long max_threads) {
    long tiles = 0, work = 0;
    for (int i = 0; i < count; ++i) tiles += (ws[i].n + NT - 1) / NT, work += m * ws[i].n * k;
    bool coded = false;
    for (int i = 0; i < count; ++i) coded = coded || !ws[i].wf;
    const int threads = (work < SERIAL || max_threads < 1) ? 1 : (int)max_threads;
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nth = omp_get_num_threads();
        const long lo = tiles * t / nth, hi = tiles * (t + 1) / nth;
        float* buf = coded ? (float*)aligned_alloc(64, sizeof(float) * NT * k) : nullptr;
        for (long r0 = 0; r0 < m; r0 += MB) {
            const int rm = (int)(m - r0 < MB ? m - r0 : MB);
            int wi = 0;
            long first = 0;
            for (long tt = lo; tt < hi; ++tt) {
                while (tt >= first + (ws[wi].n + NT - 1) / NT) first += (ws[wi].n + NT - 1) / NT, ++wi;
                Ahead ahead;
                if (tt + 1 < hi) {
                    const bool same = tt + 1 < first + (ws[wi].n + NT - 1) / NT;
                    const Weight& N = same ? ws[wi] : ws[wi + 1];
                    const long c1 = same ? (tt + 1 - first) * NT : 0, cn = N.n - c1 < NT ? N.n - c1 : NT;
                    if (N.wf) {
                        ahead.add(N.wf + c1 * k, cn * k * 4);
                    } else {
                        const long groups = k / N.group;
                        ahead.add(N.q + c1 * k, cn * k);
                        ahead.add(N.s + c1 * groups, cn * groups * 4);
                        ahead.add(N.o ? N.o + c1 * groups : nullptr, cn * groups * 4);
                    }
                    ahead.plan((int)k);
                }
                one_tile(x, k, r0, rm, ws[wi], (tt - first) * NT, buf, &ahead);
            }
        }
        free(buf);
    }
}

}  // namespace

extern "C" {

// The entry points of kernels/codes_gemm.cpp, the same arguments and checks (the caller's).
int codes_gemm(const float* x, long m, long n, long k, const float* wf, const int8_t* q, const float* s,
               const float* o, long group, long max_threads, float* out, long ldo) {
    const Weight w{n, wf, q, s, o, group, out, ldo};
    gemm_many(x, m, k, &w, 1, max_threads);
    return 0;
}

int codes_gemm_many(const float* x, long m, long k, long count, const long* ns, const float* const* wfs,
                    const int8_t* const* qs, const float* const* ss, const float* const* os, const long* groups,
                    long max_threads, float* const* outs) {
    if (count < 1 || count > 8) return 1;
    Weight ws[8];
    for (long i = 0; i < count; ++i) ws[i] = Weight{ns[i], wfs[i], qs[i], ss[i], os[i], groups[i], outs[i], ns[i]};
    gemm_many(x, m, k, ws, (int)count, max_threads);
    return 0;
}

int codes_decode(long n, long k, const int8_t* q, const float* s, const float* o, long group, float* dst) {
    const long groups = k / group;
    for (long col = 0; col < n; ++col)
        decode(q + col * k, s + col * groups, o ? o + col * groups : nullptr, (int)k, (int)group, dst + col * k);
    return 0;
}

}  // extern "C"
