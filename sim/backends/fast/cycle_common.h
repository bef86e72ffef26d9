// What the compiled cycle driver and the blocks' compiled stimuli share: bit fields of a packed
// row of 32-bit words (word 0 = bits 0..31) and a seeded random generator.
#pragma once
#include <cstdint>

// A leaf field of a layout: its bit offset and width in the packed row (up to 64 bits wide).
struct Field {
    uint32_t offset, width;
};

static inline void put(uint32_t* row, Field field, uint64_t value) {
    if (field.width < 64) value &= (1ULL << field.width) - 1;
    for (uint32_t done = 0; done < field.width;) {
        uint32_t bit = field.offset + done, word = bit / 32, shift = bit % 32;
        uint32_t take = 32 - shift < field.width - done ? 32 - shift : field.width - done;
        uint32_t mask = take == 32 ? 0xffffffffu : ((1u << take) - 1) << shift;
        row[word] = (row[word] & ~mask) | ((uint32_t)(value >> done) << shift & mask);
        done += take;
    }
}

static inline uint64_t get(const uint32_t* row, Field field) {
    uint64_t value = 0;
    for (uint32_t done = 0; done < field.width;) {
        uint32_t bit = field.offset + done, word = bit / 32, shift = bit % 32;
        uint32_t take = 32 - shift < field.width - done ? 32 - shift : field.width - done;
        uint64_t part = (row[word] >> shift) & (take == 32 ? 0xffffffffu : (1u << take) - 1);
        value |= part << done;
        done += take;
    }
    return value;
}

// splitmix64: small and well mixed; a stimulus needs independent draws, not numpy's stream.
struct Random {
    uint64_t state;
    explicit Random(uint64_t seed) : state(seed * 0x2545f4914f6cdd1dULL + 1) {}
    inline uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    // A float in [0, 1), as numpy's Generator.random().
    inline double random() { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }
    // An integer in [low, high), as numpy's Generator.integers(low, high).
    inline uint64_t integers(uint64_t low, uint64_t high) {
        return low + (uint64_t)(((unsigned __int128)next() * (high - low)) >> 64);
    }
    inline uint64_t integers(uint64_t high) { return integers(0, high); }
};
