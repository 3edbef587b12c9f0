// The `codes` kernel mode's attention-by-values product (kernels/codes_attention.py calls it): out[M, N] =
// x[M, K] . W[K, N] in fp32 with W row-major (a value cache [keys, head_dim] as it lies), so the softmax weights
// multiply the values without a transposed copy.
//
// What it promises: each output element is one fixed reduction, whatever M, the element's row, the thread count:
// a sum over k in increasing k, each step a fused multiply-add of x[i, k] (broadcast) and W[k, j..j+15] (one
// lane per column). So a row's bits never depend on the other rows in the call (a 17-token query and a 256-token
// prefill chunk agree row by row for the same keys).
//
// Accumulating: with `accumulate`, the sums start at what `out` holds instead of zero, so a product over keys that
// lie in two pieces (a grafted prefix and the query's own rows: kernels/segments.py) is two calls, the second
// continuing the first's sums: the same sum over k in increasing k, the same bits as one call over the keys
// joined (a stored and reloaded float is the same float).
//
// Work split: threads own contiguous ranges of 64-column tiles (never a split of K); within a tile, k in chunks
// of 128 and rows in register blocks of 6 (24 zmm accumulators: 6 rows x 4 vectors of 16 columns).
#include <immintrin.h>
#include <omp.h>

namespace {

constexpr int CV = 4;  // 16-column vectors per tile
constexpr int MR = 6;  // rows per register block
constexpr long KC = 128;  // k per chunk
constexpr long SERIAL_NN = 1 << 21;  // multiply-adds below which one thread beats waking the pool

// Rows x C vectors over k in [k0, k1): the running sums start at zero (`from_out` false) or at what `out` holds
// from the k before (a stored and reloaded float is the same float: chunking k never changes the order of the sum).
// `ahead` (the first row block of a chunk, when another chunk follows): each k-step also fetches the tile's row
// KC further on into L2, so the next chunk's weights are there when its row blocks start (bits never depend on it).
template <int R, int C>
inline void block(const float* x, long ldx, const float* w, long ldw, long k0, long k1, float* out, long ldo,
                  bool from_out, bool ahead) {
    __m512 acc[R][C];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) acc[i][j] = from_out ? _mm512_loadu_ps(out + i * ldo + 16 * j) : _mm512_setzero_ps();
    for (long k = k0; k < k1; ++k) {
        if (ahead)
            for (int j = 0; j < C; ++j) _mm_prefetch((const char*)(w + (k + KC) * ldw + 16 * j), _MM_HINT_T1);
        __m512 wv[C];
        for (int j = 0; j < C; ++j) wv[j] = _mm512_loadu_ps(w + k * ldw + 16 * j);
        for (int i = 0; i < R; ++i) {
            const __m512 xv = _mm512_set1_ps(x[i * ldx + k]);
            for (int j = 0; j < C; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < C; ++j) _mm512_storeu_ps(out + i * ldo + 16 * j, acc[i][j]);
}

// Every row, in register blocks of MR and one block of the rest, over k in chunks of KC (the tile's KC x 64
// weights stay in L1 while the row blocks sweep them).
template <int C>
inline void rows(const float* x, long ldx, long m, const float* w, long ldw, long k_len, float* out, long ldo,
                 bool accumulate) {
    for (long k0 = 0; k0 < k_len; k0 += KC) {
        const long k1 = k_len - k0 < KC ? k_len : k0 + KC;
        const bool from_out = k0 || accumulate;
        bool ahead = k1 + KC <= k_len;  // a whole chunk follows (a shorter last one is left to the hardware)
        long i = 0;
        for (; i + MR <= m; i += MR, ahead = false)
            block<MR, C>(x + i * ldx, ldx, w, ldw, k0, k1, out + i * ldo, ldo, from_out, ahead);
        const float* xr = x + i * ldx;
        float* o = out + i * ldo;
        switch (m - i) {
            case 5: block<5, C>(xr, ldx, w, ldw, k0, k1, o, ldo, from_out, ahead); break;
            case 4: block<4, C>(xr, ldx, w, ldw, k0, k1, o, ldo, from_out, ahead); break;
            case 3: block<3, C>(xr, ldx, w, ldw, k0, k1, o, ldo, from_out, ahead); break;
            case 2: block<2, C>(xr, ldx, w, ldw, k0, k1, o, ldo, from_out, ahead); break;
            case 1: block<1, C>(xr, ldx, w, ldw, k0, k1, o, ldo, from_out, ahead); break;
            default: break;
        }
    }
}

}  // namespace

extern "C" {

// x [m, k] (row stride ldx), w [k, n] (row stride ldw), out [m, n] contiguous; n % 16 == 0 (checked by the caller).
// `accumulate` != 0: out += x . w, each sum continuing from out's value (see the header).
int gemm_nn(const float* x, long m, long k, long ldx, const float* w, long n, long ldw, long max_threads,
            long accumulate, float* out) {
    const long vecs = n / 16, tiles = (vecs + CV - 1) / CV;
    const int threads = (m * n * k < SERIAL_NN || max_threads < 1) ? 1 : (int)max_threads;
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nth = omp_get_num_threads();
        const long lo = tiles * t / nth, hi = tiles * (t + 1) / nth;
        for (long tt = lo; tt < hi; ++tt) {
            const long v0 = tt * CV, c = vecs - v0 < CV ? vecs - v0 : CV;
            const float* wt = w + 16 * v0;
            float* ot = out + 16 * v0;
            switch (c) {
                case 4: rows<4>(x, ldx, m, wt, ldw, k, ot, n, accumulate != 0); break;
                case 3: rows<3>(x, ldx, m, wt, ldw, k, ot, n, accumulate != 0); break;
                case 2: rows<2>(x, ldx, m, wt, ldw, k, ot, n, accumulate != 0); break;
                default: rows<1>(x, ldx, m, wt, ldw, k, ot, n, accumulate != 0); break;
            }
        }
    }
    return 0;
}

}  // extern "C"
