// What both bit-sliced CUDA kernels (sliced_kernel.cu, sliced_interp.cu) share: the host build's
// stand-ins, the stall generator and the lanes' bookkeeping. One thread runs 32 lanes; lane g
// of the grid (thread g / 32, bit g % 32) runs transactions g, g + LANES, g + 2 LANES ... under
// its own random valid/ready stalls, the first FREE_RUN of them (each lane's share) with none.
// A record is the output payload words, then the accept and emit cycles as two 64-bit numbers.
// Before it is included: OUT_WORDS and RECORD_WORDS.
#ifdef SLICED_HOST
#include <cstdint>
#define __host__
#define __device__
#define __restrict__ __restrict
typedef unsigned long long u64;
typedef unsigned int u32;
#define KERNEL static
#define LOWEST_BIT(m) __builtin_ctz(m)
static inline void atomic_or(u32* p, u32 v) { *p |= v; }
static inline void atomic_max(u64* p, u64 v) { if (v > *p) *p = v; }
#else
typedef unsigned long long u64;
typedef unsigned int u32;
#define KERNEL extern "C" __global__
#define LOWEST_BIT(m) (__ffs(m) - 1)
__device__ __forceinline__ void atomic_or(u32* p, u32 v) { atomicOr(p, v); }
__device__ __forceinline__ void atomic_max(u64* p, u64 v) { atomicMax(p, v); }
#endif

// Error flags.
#define EARLY_OUTPUT 1u  // an output before its input was accepted
#define IDLE 2u          // no output for MAX_IDLE cycles while one was awaited

struct Random {
    u32 state;
    __host__ __device__ inline u32 next() {
        state ^= state << 13; state ^= state >> 17; state ^= state << 5;
        return state;
    }
    // A word whose bits are 1 with probability threshold / 256 each (threshold 0..256).
    __host__ __device__ inline u32 chance(u32 threshold) {
        if (threshold >= 256u) return 0xFFFFFFFFu;
        u32 r = 0;
        for (int k = 0; k < 8; k++) {
            u32 x = next();
            r = (threshold >> k) & 1u ? (r | x) : (r & x);
        }
        return r;
    }
    // The thread's own stream of seed.
    __host__ __device__ inline void seed_for(u64 seed, u64 thread) {
        u64 z = seed * 0x9e3779b97f4a7c15ull + (thread + 1) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        state = (u32)(z ^ (z >> 31)) | 1u;
    }
};

// A thread's 32 lanes: how many transactions each has sent and taken, of its total and its
// stall-free share; masks (bit j: lane j) of the lanes with more to send, awaiting outputs,
// still stall-free, and offering now; the clock cycle and the cycles without an output.
struct Lanes {
    u32 sent[32], taken[32], total[32], free_count[32];
    u32 more, awaiting, free_in, free_out, offering;
    u64 thread, lanes, cycle, idle;

    __host__ __device__ inline void init(u64 thread_, u64 lanes_, u64 count, u64 free_run) {
        thread = thread_, lanes = lanes_;
        more = awaiting = free_in = free_out = offering = 0;
        cycle = idle = 0;
        for (int j = 0; j < 32; j++) {
            u64 g = thread * 32 + j;
            u64 n = g < lanes && count > g ? (count - g - 1) / lanes + 1 : 0;
            u64 f = g < lanes && free_run > g ? (free_run - g - 1) / lanes + 1 : 0;
            total[j] = (u32)n;
            free_count[j] = (u32)(f < n ? f : n);
            sent[j] = taken[j] = 0;
            if (n) { more |= 1u << j; awaiting |= 1u << j; }
            if (free_count[j]) { free_in |= 1u << j; free_out |= 1u << j; }
        }
    }
    // The transaction lane j sends k-th.
    __host__ __device__ inline u64 index(int j, u32 k) const { return thread * 32 + j + lanes * k; }
    // The lanes that start offering a transaction this cycle.
    __host__ __device__ inline u32 new_offers(Random& random, u32 p_valid) {
        return ~offering & more & (free_in | random.chance(p_valid));
    }
    // The record of lane j's next output, or null when it has none in flight (EARLY_OUTPUT).
    __host__ __device__ inline u32* output_record(int j, u32* records) const {
        return taken[j] < sent[j] ? records + index(j, taken[j]) * RECORD_WORDS : 0;
    }
    // Lane j's output, whose payload is in `record`, left this cycle.
    __host__ __device__ inline void emitted(int j, u32* record) {
        record[OUT_WORDS + 2] = (u32)cycle;
        record[OUT_WORDS + 3] = (u32)(cycle >> 32);
        u32 k = ++taken[j];
        if (k == free_count[j]) free_out &= ~(1u << j);
        if (k == total[j]) awaiting &= ~(1u << j);
    }
    // Whether an output came within max_idle cycles (false: IDLE).
    __host__ __device__ inline bool lively(u32 out_fire, u64 max_idle) {
        if (out_fire) {
            idle = 0;
            return true;
        }
        return ++idle <= max_idle;
    }
    // The lanes in `in_fire` had their transaction accepted this cycle.
    __host__ __device__ inline void accepted(u32 in_fire, u32* records) {
        for (u32 m = in_fire; m; m &= m - 1) {
            int j = LOWEST_BIT(m);
            u32* record = records + index(j, sent[j]) * RECORD_WORDS;
            record[OUT_WORDS + 0] = (u32)cycle;
            record[OUT_WORDS + 1] = (u32)(cycle >> 32);
            u32 k = ++sent[j];
            if (k == free_count[j]) free_in &= ~(1u << j);
            if (k == total[j]) more &= ~(1u << j);
        }
        offering &= ~in_fire;
    }
};
