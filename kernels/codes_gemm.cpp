// The `codes` kernel mode's GEMM (kernels/codes.py builds and calls it): out[M, N] = x[M, K] . W[N, K]^T in
// fp32, where W is read either as fp32 or as per-group integer codes that decode to exactly the same fp32
// values (w = q * scale[g], then + offset[g] when there are offsets: the two IEEE operations the Python
// reference `codes.decode` runs, so decoding is bit-exact by construction and checked by torch.equal).
//
// What it promises: each output element is one fixed reduction, whatever M, N, the element's row or column,
// the thread count, or whether W came as codes: 16 lane sums over k = lane (mod 16) in increasing k, each a
// fused multiply-add, then one fixed horizontal sum (_mm512_reduce_add_ps). So a row's bits never depend on
// the other rows in the call (a 17-token query and a 256-token prefill chunk agree row by row), and the
// coded weights give the fp32 weights' bits while reading ~1.1-1.5 bytes a weight instead of 4.
//
// Work split: threads own contiguous column ranges (never a split of K); a thread decodes 4 columns at a
// time into its own buffer and runs them against every row, in row blocks of 6 (24 zmm accumulators); with
// at most 6 rows it decodes in registers instead, straight into the multiply-adds (decode-sized calls).
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

namespace {

constexpr int NT = 4;           // columns per tile
constexpr int MT = 6;           // rows per register block
constexpr int MB = 64;          // rows per cache block (x block stays in L2 while the columns sweep it)
constexpr long SERIAL = 1 << 22;  // multiply-adds below which one thread beats waking the pool

// 16 weights from their codes: q * scale, then + offset (two IEEE operations; never fused).
inline __m512 decode16(const int8_t* q, const float* s, const float* o, int k, int group) {
    __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(q + k))));
    __m512 w = _mm512_mul_ps(v, _mm512_set1_ps(s[k / group]));
    return o ? _mm512_add_ps(w, _mm512_set1_ps(o[k / group])) : w;
}

inline void decode(const int8_t* q, const float* s, const float* o, int k_len, int group, float* dst) {
    for (int k = 0; k < k_len; k += 16) _mm512_storeu_ps(dst + k, decode16(q, s, o, k, group));
}

// Few rows (m <= MT): the codes are decoded in registers, once, straight into the multiply-adds.
template <int R, int C>
inline void block_codes(const float* x, long ldx, const int8_t* const* q, const float* const* s,
                        const float* const* o, int k_len, int group, float* out, long ldo) {
    __m512 acc[R][C];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) acc[i][j] = _mm512_setzero_ps();
    for (int k = 0; k < k_len; k += 16) {
        __m512 wv[C];
        for (int j = 0; j < C; ++j) wv[j] = decode16(q[j], s[j], o[j], k, group);
        for (int i = 0; i < R; ++i) {
            __m512 xv = _mm512_loadu_ps(x + i * ldx + k);
            for (int j = 0; j < C; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) out[i * ldo + j] = _mm512_reduce_add_ps(acc[i][j]);
}

template <int C>
inline void few_rows(const float* x, long ldx, int m, const int8_t* const* q, const float* const* s,
                     const float* const* o, int k_len, int group, float* out, long ldo) {
    switch (m) {
        case 6: block_codes<6, C>(x, ldx, q, s, o, k_len, group, out, ldo); break;
        case 5: block_codes<5, C>(x, ldx, q, s, o, k_len, group, out, ldo); break;
        case 4: block_codes<4, C>(x, ldx, q, s, o, k_len, group, out, ldo); break;
        case 3: block_codes<3, C>(x, ldx, q, s, o, k_len, group, out, ldo); break;
        case 2: block_codes<2, C>(x, ldx, q, s, o, k_len, group, out, ldo); break;
        default: block_codes<1, C>(x, ldx, q, s, o, k_len, group, out, ldo); break;
    }
}

template <int R, int C>
inline void block(const float* x, long ldx, const float* const* w, int k_len, float* out, long ldo) {
    __m512 acc[R][C];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) acc[i][j] = _mm512_setzero_ps();
    for (int k = 0; k < k_len; k += 16) {
        __m512 wv[C];
        for (int j = 0; j < C; ++j) wv[j] = _mm512_loadu_ps(w[j] + k);
        for (int i = 0; i < R; ++i) {
            __m512 xv = _mm512_loadu_ps(x + i * ldx + k);
            for (int j = 0; j < C; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) out[i * ldo + j] = _mm512_reduce_add_ps(acc[i][j]);
}

template <int C>
inline void rows(const float* x, long ldx, int m, const float* const* w, int k_len, float* out, long ldo) {
    int i = 0;
    for (; i + MT <= m; i += MT) block<MT, C>(x + i * ldx, ldx, w, k_len, out + i * ldo, ldo);
    switch (m - i) {
        case 5: block<5, C>(x + i * ldx, ldx, w, k_len, out + i * ldo, ldo); break;
        case 4: block<4, C>(x + i * ldx, ldx, w, k_len, out + i * ldo, ldo); break;
        case 3: block<3, C>(x + i * ldx, ldx, w, k_len, out + i * ldo, ldo); break;
        case 2: block<2, C>(x + i * ldx, ldx, w, k_len, out + i * ldo, ldo); break;
        case 1: block<1, C>(x + i * ldx, ldx, w, k_len, out + i * ldo, ldo); break;
        default: break;
    }
}

inline void tile(const float* x, int m, int k_len, const float* const* w, int c, float* out, long n) {
    switch (c) {
        case 4: rows<4>(x, k_len, m, w, k_len, out, n); break;
        case 3: rows<3>(x, k_len, m, w, k_len, out, n); break;
        case 2: rows<2>(x, k_len, m, w, k_len, out, n); break;
        default: rows<1>(x, k_len, m, w, k_len, out, n); break;
    }
}

}  // namespace

extern "C" {

// x [m, k] fp32 row-major; out [m, n]. Weights: `wf` [n, k] fp32, or (wf == NULL) codes `q` [n, k] int8
// with `s` [n, k / group] scales and `o` (NULL: none) offsets. k % 16 == 0, group in {16, 32, ...} dividing k
// (checked by the caller). At most `max_threads` threads (one below SERIAL work: bits never depend on it).
int codes_gemm(const float* x, long m, long n, long k, const float* wf, const int8_t* q, const float* s,
               const float* o, long group, long max_threads, float* out) {
    const long tiles = (n + NT - 1) / NT;
    const int threads = (m * n * k < SERIAL || max_threads < 1) ? 1 : (int)max_threads;
    const long groups = k / group;
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nth = omp_get_num_threads();
        const long lo = tiles * t / nth, hi = tiles * (t + 1) / nth;
        float* buf = wf ? nullptr : (float*)aligned_alloc(64, sizeof(float) * NT * k);
        for (long r0 = 0; r0 < m; r0 += MB) {
            const int rm = (int)(m - r0 < MB ? m - r0 : MB);
            for (long tt = lo; tt < hi; ++tt) {
                const long c0 = tt * NT;
                const int c = (int)(n - c0 < NT ? n - c0 : NT);
                if (!wf && rm <= MT) {  // decode in registers
                    const int8_t* qj[NT];
                    const float *sj[NT], *oj[NT];
                    for (int j = 0; j < c; ++j) {
                        const long col = c0 + j;
                        qj[j] = q + col * k;
                        sj[j] = s + col * groups;
                        oj[j] = o ? o + col * groups : nullptr;
                    }
                    float* dst = out + r0 * n + c0;
                    const float* xr = x + r0 * k;
                    switch (c) {
                        case 4: few_rows<4>(xr, k, rm, qj, sj, oj, (int)k, (int)group, dst, n); break;
                        case 3: few_rows<3>(xr, k, rm, qj, sj, oj, (int)k, (int)group, dst, n); break;
                        case 2: few_rows<2>(xr, k, rm, qj, sj, oj, (int)k, (int)group, dst, n); break;
                        default: few_rows<1>(xr, k, rm, qj, sj, oj, (int)k, (int)group, dst, n); break;
                    }
                    continue;
                }
                const float* w[NT];
                for (int j = 0; j < c; ++j) {
                    const long col = c0 + j;
                    if (wf) {
                        w[j] = wf + col * k;
                    } else {
                        decode(q + col * k, s + col * groups, o ? o + col * groups : nullptr, (int)k, (int)group,
                               buf + j * k);
                        w[j] = buf + j * k;
                    }
                }
                tile(x + r0 * k, rm, (int)k, w, c, out + r0 * n + c0, n);
            }
        }
        free(buf);
    }
    return 0;
}

// The decode alone (for the lossless check against the loaded fp32 weights): dst [n, k].
int codes_decode(long n, long k, const int8_t* q, const float* s, const float* o, long group, float* dst) {
    const long groups = k / group;
    for (long col = 0; col < n; ++col)
        decode(q + col * k, s + col * groups, o ? o + col * groups : nullptr, (int)k, (int)group, dst + col * k);
    return 0;
}

}  // extern "C"
