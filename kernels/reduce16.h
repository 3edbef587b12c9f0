// The codes kernels' fixed horizontal sum of 16 lane sums held as two 8-lane registers [lo | hi]: lane i+8 +
// lane i, then i+4 + i, then i + i^2, then lane 0 + lane 1 (the order of GCC's _mm512_reduce_add_ps, so these
// bits equal the retired AVX-512 build's). Included by codes_gemm.cpp and rms_norm.cpp.
#pragma once
#include <immintrin.h>

inline float reduce16(__m256 lo, __m256 hi) {
    const __m256 t3 = _mm256_add_ps(hi, lo);
    const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    const __m128 t8 = _mm_add_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtss_f32(t8) + _mm_cvtss_f32(_mm_shuffle_ps(t8, t8, _MM_SHUFFLE(1, 1, 1, 1)));
}
