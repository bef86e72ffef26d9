// The compiled stimulus of `rt_unit`: the rules of gpurtl.sim.blocks.rt_unit's stimulus
// (drive_with_memory and _top_stimulus), drawn from this driver's generator instead of numpy's.
//
// The request source: a lane offered now and then (a chance per cycle that changes every 97
// cycles, as the response side's ready does), held until `inst.ready` takes it; random payload
// bits, then the lane's wave and `last` (wave instructions of 1..32 lanes, a wave's lanes mostly
// one after the other), 2% dual forms, node pointers mostly to box nodes (type 5) on lines of a
// working set three times the cache (often the previous line again, now and then a line
// anywhere), and mostly (90%) the usual descriptor with one of four rays, mostly the ray whose
// boxes the line's node holds. Waits: 5% of the cycles an `s_wait_bvhcnt` (1% any word) for a
// random wave.
//
// The memory side (MemorySide): every `mem_req` taken is answered after 2..30 cycles, the
// answers in the order they become due, each line as BEATS transfers held until `fill.ready`
// takes them, with a pause of a cycle now and then between beats; `mem_req.ready` 80% of the
// cycles; 1% of the idle cycles a fill nobody asked for.
//
// The node data come from the memory image file (gpurtl.sim.backends.fast.cycle_source writes
// it from gpurtl.sim.blocks.rt_unit.memory_image): little-endian, `u32 W, P, R`, then the
// working set's W line indices (u64), the 4 rays' R field values (u64 each, the fields
// RAY_PAYLOAD names), the working lines' data (W x 32 u32) and a pool of P lines per ray (4 x P x 32
// u32) that any other line's data comes from (line L: ray L % 4, entry (L / 4) % P).
//
// The constants come from cycle_config.h: WAVES, LINE_BITS, BEATS, FILL_DATA_OFFSET (the bit of
// fill.payload.data), PAYLOAD_FIELDS (every inst.payload field) and the positions there of the
// tag, last, dual, node_ptr[0] and pointer_flags fields (P_TAG, ...), of the descriptor's fields
// (DESC_PAYLOAD, with DESC_VALUES the usual descriptor) and of the ray's (RAY_PAYLOAD, the
// image's order), BVH_WAITS (the word of `s_wait_bvhcnt` with each count 0..7).
#pragma once

#include <algorithm>
#include <cstdio>
#include <unordered_map>
#include <vector>

struct Stimulus {
    static const int RAYS = 4;
    static const int NRAY = sizeof(RAY_PAYLOAD) / sizeof(RAY_PAYLOAD[0]);
    static const int NPAYLOAD = sizeof(PAYLOAD_FIELDS) / sizeof(PAYLOAD_FIELDS[0]);
    static const int NDESC = sizeof(DESC_PAYLOAD) / sizeof(DESC_PAYLOAD[0]);
    static const int BEAT_WORDS = 32 / BEATS;

    Random rng;
    const char* error = nullptr;
    // the memory image
    std::vector<uint64_t> working;
    std::vector<uint32_t> working_data, pool_data;
    uint64_t ray_values[RAYS][NRAY] = {};
    uint32_t pool = 0;
    std::unordered_map<uint64_t, uint32_t> working_index;
    // the request source
    double p_valid = 0.8, p_ready = 0.8;
    bool has_request = false, sink_ready = false;
    uint64_t request[NPAYLOAD] = {};
    uint64_t last_line = 0;
    int left[WAVES] = {};
    uint64_t current = 0;
    // the memory side
    std::vector<std::pair<uint64_t, uint64_t>> due;  // (cycle due, line)
    bool offering = false;
    uint64_t offer_line = 0;
    const uint32_t* offer_data = nullptr;
    int beat = 0;

    Stimulus(uint64_t seed, const char* image) : rng(seed) {
        if (!image || !load(image)) {
            if (!error) error = "cannot read the memory image file";
            return;
        }
        last_line = working[0];
    }

    bool load(const char* path) {
        FILE* file = fopen(path, "rb");
        if (!file) return false;
        uint32_t head[3];
        bool good = fread(head, 4, 3, file) == 3 && head[0] > 0 && head[1] > 0 && head[2] == NRAY;
        if (good) {
            working.resize(head[0]);
            pool = head[1];
            working_data.resize((size_t)head[0] * 32);
            pool_data.resize((size_t)RAYS * pool * 32);
            good = fread(working.data(), 8, working.size(), file) == working.size() &&
                   fread(ray_values, 8, RAYS * NRAY, file) == (size_t)(RAYS * NRAY) &&
                   fread(working_data.data(), 4, working_data.size(), file) == working_data.size() &&
                   fread(pool_data.data(), 4, pool_data.size(), file) == pool_data.size();
        }
        fclose(file);
        if (!good) {
            error = "the memory image file does not fit this build";
            return false;
        }
        for (size_t k = 0; k < working.size(); k++) working_index.emplace(working[k], (uint32_t)k);
        return true;
    }

    const uint32_t* line_data(uint64_t line) {
        auto found = working_index.find(line);
        if (found != working_index.end()) return &working_data[(size_t)found->second * 32];
        size_t entry = (size_t)(line % RAYS) * pool + (size_t)((line / RAYS) % pool);
        return &pool_data[entry * 32];
    }

    uint64_t draw_line() {
        double roll = rng.random();
        if (roll < 0.05)
            last_line = rng.integers(1ULL << LINE_BITS);
        else if (roll >= 0.35)
            last_line = working[rng.integers(working.size())];
        return last_line;
    }

    // (wave, last) of the next lane
    void lane(uint64_t& wave, bool& last) {
        wave = current;
        if (rng.random() < (left[wave] == 0 ? 0.3 : 0.1)) wave = current = rng.integers(WAVES);
        if (left[wave] == 0) {
            double roll = rng.random();
            left[wave] = roll < 0.5 ? 1 : (int)rng.integers(2, roll < 0.75 ? 5 : 33);
        }
        left[wave]--;
        last = left[wave] == 0;
    }

    void offer() {
        for (int k = 0; k < NPAYLOAD; k++) request[k] = rng.next();
        uint64_t wave;
        bool last;
        lane(wave, last);
        request[P_TAG] = wave;
        request[P_LAST] = last;
        request[P_DUAL] = rng.random() < 0.02;
        uint64_t kind = rng.random() < 0.8 ? 5 : rng.integers(16);
        uint64_t line = draw_line();
        request[P_NODE_PTR] = (line << 4) | kind;
        if (rng.random() < 0.9) {  // the descriptor Mesa programs
            for (int k = 0; k < NDESC; k++) request[DESC_PAYLOAD[k]] = DESC_VALUES[k];
            request[P_POINTER_FLAGS] = 0;
            uint64_t pick = rng.random() < 0.8 ? line : rng.integers(RAYS);
            for (int k = 0; k < NRAY; k++) request[RAY_PAYLOAD[k]] = ray_values[pick % RAYS][k];
        }
    }

    void inputs(uint64_t cycle, uint32_t* row) {
        static const double VALID[] = {0.3, 0.8, 1.0}, READY[] = {0.1, 0.7, 1.0};
        if (cycle % 97 == 0) {
            p_valid = VALID[rng.integers(3)];
            p_ready = READY[rng.integers(3)];
        }
        if (!has_request && rng.random() < p_valid) {
            offer();
            has_request = true;
        }
        put(row, IN_inst_valid, has_request);
        if (has_request)
            for (int k = 0; k < NPAYLOAD; k++) put(row, PAYLOAD_FIELDS[k], request[k]);
        // the memory side
        if (!offering) {
            size_t best = due.size();
            for (size_t k = 0; k < due.size(); k++)
                if (due[k].first <= cycle && (best == due.size() || due[k] < due[best])) best = k;
            if (best != due.size()) {
                offer_line = due[best].second;
                due.erase(due.begin() + (long)best);
                offering = true;
            } else if (rng.random() < 0.01) {
                offer_line = rng.integers(1ULL << LINE_BITS);
                offering = true;
            }
            if (offering) offer_data = line_data(offer_line);
        }
        bool pause = beat && rng.random() < 0.2;  // a pause between two beats of a line
        if (!pause && offering) {
            put(row, IN_fill_valid, 1);
            put(row, IN_fill_payload_line, offer_line);
            for (int k = 0; k < BEAT_WORDS; k++)
                put(row, Field{FILL_DATA_OFFSET + 32u * (uint32_t)k, 32},
                    offer_data[beat * BEAT_WORDS + k]);
        }
        put(row, IN_mem_req_ready, rng.random() < 0.8);
        put(row, IN_out_ready, rng.random() < p_ready);
        // the wait instructions
        double roll = rng.random();
        uint64_t word = BVH_WAITS[rng.integers(8)];
        if (roll < 0.01) word = rng.integers(1ULL << 32);
        put(row, IN_wait_valid, roll < 0.05);
        put(row, IN_wait_wave, rng.integers(WAVES));
        put(row, IN_wait_word, word);
    }

    void outputs(uint64_t cycle, const uint32_t* in, const uint32_t* out) {
        if (get(out, OUT_mem_req_valid) && get(in, IN_mem_req_ready))
            due.emplace_back(cycle + rng.integers(2, 31), get(out, OUT_mem_req_payload_line));
        if (get(in, IN_fill_valid) && get(out, OUT_fill_ready)) {
            beat = (beat + 1) % BEATS;
            if (beat == 0) offering = false;
        }
        if (has_request && get(out, OUT_inst_ready)) has_request = false;
    }
};
