// What the compiled cycle driver and the RT-unit player share: reading and writing a verilated
// model's packed ports, and the model stepped a clock cycle at a time. Included after
// "cycle_config.h" (`Top`, IN_WORDS, OUT_WORDS, IN_MASK) and "verilated.h".
#pragma once
#include <cstddef>
#include <cstdint>

// ---- ports: scalars of up to 64 bits, or VlWide ------------------------------------------
template <typename T>
static inline void put_port(T& port, const uint32_t* row, int words) {
    if (words > 1)
        port = (T)((uint64_t)row[0] | ((uint64_t)row[1] << 32));
    else
        port = (T)row[0];
}
template <std::size_t N>
static inline void put_port(VlWide<N>& port, const uint32_t* row, int) {
    for (std::size_t k = 0; k < N; k++) port.m_storage[k] = row[k];
}
template <typename T>
static inline void get_port(const T& port, uint32_t* row, int words) {
    uint64_t value = (uint64_t)port;
    row[0] = (uint32_t)value;
    if (words > 1) row[1] = (uint32_t)(value >> 32);
}
template <std::size_t N>
static inline void get_port(const VlWide<N>& port, uint32_t* row, int) {
    for (std::size_t k = 0; k < N; k++) row[k] = port.m_storage[k];
}

// ---- the clock ---------------------------------------------------------------------------
struct Block {
    Top* top;
    uint64_t cycle = 0;

    explicit Block(VerilatedContext* context) {
        top = new Top{context};
        uint32_t zero[IN_WORDS] = {0};
        top->clk = 0;
        top->rst = 1;
        put_port(top->i, zero, IN_WORDS);
        top->eval();
        for (int k = 0; k < 2; k++) {
            top->clk = 1; top->eval();
            top->clk = 0; top->eval();
        }
        top->rst = 0;
    }
    ~Block() {
        top->final();
        delete top;
    }
    // One clock cycle: apply `in`, read `out` before the clock edge.
    inline void step(uint32_t* in, uint32_t* out) {
        in[IN_WORDS - 1] &= IN_MASK;
        put_port(top->i, in, IN_WORDS);
        top->clk = 0;
        top->eval();
        get_port(top->o, out, OUT_WORDS);
        top->clk = 1;
        top->eval();
        cycle++;
    }
};
