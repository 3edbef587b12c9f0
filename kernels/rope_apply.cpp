// The `codes` kernel mode's rotary embedding (kernels/codes_layers.py calls it): eager's three IEEE operations
// per element (rotate-half, x * cos + rotated * sin), in its order, never fused, in 8-lane vectors.
#include <immintrin.h>

extern "C" {

int rope_apply(const float* x, long b, long h, long t, long d, const float* cos, const float* sin, float* out) {
    const long half = d / 2, vec = half - half % 8;
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000));
    for (long bi = 0; bi < b; ++bi)
        for (long hi = 0; hi < h; ++hi)
            for (long ti = 0; ti < t; ++ti) {
                const long row = (bi * h + hi) * t + ti;
                const float* xr = x + row * d;
                const float* c = cos + (bi * t + ti) * d;
                const float* s = sin + (bi * t + ti) * d;
                float* o = out + row * d;
                long i = 0;
                for (; i < vec; i += 8) {
                    const __m256 lo = _mm256_loadu_ps(xr + i), hi_ = _mm256_loadu_ps(xr + half + i);
                    const __m256 nhi = _mm256_xor_ps(hi_, sign);  // -x as eager's neg: the sign bit flipped
                    _mm256_storeu_ps(o + i, _mm256_add_ps(_mm256_mul_ps(lo, _mm256_loadu_ps(c + i)),
                                                          _mm256_mul_ps(nhi, _mm256_loadu_ps(s + i))));
                    _mm256_storeu_ps(o + half + i, _mm256_add_ps(_mm256_mul_ps(hi_, _mm256_loadu_ps(c + half + i)),
                                                                 _mm256_mul_ps(lo, _mm256_loadu_ps(s + half + i))));
                }
                for (; i < half; ++i) {
                    const float lo = xr[i], hi_ = xr[half + i];
                    o[i] = lo * c[i] + (-hi_) * s[i];
                    o[half + i] = hi_ * c[half + i] + lo * s[half + i];
                }
            }
    return 0;
}

}  // extern "C"
