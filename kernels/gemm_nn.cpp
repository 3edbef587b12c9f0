// The `codes` kernel mode's attention-by-values product (kernels/codes_attention.py calls it), AVX2 with FMA:
// out[M, N] = x[M, K] . W[K, N] in fp32 with W row-major (a value cache [keys, head_dim] as it lies), so the
// softmax weights multiply the values without a transposed copy.
//
// What it promises: each output element is one fixed reduction, whatever M, the element's row, the thread count:
// a sum over k in increasing k, each step a fused multiply-add of x[i, k] (broadcast) and W[k, j] (one lane per
// column); the register blocking (6 rows x 2 vectors of 8 columns) never changes it. With `accumulate` the sums
// start at what `out` holds (a product over keys in two pieces gives the bits of one product over them joined).
#include <immintrin.h>
#include <omp.h>

namespace {

constexpr int CV = 2;  // 8-column vectors per tile (16 columns: n % 16 == 0 makes every tile whole)
constexpr int MR = 6;  // rows per register block
constexpr long KC = 128;  // k per chunk
constexpr long SERIAL_NN = 1 << 21;

template <int R>
inline void block(const float* x, long ldx, const float* w, long ldw, long k0, long k1, float* out, long ldo,
                  bool from_out, bool ahead) {
    __m256 acc[R][CV];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < CV; ++j)
            acc[i][j] = from_out ? _mm256_loadu_ps(out + i * ldo + 8 * j) : _mm256_setzero_ps();
    for (long k = k0; k < k1; ++k) {
        if (ahead) _mm_prefetch((const char*)(w + (k + KC) * ldw), _MM_HINT_T1);
        __m256 wv[CV];
        for (int j = 0; j < CV; ++j) wv[j] = _mm256_loadu_ps(w + k * ldw + 8 * j);
        for (int i = 0; i < R; ++i) {
            const __m256 xv = _mm256_set1_ps(x[i * ldx + k]);
            for (int j = 0; j < CV; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < CV; ++j) _mm256_storeu_ps(out + i * ldo + 8 * j, acc[i][j]);
}

inline void rows(const float* x, long ldx, long m, const float* w, long ldw, long k_len, float* out, long ldo,
                 bool accumulate) {
    for (long k0 = 0; k0 < k_len; k0 += KC) {
        const long k1 = k_len - k0 < KC ? k_len : k0 + KC;
        const bool from_out = k0 || accumulate;
        bool ahead = k1 + KC <= k_len;
        long i = 0;
        for (; i + MR <= m; i += MR, ahead = false)
            block<MR>(x + i * ldx, ldx, w, ldw, k0, k1, out + i * ldo, ldo, from_out, ahead);
        const float* xr = x + i * ldx;
        float* o = out + i * ldo;
        switch (m - i) {
            case 5: block<5>(xr, ldx, w, ldw, k0, k1, o, ldo, from_out, ahead); break;
            case 4: block<4>(xr, ldx, w, ldw, k0, k1, o, ldo, from_out, ahead); break;
            case 3: block<3>(xr, ldx, w, ldw, k0, k1, o, ldo, from_out, ahead); break;
            case 2: block<2>(xr, ldx, w, ldw, k0, k1, o, ldo, from_out, ahead); break;
            case 1: block<1>(xr, ldx, w, ldw, k0, k1, o, ldo, from_out, ahead); break;
            default: break;
        }
    }
}

}  // namespace

extern "C" {

// kernels/gemm_nn.cpp's entry point: the same arguments; n % 16 == 0 (checked by the caller).
int gemm_nn(const float* x, long m, long k, long ldx, const float* w, long n, long ldw, long max_threads,
            long accumulate, float* out) {
    const long tiles = n / (8 * CV);
    const int threads = (m * n * k < SERIAL_NN || max_threads < 1) ? 1 : (int)max_threads;
#pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nth = omp_get_num_threads();
        const long lo = tiles * t / nth, hi = tiles * (t + 1) / nth;
        for (long tt = lo; tt < hi; ++tt)
            rows(x, ldx, m, w + 8 * CV * tt, ldw, k, out + 8 * CV * tt, n, accumulate != 0);
    }
    return 0;
}

}  // extern "C"
