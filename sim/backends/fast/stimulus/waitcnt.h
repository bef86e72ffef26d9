// The compiled stimulus of `waitcnt`: the rules of gpurtl.sim.blocks.waitcnt._counter_stimulus
// (phases of 120 cycles, every other one a burst that fills a focus wave's counters; returns
// that mostly match outstanding work and sometimes do not; every wait form, sometimes with
// all-ones or garbage words), drawn from this driver's generator instead of numpy's.
//
// The constants come from cycle_config.h: WAVES, COUNTERS, CLASSES, CLASS_COUNTERS (a bit per
// counter of each instruction class), RET_VALID and RET_WAVE (the return fields of each
// counter), FORMS, FORM_BASE (the word of each wait form with zero counts), FORM_FIELDS and
// FORM_LO_SHIFT, FORM_LO_BITS, FORM_HI_SHIFT, FORM_HI_BITS (up to 4 fields a form).
#pragma once

struct Stimulus {
    Random rng;
    int64_t shadow[WAVES][COUNTERS] = {};  // outstanding work as the stimulus counts it
    uint64_t focus = 0, focus_cls = 0;

    const char* error = nullptr;

    Stimulus(uint64_t seed, const char*) : rng(seed) {}

    uint32_t wait_word() {
        double roll = rng.random();
        if (roll < 0.08) return (uint32_t)rng.integers(1ULL << 32);
        int form = (int)rng.integers(FORMS);
        uint32_t simm16 = 0;
        for (int k = 0; k < FORM_FIELDS[form]; k++) {
            uint32_t lo = FORM_LO_BITS[form][k], hi = FORM_HI_BITS[form][k];
            uint32_t width = lo + hi;
            uint64_t value;
            if (rng.random() < 0.2)
                value = (1ULL << width) - 1;
            else
                value = rng.integers(0, (1ULL << width) < 6 ? (1ULL << width) : 6);
            simm16 |= (uint32_t)(value & ((1ULL << lo) - 1)) << FORM_LO_SHIFT[form][k];
            if (hi) simm16 |= (uint32_t)((value >> lo) & ((1ULL << hi) - 1)) << FORM_HI_SHIFT[form][k];
        }
        return FORM_BASE[form] | simm16;
    }

    void inputs(uint64_t cycle, uint32_t* row) {
        uint64_t phase = cycle / 120, offset = cycle % 120;
        bool burst = phase % 2 == 1;  // phases with few returns: counters fill up
        if (offset == 0) {
            focus = rng.integers(WAVES);
            if (burst) focus_cls = (phase / 2 + rng.integers(2)) % CLASSES;
        }
        uint64_t wave = rng.random() < 0.6 ? focus : rng.integers(WAVES);
        bool valid = rng.random() < 0.55;
        uint64_t cls = rng.integers(CLASSES);
        if (burst && rng.random() < 0.8) cls = focus_cls;
        if (valid)
            for (int n = 0; n < COUNTERS; n++)
                if (CLASS_COUNTERS[cls] >> n & 1) shadow[wave][n]++;
        put(row, IN_issue_valid, valid);
        put(row, IN_issue_wave, wave);
        put(row, IN_issue_cls, cls);
        for (int n = 0; n < COUNTERS; n++) {
            bool ret = rng.random() < (burst ? 0.03 : 0.45);
            uint64_t outstanding[WAVES], count = 0;
            for (int w = 0; w < WAVES; w++)
                if (shadow[w][n] > 0) outstanding[count++] = w;
            uint64_t target;
            if (count && rng.random() < 0.95)
                target = outstanding[rng.integers(count)];
            else
                target = rng.integers(WAVES);
            if (ret && shadow[target][n] > 0) shadow[target][n]--;
            put(row, RET_VALID[n], ret);
            put(row, RET_WAVE[n], target);
        }
        put(row, IN_wait_valid, rng.random() < 0.15);
        put(row, IN_wait_wave, rng.integers(WAVES));
        put(row, IN_wait_word, wait_word());
    }

    void outputs(uint64_t, const uint32_t*, const uint32_t*) {}  // no rule reads the outputs
};
