// The behavioural FP32 cores' operations, one value at a time: what gpurtl.golden.fp32 defines
// (the reasons each is exact are in gpurtl/sim/backends/fast/behavioural.py). Shared by the fast
// backend's DPI-C functions (fp32_cores.cpp) and the sliced backend's behavioural cores.
#ifndef GPURTL_FP32_OPS_H
#define GPURTL_FP32_OPS_H
#ifdef __CUDACC_RTC__
// NVRTC (the gpu backend's interpreted kernel): no standard headers; the same operations as
// device functions, the two library calls by their bits: a finite double is one whose exponent
// field is not all ones, and the step of the fused multiply-add is taken from a finite nonzero
// sum (one that rounds to zero is exact), whose pattern moves one away from zero where the
// direction has its sign and one towards zero otherwise.
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long int64_t;
typedef int int32_t;
#define FP32OPS_FN __device__ inline
#define FP32OPS_DOUBLE_BITS(d) ((uint64_t)__double_as_longlong(d))
#define FP32OPS_ISFINITE(x) (((FP32OPS_DOUBLE_BITS(x) >> 52) & 0x7FF) != 0x7FF)
#define FP32OPS_NEXTAFTER(x, up) \
    __longlong_as_double(__double_as_longlong(x) + ((((x) > 0) == (up)) ? 1 : -1))
#define FP32OPS_INT32_MIN (-2147483647 - 1)
#define FP32OPS_INT32_MAX 2147483647
#define FP32OPS_UINT32_MAX 4294967295u
#else
#include <cmath>
#include <cstdint>
#include <cstring>
#define FP32OPS_FN inline
#define FP32OPS_FLOAT(x) fp32ops_copy<float>(x)
#define FP32OPS_BITS(f) fp32ops_copy<uint32_t>(f)
#define FP32OPS_DOUBLE_BITS(d) fp32ops_copy<uint64_t>(d)
template <typename To, typename From>
inline To fp32ops_copy(From from) {
    To to;
    std::memcpy(&to, &from, sizeof to);
    return to;
}
#define FP32OPS_ISFINITE(x) std::isfinite(x)
#define FP32OPS_NEXTAFTER(x, up) std::nextafter(x, (up) ? INFINITY : -INFINITY)
#define FP32OPS_INT32_MIN INT32_MIN
#define FP32OPS_INT32_MAX INT32_MAX
#define FP32OPS_UINT32_MAX UINT32_MAX
#endif

namespace fp32ops {
const uint32_t SIGN = 0x80000000u, MAG = 0x7FFFFFFFu, INF = 0x7F800000u, QNAN = 0x7FC00000u;

#ifdef __CUDACC_RTC__
// binary32 <-> binary64 by their bits, so that no float instruction (which a kernel built to
// flush subnormals would flush) is involved: f64 exactly, narrow rounding to nearest even.
FP32OPS_FN double f64(uint32_t x) {
    uint32_t field = (x >> 23) & 0xFF, mant = x & 0x7FFFFF;
    double sign = (x >> 31) ? -1.0 : 1.0;
    if (field == 0) return sign * ((double)mant * 1.401298464324817e-45);  // mant * 2**-149
    if (field == 0xFF) {
        uint64_t inf_or_nan = 0x7FF0000000000000ull | ((uint64_t)mant << 29);
        return __longlong_as_double((long long)(inf_or_nan | ((uint64_t)(x >> 31) << 63)));
    }
    uint64_t wide = ((uint64_t)(x >> 31) << 63) | ((uint64_t)(field - 127 + 1023) << 52) |
                    ((uint64_t)mant << 29);
    return __longlong_as_double((long long)wide);
}
FP32OPS_FN uint32_t narrow(double d) {
    uint64_t b = FP32OPS_DOUBLE_BITS(d);
    uint32_t sign = (uint32_t)(b >> 63) << 31;
    int64_t field = (int64_t)((b >> 52) & 0x7FF);
    uint64_t mant = b & 0xFFFFFFFFFFFFFull;
    if (field == 0x7FF) return sign | (mant ? 0x7FC00000u : 0x7F800000u);
    if (field == 0) return sign;  // binary64 subnormals round to a zero of binary32
    int64_t exp32 = field - 1023 + 127;  // the binary32 field of a normal result
    if (exp32 >= 255) return sign | 0x7F800000u;
    uint64_t sig = mant | (1ull << 52);
    int64_t shift = 29 + (exp32 < 1 ? 1 - exp32 : 0);
    if (shift > 60) return sign;  // below half the least subnormal
    uint64_t q = sig >> shift, rem = sig & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    // a carry out of the significand moves into the field (up to infinity), as it should
    return sign | (uint32_t)(exp32 >= 1 ? ((uint64_t)(exp32 - 1) << 23) + q : q);
}
#else
FP32OPS_FN double f64(uint32_t x) { return (double)FP32OPS_FLOAT(x); }
FP32OPS_FN uint32_t narrow(double d) { return FP32OPS_BITS((float)d); }
#endif
FP32OPS_FN bool is_nan(uint32_t x) { return (x & MAG) > INF; }
// A subnormal pattern becomes the zero of its sign.
FP32OPS_FN uint32_t flush(uint32_t x) { return (x & INF) == 0 ? x & SIGN : x; }
// The ftz output flush, then the canonical NaN.
FP32OPS_FN uint32_t finish(uint32_t z, int ftz) {
    if (ftz) z = flush(z);
    return is_nan(z) ? QNAN : z;
}
// Integer key ordering non-NaN patterns numerically, -0 == +0 (compares).
FP32OPS_FN int64_t key(uint32_t x) {
    int64_t mag = x & MAG;
    return (x & SIGN) ? -mag : mag;
}
// Total-order key with -0 below +0 (min/max).
FP32OPS_FN int64_t order(uint32_t x) {
    int64_t mag = x & MAG;
    return (x & SIGN) ? -mag - 1 : mag;
}
FP32OPS_FN uint32_t divide(uint32_t a, uint32_t b, int ftz) {
    if (ftz) { a = flush(a); b = flush(b); }
    return finish(narrow(f64(a) / f64(b)), ftz);
}

FP32OPS_FN uint64_t add(uint32_t a, uint32_t b, uint32_t sub, int ftz) {
    if (sub & 1) b ^= SIGN;
    if (ftz) { a = flush(a); b = flush(b); }
    return finish(narrow(f64(a) + f64(b)), ftz);
}

FP32OPS_FN uint64_t mul(uint32_t a, uint32_t b, int ftz) {
    if (ftz) { a = flush(a); b = flush(b); }
    return finish(narrow(f64(a) * f64(b)), ftz);
}

FP32OPS_FN uint64_t fused(uint32_t a, uint32_t b, uint32_t c, int ftz) {
    if (ftz) { a = flush(a); b = flush(b); c = flush(c); }
    double p = f64(a) * f64(b);  // exact
    double cd = f64(c);
    double s = p + cd;
    double bv = s - p;
    double err = (p - (s - bv)) + (cd - bv);  // TwoSum: p + c == s + err
    uint64_t sbits = FP32OPS_DOUBLE_BITS(s);
    if (err != 0 && (sbits & 1) == 0 && FP32OPS_ISFINITE(s))  // round to odd
        s = FP32OPS_NEXTAFTER(s, err > 0);
    return finish(narrow(s), ftz);
}

FP32OPS_FN uint64_t cmp(uint32_t a, uint32_t b, int ftz) {
    if (ftz) { a = flush(a); b = flush(b); }
    bool un = is_nan(a) || is_nan(b);
    int64_t ka = key(a), kb = key(b);
    uint64_t lt = !un && ka < kb, le = !un && ka <= kb, eq = !un && ka == kb;
    return (unsigned long long)(lt | (le << 1) | (eq << 2) | ((uint64_t)un << 3));
}

FP32OPS_FN uint64_t minmax(uint32_t a, uint32_t b, int ftz) {
    if (ftz) { a = flush(a); b = flush(b); }
    uint32_t lo = order(b) < order(a) ? b : a, hi = order(b) > order(a) ? b : a;
    if (is_nan(a) || is_nan(b)) lo = hi = QNAN;
    return (unsigned long long)((uint64_t)lo | ((uint64_t)hi << 32));
}

FP32OPS_FN uint64_t f2i(uint32_t a, uint32_t is_signed, int ftz) {
    if (ftz) a = flush(a);
    bool sign = a >> 31;
    int64_t field = (a >> 23) & 0xFF;
    uint64_t sig = (a & 0x7FFFFF) | (field ? 0x800000u : 0);
    int64_t exp = (field > 1 ? field : 1) - 150;  // |a| = sig * 2**exp
    int64_t left = exp < 0 ? 0 : exp > 16 ? 16 : exp, right = -exp < 0 ? 0 : -exp > 63 ? 63 : -exp;
    int64_t mag = (int64_t)(exp >= 0 ? sig << left : sig >> right);
    int64_t value = sign ? -mag : mag;
    int64_t lo = (is_signed & 1) ? FP32OPS_INT32_MIN : 0, hi = (is_signed & 1) ? FP32OPS_INT32_MAX : FP32OPS_UINT32_MAX;
    bool nan = is_nan(a), invalid = nan || value < lo || value > hi;
    int64_t z = nan ? 0 : value < lo ? lo : value > hi ? hi : value;
    return (unsigned long long)(((uint64_t)z & 0xFFFFFFFFu) | ((uint64_t)invalid << 32));
}

FP32OPS_FN uint64_t i2f(uint32_t a, uint32_t is_signed, int ftz) {
    // exact in binary64, then one rounding to nearest even
    double z = (is_signed & 1) ? (double)(int32_t)a : (double)a;
    return finish(narrow(z), ftz);
}

}  // namespace fp32ops
#endif
