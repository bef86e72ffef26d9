// The behavioural FP32 cores' operations, one value at a time: what gpurtl.golden.fp32 defines
// (the reasons each is exact are in gpurtl/sim/backends/fast/behavioural.py). Shared by the fast
// backend's DPI-C functions (fp32_cores.cpp) and the sliced backend's behavioural cores.
#ifndef GPURTL_FP32_OPS_H
#define GPURTL_FP32_OPS_H
#include <cmath>
#include <cstdint>
#include <cstring>

namespace fp32ops {
const uint32_t SIGN = 0x80000000u, MAG = 0x7FFFFFFFu, INF = 0x7F800000u, QNAN = 0x7FC00000u;

inline float f32(uint32_t x) { float f; std::memcpy(&f, &x, 4); return f; }
inline uint32_t bits(float f) { uint32_t x; std::memcpy(&x, &f, 4); return x; }
inline double f64(uint32_t x) { return (double)f32(x); }
inline bool is_nan(uint32_t x) { return (x & MAG) > INF; }
// A subnormal pattern becomes the zero of its sign.
inline uint32_t flush(uint32_t x) { return (x & INF) == 0 ? x & SIGN : x; }
// The ftz output flush, then the canonical NaN.
inline uint32_t finish(uint32_t z, int ftz) {
    if (ftz) z = flush(z);
    return is_nan(z) ? QNAN : z;
}
// Integer key ordering non-NaN patterns numerically, -0 == +0 (compares).
inline int64_t key(uint32_t x) {
    int64_t mag = x & MAG;
    return (x & SIGN) ? -mag : mag;
}
// Total-order key with -0 below +0 (min/max).
inline int64_t order(uint32_t x) {
    int64_t mag = x & MAG;
    return (x & SIGN) ? -mag - 1 : mag;
}
inline uint32_t divide(uint32_t a, uint32_t b, int ftz) {
    if (ftz) { a = flush(a); b = flush(b); }
    return finish(bits((float)(f64(a) / f64(b))), ftz);
}

inline uint64_t add(uint32_t a, uint32_t b, uint32_t sub, int ftz) {
    if (sub & 1) b ^= SIGN;
    if (ftz) { a = flush(a); b = flush(b); }
    return finish(bits((float)(f64(a) + f64(b))), ftz);
}

inline uint64_t mul(uint32_t a, uint32_t b, int ftz) {
    if (ftz) { a = flush(a); b = flush(b); }
    return finish(bits((float)(f64(a) * f64(b))), ftz);
}

inline uint64_t fused(uint32_t a, uint32_t b, uint32_t c, int ftz) {
    if (ftz) { a = flush(a); b = flush(b); c = flush(c); }
    double p = f64(a) * f64(b);  // exact
    double cd = f64(c);
    double s = p + cd;
    double bv = s - p;
    double err = (p - (s - bv)) + (cd - bv);  // TwoSum: p + c == s + err
    uint64_t sbits;
    std::memcpy(&sbits, &s, 8);
    if (err != 0 && (sbits & 1) == 0 && std::isfinite(s))  // round to odd
        s = std::nextafter(s, err > 0 ? INFINITY : -INFINITY);
    return finish(bits((float)s), ftz);
}

inline uint64_t cmp(uint32_t a, uint32_t b, int ftz) {
    if (ftz) { a = flush(a); b = flush(b); }
    bool un = is_nan(a) || is_nan(b);
    int64_t ka = key(a), kb = key(b);
    uint64_t lt = !un && ka < kb, le = !un && ka <= kb, eq = !un && ka == kb;
    return (unsigned long long)(lt | (le << 1) | (eq << 2) | ((uint64_t)un << 3));
}

inline uint64_t minmax(uint32_t a, uint32_t b, int ftz) {
    if (ftz) { a = flush(a); b = flush(b); }
    uint32_t lo = order(b) < order(a) ? b : a, hi = order(b) > order(a) ? b : a;
    if (is_nan(a) || is_nan(b)) lo = hi = QNAN;
    return (unsigned long long)((uint64_t)lo | ((uint64_t)hi << 32));
}

inline uint64_t f2i(uint32_t a, uint32_t is_signed, int ftz) {
    if (ftz) a = flush(a);
    bool sign = a >> 31;
    int64_t field = (a >> 23) & 0xFF;
    uint64_t sig = (a & 0x7FFFFF) | (field ? 0x800000u : 0);
    int64_t exp = (field > 1 ? field : 1) - 150;  // |a| = sig * 2**exp
    int64_t left = exp < 0 ? 0 : exp > 16 ? 16 : exp, right = -exp < 0 ? 0 : -exp > 63 ? 63 : -exp;
    int64_t mag = (int64_t)(exp >= 0 ? sig << left : sig >> right);
    int64_t value = sign ? -mag : mag;
    int64_t lo = (is_signed & 1) ? INT32_MIN : 0, hi = (is_signed & 1) ? INT32_MAX : UINT32_MAX;
    bool nan = is_nan(a), invalid = nan || value < lo || value > hi;
    int64_t z = nan ? 0 : value < lo ? lo : value > hi ? hi : value;
    return (unsigned long long)(((uint64_t)z & 0xFFFFFFFFu) | ((uint64_t)invalid << 32));
}

inline uint64_t i2f(uint32_t a, uint32_t is_signed, int ftz) {
    float z = (is_signed & 1) ? (float)(int32_t)a : (float)a;  // one rounding, to nearest even
    return finish(bits(z), ftz);
}

}  // namespace fp32ops
#endif
