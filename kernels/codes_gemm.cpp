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
// `group` is a power of two (checked by the caller): its index is a shift, not a division in the inner loop.
inline __m512 decode16(const int8_t* q, const float* s, const float* o, int k, int group) {
    const int g = k >> __builtin_ctz(group);
    __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(q + k))));
    __m512 w = _mm512_mul_ps(v, _mm512_set1_ps(s[g]));
    return o ? _mm512_add_ps(w, _mm512_set1_ps(o[g])) : w;
}

inline void decode(const int8_t* q, const float* s, const float* o, int k_len, int group, float* dst) {
    for (int k = 0; k < k_len; k += 16) _mm512_storeu_ps(dst + k, decode16(q, s, o, k, group));
}

// Where a tile's weights come from: fp32 rows (loaded), or codes (decoded in registers, straight into the
// multiply-adds). Either gives the same 16 values for (column j, k), so the reduction below is one code path.
struct Fp32Weights {
    const float* const* w;  // [C] column pointers
    inline __m512 at(int j, int k) const { return _mm512_loadu_ps(w[j] + k); }
};

// The next tile's bytes (its codes, scales and offsets, or its fp32 columns: up to 3 contiguous regions),
// fetched into L2 while this tile computes, a few lines at each k-step of its first row block: otherwise each
// tile waits on its own weights' misses (a short call's rows are too few to hide them). Bits never depend on it.
struct Ahead {
    const char* p[3];
    long lines[3];
    int count = 0;
    int per_step = 0;  // lines fetched at each k-step
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
    long ahead;  // bytes from a column's codes to the next tile's same column: prefetched one and two tiles ahead
    inline __m512 at(int j, int k) const {  // (a one-row call streams the codes: without it, half the read rate)
        if ((k & 63) == 0) {
            _mm_prefetch((const char*)(q[j] + ahead + k), _MM_HINT_T0);
            _mm_prefetch((const char*)(q[j] + 2 * ahead + k), _MM_HINT_T1);
        }
        return decode16(q[j], s[j], o[j], k, group);
    }
};

// The horizontal sums of four accumulators (one row's four columns), each with the very additions of
// _mm512_reduce_add_ps (GCC's: lane i + lane i+8, then i + i+4, then i + i+2, then i + i+1, high half first
// where it puts it first), so the same bits, but the four share their shuffles and adds: levels 1-2 here.
inline __m512 halves4(__m512 a, __m512 b, __m512 c, __m512 d) {
    const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)),
                                    _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)));  // [a_hi+a_lo | b_hi+b_lo]
    const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)),
                                    _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)),
                         _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)));  // 128-bit block g: column g's 4
}

// Two rows' four columns (levels 3-4 shared): out_a[0..3], out_b[0..3].
inline void sums8(const __m512* a, const __m512* b, float* out_a, float* out_b) {
    const __m512 ra = halves4(a[0], a[1], a[2], a[3]), rb = halves4(b[0], b[1], b[2], b[3]);
    // level 3, per block: [a0+a2, a1+a3, b0+b2, b1+b3]; level 4: lane 0 a0+a1, lane 2 b0+b1
    const __m512 t = _mm512_add_ps(_mm512_shuffle_ps(ra, rb, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm512_shuffle_ps(ra, rb, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 u = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m512 v = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0), u);
    _mm_storeu_ps(out_a, _mm512_castps512_ps128(v));
    _mm_storeu_ps(out_b, _mm256_extractf128_ps(_mm512_castps512_ps256(v), 1));
}

// One row's four columns.
inline void sums4(const __m512* a, float* out) {
    const __m512 r = halves4(a[0], a[1], a[2], a[3]);
    const __m512 t = _mm512_add_ps(r, _mm512_permute_ps(r, _MM_SHUFFLE(1, 0, 3, 2)));
    const __m512 u = _mm512_add_ps(t, _mm512_permute_ps(t, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m512 v = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), u);
    _mm_storeu_ps(out, _mm512_castps512_ps128(v));
}

// R rows x C columns: 16 lane sums over k = lane (mod 16) in increasing k, then one fixed horizontal sum.
template <int R, int C, class W>
inline void block(const float* x, long ldx, const W& w, int k_len, float* out, long ldo, const Ahead* ahead) {
    __m512 acc[R][C];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) acc[i][j] = _mm512_setzero_ps();
    for (int k = 0; k < k_len; k += 16) {
        if (ahead) ahead->step(k);
        __m512 wv[C];
        for (int j = 0; j < C; ++j) wv[j] = w.at(j, k);
        for (int i = 0; i < R; ++i) {
            __m512 xv = _mm512_loadu_ps(x + i * ldx + k);
            for (int j = 0; j < C; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    if constexpr (C == 4) {  // the same sums, shared shuffles (sums8, sums4)
        int i = 0;
        for (; i + 2 <= R; i += 2) sums8(acc[i], acc[i + 1], out + i * ldo, out + (i + 1) * ldo);
        if (i < R) sums4(acc[i], out + i * ldo);
    } else {
        for (int i = 0; i < R; ++i)
            for (int j = 0; j < C; ++j) out[i * ldo + j] = _mm512_reduce_add_ps(acc[i][j]);
    }
}

// Every row, in register blocks of MT and one block of the rest (the first block fetches the next tile's bytes).
template <int C, class W>
inline void rows(const float* x, long ldx, int m, const W& w, int k_len, float* out, long ldo, const Ahead* ahead) {
    int i = 0;
    for (; i + MT <= m; i += MT, ahead = nullptr) block<MT, C>(x + i * ldx, ldx, w, k_len, out + i * ldo, ldo, ahead);
    const float* xr = x + i * ldx;
    float* o = out + i * ldo;
    switch (m - i) {
        case 5: block<5, C>(xr, ldx, w, k_len, o, ldo, ahead); break;
        case 4: block<4, C>(xr, ldx, w, k_len, o, ldo, ahead); break;
        case 3: block<3, C>(xr, ldx, w, k_len, o, ldo, ahead); break;
        case 2: block<2, C>(xr, ldx, w, k_len, o, ldo, ahead); break;
        case 1: block<1, C>(xr, ldx, w, k_len, o, ldo, ahead); break;
        default: break;
    }
}

// One tile of c <= NT columns (c known at run time, C at compile time).
template <class W>
inline void tile(const float* x, long ldx, int m, const W& w, int c, int k_len, float* out, long ldo,
                 const Ahead* ahead) {
    switch (c) {
        case 4: rows<4>(x, ldx, m, w, k_len, out, ldo, ahead); break;
        case 3: rows<3>(x, ldx, m, w, k_len, out, ldo, ahead); break;
        case 2: rows<2>(x, ldx, m, w, k_len, out, ldo, ahead); break;
        default: rows<1>(x, ldx, m, w, k_len, out, ldo, ahead); break;
    }
}

// One weight of a call: [n, k] as fp32 `wf`, or (wf == NULL) codes `q` with scales `s` and offsets `o`; out [m, n].
struct Weight {
    long n;
    const float* wf;
    const int8_t* q;
    const float* s;
    const float* o;
    long group;
    float* out;
    long ldo;  // out's row stride (n, or wider: a column slice of a bigger output)
};

// One tile of weight W: columns [c0, c0 + NT) (fewer at its end) against rows [r0, r0 + rm), rm <= MB.
// Flattened: every call below is inlined into it, as the one-weight kernel was compiled (an out-of-line
// weight read per 16 weights halves a one-row call's rate).
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
        if (rm > MT) {  // decoded once into the buffer, then read by every row block
            decode(qj[j], sj[j], oj[j], (int)k, (int)W.group, buf + j * k);
            wj[j] = buf + j * k;
        }
    }
    if (!W.wf && rm <= MT)  // one row block: decoded in registers
        tile(xr, k, rm, CodeWeights{qj, sj, oj, (int)W.group, NT * k}, c, (int)k, dst, W.ldo, nullptr);
    else
        tile(xr, k, rm, Fp32Weights{wj}, c, (int)k, dst, W.ldo, ahead);
}

// Every weight's columns, in tiles of NT, as one range split between the threads (never a split of K): which
// thread runs a tile, and beside which other weights, never changes an element's reduction.
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
            long first = 0;  // the first tile of weight wi
            for (long tt = lo; tt < hi; ++tt) {
                while (tt >= first + (ws[wi].n + NT - 1) / NT) first += (ws[wi].n + NT - 1) / NT, ++wi;
                Ahead ahead;
                if (tt + 1 < hi) {  // the next tile: this weight's next columns, or the next weight's first
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

// x [m, k] fp32 row-major; out [m, n] with row stride ldo >= n. Weights: `wf` [n, k] fp32, or (wf == NULL) codes
// `q` [n, k] int8 with `s` [n, k / group] scales and `o` (NULL: none) offsets. k % 16 == 0, group a power of two
// >= 16 dividing k (checked by the caller). At most `max_threads` threads (one below SERIAL work: bits never
// depend on it).
int codes_gemm(const float* x, long m, long n, long k, const float* wf, const int8_t* q, const float* s,
               const float* o, long group, long max_threads, float* out, long ldo) {
    const Weight w{n, wf, q, s, o, group, out, ldo};
    gemm_many(x, m, k, &w, 1, max_threads);
    return 0;
}

// `count` weights on the same x in one call (a layer's q/k/v, or gate/up): weight i as in `codes_gemm`, from
// the i-th entry of each array, into outs[i] [m, ns[i]]. Each output's bits are those of its own call.
int codes_gemm_many(const float* x, long m, long k, long count, const long* ns, const float* const* wfs,
                    const int8_t* const* qs, const float* const* ss, const float* const* os, const long* groups,
                    long max_threads, float* const* outs) {
    if (count < 1 || count > 8) return 1;
    Weight ws[8];
    for (long i = 0; i < count; ++i) ws[i] = Weight{ns[i], wfs[i], qs[i], ss[i], os[i], groups[i], outs[i], ns[i]};
    gemm_many(x, m, k, ws, (int)count, max_threads);
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
