// The `codes` kernel mode's rotary embedding (kernels/codes_layers.py calls it): transformers' rotate-half RoPE,
//   out = x * cos + rotate_half(x) * sin,   rotate_half(x) = [-x[d/2:], x[:d/2]],
// for x [b, h, t, d] and cos, sin [b, t, d] (one table row per batch row and position, shared by the heads), in
// one pass instead of eager's nine operators (two slices, neg, cat, three products and sums).
//
// What it promises: eager's bits. Each element is the same three IEEE fp32 operations eager runs, in its order:
// p = x[i] * cos[i], r = (+-x[j]) * sin[i] (a negation is exact), then p + r; never fused (-ffp-contract=off).
#include <immintrin.h>

extern "C" {

int rope_apply(const float* x, long b, long h, long t, long d, const float* cos, const float* sin, float* out) {
    const long half = d / 2, vec = half - half % 16;
    for (long bi = 0; bi < b; ++bi)
        for (long hi = 0; hi < h; ++hi)
            for (long ti = 0; ti < t; ++ti) {
                const long row = (bi * h + hi) * t + ti;
                const float* xr = x + row * d;
                const float* c = cos + (bi * t + ti) * d;
                const float* s = sin + (bi * t + ti) * d;
                float* o = out + row * d;
                long i = 0;
                for (; i < vec; i += 16) {
                    const __m512 lo = _mm512_loadu_ps(xr + i), hi_ = _mm512_loadu_ps(xr + half + i);
                    const __m512 nhi = _mm512_castsi512_ps(  // -x as eager's neg: the sign bit flipped (0 - x
                        _mm512_xor_si512(_mm512_castps_si512(hi_), _mm512_set1_epi32((int)0x80000000)));  // is not)
                    _mm512_storeu_ps(o + i, _mm512_add_ps(_mm512_mul_ps(lo, _mm512_loadu_ps(c + i)),
                                                          _mm512_mul_ps(nhi, _mm512_loadu_ps(s + i))));
                    _mm512_storeu_ps(o + half + i, _mm512_add_ps(_mm512_mul_ps(hi_, _mm512_loadu_ps(c + half + i)),
                                                                 _mm512_mul_ps(lo, _mm512_loadu_ps(s + half + i))));
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
