// The `codes` kernel mode's RMS norm (kernels/norm.py calls it), AVX2 with FMA: per row, the sum of squares as
// 16 lane sums over k = lane (mod 16) in increasing k (two 8-lane registers), then `reduce16`'s fixed horizontal
// sum; then the same IEEE operations per element as the eager form kernels/norm.py recognised. A row's bits never
// depend on the other rows or the thread count.
#include <immintrin.h>

#include "reduce16.h"
#include <math.h>
#include <omp.h>

namespace {

constexpr long SERIAL_ROWS = 64;

inline void row(const float* x, long d, const float* w, float eps, float* out) {
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    for (long k = 0; k < d; k += 16) {
        const __m256 a = _mm256_loadu_ps(x + k), b = _mm256_loadu_ps(x + k + 8);
        lo = _mm256_fmadd_ps(a, a, lo);
        hi = _mm256_fmadd_ps(b, b, hi);
    }
    const float mean = reduce16(lo, hi) / (float)d;
    const __m256 r = _mm256_set1_ps(1.0f / sqrtf(mean + eps));
    for (long k = 0; k < d; k += 8)
        _mm256_storeu_ps(out + k, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + k), r), _mm256_loadu_ps(w + k)));
}

}  // namespace

extern "C" {

int rms_norm(const float* x, long rows, long d, const float* w, float eps, long max_threads, float* out) {
    const int threads = (rows < SERIAL_ROWS || max_threads < 1) ? 1 : (int)max_threads;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long r = 0; r < rows; ++r) row(x + r * d, d, w, eps, out + r * d);
    return 0;
}

}  // extern "C"
