// The behavioural FP32 cores of the sliced backend: each operation on LANE_GROUP lanes at once
// (GCC vector extensions: AVX-512 or AVX2 registers where the compiler targets them), computing
// what fp32_ops.h computes one value at a time (the fast backend's behavioural cores): float64
// arithmetic rounded once to binary32, the fused multiply-add by TwoSum and rounding to odd. The
// operations without a vector form here (f2i) run fp32_ops.h lane by lane.
//
// Before it is included: LANE_GROUP (lanes per vector) and #include "fp32_ops.h".
#ifndef GPURTL_SLICED_FP32_H
#define GPURTL_SLICED_FP32_H

typedef uint32_t U __attribute__((vector_size(4 * LANE_GROUP)));
typedef int32_t I __attribute__((vector_size(4 * LANE_GROUP)));
typedef float F __attribute__((vector_size(4 * LANE_GROUP)));
typedef double D __attribute__((vector_size(8 * LANE_GROUP)));
typedef int64_t L __attribute__((vector_size(8 * LANE_GROUP)));

namespace vfp32 {
const uint32_t SIGN = 0x80000000u, MAG = 0x7FFFFFFFu, INF = 0x7F800000u, QNAN = 0x7FC00000u;

// Masks are all-ones or zero per lane.
inline U pick(U mask, U yes, U no) { return (yes & mask) | (no & ~mask); }
inline U mask_of(I comparison) { return (U)comparison; }
inline U is_nan(U x) { return mask_of((x & MAG) > INF); }
inline U flush(U x) { return pick(mask_of((x & INF) == 0), x & SIGN, x); }
inline U finish(U z, int ftz) {
    if (ftz) z = flush(z);
    return pick(is_nan(z), (U){} + QNAN, z);
}
inline D wide(U x) { return __builtin_convertvector((F)x, D); }
inline U narrow(D x) { return (U)__builtin_convertvector(x, F); }
// The compares' key: non-NaN patterns in numeric order, -0 == +0.
inline I key(U x) {
    I mag = (I)(x & MAG);
    return (I)pick(mask_of((I)(x & SIGN) != 0), (U)-mag, (U)mag);
}
// min/max's total order: -0 below +0.
inline I order(U x) {
    I mag = (I)(x & MAG);
    return (I)pick(mask_of((I)(x & SIGN) != 0), (U)(-mag - 1), (U)mag);
}

inline U add(U a, U b, U sub, int ftz) {
    b ^= (sub & 1) * SIGN;
    if (ftz) { a = flush(a); b = flush(b); }
    return finish(narrow(wide(a) + wide(b)), ftz);
}
inline U mul(U a, U b, int ftz) {
    if (ftz) { a = flush(a); b = flush(b); }
    return finish(narrow(wide(a) * wide(b)), ftz);
}
inline U divide(U a, U b, int ftz) {
    if (ftz) { a = flush(a); b = flush(b); }
    return finish(narrow(wide(a) / wide(b)), ftz);
}
inline U fused(U a, U b, U c, int ftz) {
    if (ftz) { a = flush(a); b = flush(b); c = flush(c); }
    D p = wide(a) * wide(b);  // exact
    D cd = wide(c);
    D s = p + cd;
    D bv = s - p;
    D err = (p - (s - bv)) + (cd - bv);  // TwoSum: p + c == s + err
    L bits = (L)s;
    // Round to odd: an inexact sum with an even last bit moves one step towards the error
    // (away from zero when the error has the sum's sign). A finite sum that rounds to zero
    // is exact, so s is not zero where the step is taken.
    L inexact_even = (err != 0) & ((bits & 1) == 0) & ((bits & 0x7FF0000000000000LL) != 0x7FF0000000000000LL);
    L outward = (err > 0) == (s > 0);
    L step = (outward & 1) | (~outward & -1);
    return finish(narrow((D)(bits + (step & inexact_even))), ftz);
}
// Bit 0 lt, 1 le, 2 eq, 3 unordered.
inline U cmp(U a, U b, int ftz) {
    if (ftz) { a = flush(a); b = flush(b); }
    U un = is_nan(a) | is_nan(b);
    I ka = key(a), kb = key(b);
    U lt = mask_of(ka < kb) & ~un, le = mask_of(ka <= kb) & ~un, eq = mask_of(ka == kb) & ~un;
    return (lt & 1) | (le & 2) | (eq & 4) | (un & 8);
}
inline void minmax(U a, U b, int ftz, U* lo, U* hi) {
    if (ftz) { a = flush(a); b = flush(b); }
    I oa = order(a), ob = order(b);
    U nan = is_nan(a) | is_nan(b);
    *lo = pick(nan, (U){} + QNAN, pick(mask_of(ob < oa), b, a));
    *hi = pick(nan, (U){} + QNAN, pick(mask_of(ob > oa), b, a));
}
inline U i2f(U a, U is_signed, int ftz) {
    U s = (U)__builtin_convertvector((I)a, F), u = (U)__builtin_convertvector(a, F);
    return finish(pick(mask_of((I)(is_signed & 1) != 0), s, u), ftz);
}
// f2i: lane by lane (z, invalid).
inline void f2i(U a, U is_signed, int ftz, U* z, U* invalid) {
    for (int k = 0; k < LANE_GROUP; k++) {
        uint64_t r = fp32ops::f2i(a[k], is_signed[k], ftz);
        (*z)[k] = (uint32_t)r;
        (*invalid)[k] = (uint32_t)(r >> 32);
    }
}
}  // namespace vfp32

// ---- between bit slices and lanes ------------------------------------------------------------
// x[i] bit j of every element <-> x[j] bit i: the 32 x 32 bit transpose of Hacker's Delight,
// element by element, so that bit-sliced words (x[b]: bit b of 32 lanes an element) become
// values (x[j]: lane j of each element's 32) and back.
inline void transpose32(U* x) {
    static const uint32_t masks[5] = {0x0000FFFFu, 0x00FF00FFu, 0x0F0F0F0Fu, 0x33333333u,
                                      0x55555555u};
    int level = 0;
    for (int j = 16; j != 0; j >>= 1, level++) {
        const uint32_t m = masks[level];
        for (int k = 0; k < 32; k = ((k | j) + 1) & ~j) {
            U t = ((x[k] >> j) ^ x[k | j]) & m;
            x[k | j] ^= t;
            x[k] ^= t << j;
        }
    }
}

#endif
