// The `codes` kernel mode's RMS norm (kernels/norm.py calls it): out[r] = (x[r] * rsqrt(mean(x[r]^2) + eps)) * w
// for every row r of x [rows, d], in one pass instead of eager's six operators (pow, mean, add, rsqrt, mul,
// mul), where w is the norm's effective weight (Gemma's 1 + weight, others' weight: the caller's).
//
// What it promises: a row's bits depend on that row, w and eps only, never on the row count, the thread count
// or the row's place: the sum of squares is 16 lane sums over k = lane (mod 16) in increasing k, each a fused
// multiply-add, then one fixed horizontal sum (_mm512_reduce_add_ps), as the codes GEMM reduces; then
// mean = sum / d, r = 1 / sqrt(mean + eps), each an IEEE fp32 operation; then (x * r) * w, two roundings.
#include <immintrin.h>
#include <math.h>
#include <omp.h>

namespace {

constexpr long SERIAL_ROWS = 64;  // rows below which one thread beats waking the pool

inline void row(const float* x, long d, const float* w, float eps, float* out) {
    __m512 acc = _mm512_setzero_ps();
    for (long k = 0; k < d; k += 16) {
        const __m512 v = _mm512_loadu_ps(x + k);
        acc = _mm512_fmadd_ps(v, v, acc);
    }
    const float mean = _mm512_reduce_add_ps(acc) / (float)d;
    const __m512 r = _mm512_set1_ps(1.0f / sqrtf(mean + eps));
    for (long k = 0; k < d; k += 16)
        _mm512_storeu_ps(out + k, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + k), r), _mm512_loadu_ps(w + k)));
}

}  // namespace

extern "C" {

// x, out [rows, d] fp32 row-major (out may be x); w [d]; d % 16 == 0 (checked by the caller).
int rms_norm(const float* x, long rows, long d, const float* w, float eps, long max_threads, float* out) {
    const int threads = (rows < SERIAL_ROWS || max_threads < 1) ? 1 : (int)max_threads;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long r = 0; r < rows; ++r) row(x + r * d, d, w, eps, out + r * d);
    return 0;
}

}  // extern "C"
