// The C++ main() that drives a verilated cycle-stepped block (ports `i` and `o`), one clock
// cycle per input row: the compiled counterpart of gpurtl.sim.harness.engine.CycleDriver.
//
// "cycle_config.h", written per build by gpurtl.sim.backends.fast.cycle, defines `Top` (the
// verilated class), IN_WORDS and OUT_WORDS (32-bit words of the packed `i` and `o`), IN_MASK
// (the valid bits of the last input word), the bit fields of both layouts (`Field IN_...`,
// `Field OUT_...`) and, for a block with a compiled stimulus, STIMULUS and the block's
// constants; the stimulus itself is "stimulus.h" (a `struct Stimulus`, see below).
//
// Per cycle: the inputs are set with `clk` low and evaluated, the outputs read, then `clk` rises
// and the design is evaluated again (the order of gpurtl.sim.harness.engine). Two cycles of
// reset come first, with every input zero.
//
// Modes (the last line on stdout is a JSON summary, or {"error": ...}):
//   sim --replay IN OUT CYCLES
//       input rows from the file IN, one per cycle; the output rows to OUT.
//   sim --session REQUEST_FD ANSWER_FD
//       serves gpurtl.sim.backends.fast.session.FastCycleSession over two pipes: any number of
//       cycles' input rows a request, answered by their output rows.
//   sim --generate IN OUT CYCLES SEED [DATA]
//       the block's compiled stimulus (only in a build that has one) makes each cycle's inputs,
//       hearing each cycle's outputs (its reactive rules), from the data file DATA where it
//       reads one; the input rows go to IN, the output rows to OUT, so the golden model can
//       check the run afterwards.
#include "cycle_config.h"
#include "verilated.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <vector>

#include "cycle_model.h"

static int fail(const char* what) {
    printf("{\"error\": \"%s\"}\n", what);
    return 1;
}

static FILE* open_buffered(const char* path, const char* mode) {
    FILE* file = fopen(path, mode);
    if (file) setvbuf(file, nullptr, _IOFBF, 1 << 20);
    return file;
}

static int replay_main(int argc, char** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s --replay IN OUT CYCLES\n", argv[0]);
        return 2;
    }
    FILE* in = open_buffered(argv[2], "rb");
    if (!in) return fail("cannot open the input file");
    FILE* out = open_buffered(argv[3], "wb");
    if (!out) return fail("cannot open the output file");
    uint64_t cycles = strtoull(argv[4], nullptr, 10);
    VerilatedContext* context = new VerilatedContext;
    {
        Block block{context};
        uint32_t in_row[IN_WORDS], out_row[OUT_WORDS];
        for (uint64_t t = 0; t < cycles; t++) {
            if (fread(in_row, 4, IN_WORDS, in) != (size_t)IN_WORDS)
                return fail("the input file is shorter than its cycle count");
            block.step(in_row, out_row);
            fwrite(out_row, 4, OUT_WORDS, out);
        }
    }
    if (fclose(out) != 0) return fail("cannot write the output file");
    fclose(in);
    delete context;
    printf("{\"cycles\": %" PRIu64 "}\n", cycles);
    return 0;
}

// ---- session mode: cycles in, outputs out, over two pipes ---------------------------------
static bool read_all(int fd, void* data, size_t size) {
    char* at = (char*)data;
    while (size) {
        ssize_t got = read(fd, at, size);
        if (got <= 0) return false;
        at += got;
        size -= (size_t)got;
    }
    return true;
}

static bool write_all(int fd, const void* data, size_t size) {
    const char* at = (const char*)data;
    while (size) {
        ssize_t put = write(fd, at, size);
        if (put <= 0) return false;
        at += put;
        size -= (size_t)put;
    }
    return true;
}

// A request is `u32 op, u32 cycles`; op 1 continues with `cycles` input rows and is answered by
// as many output rows, op 2 ends the session.
static int session_main(int argc, char** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s --session REQUEST_FD ANSWER_FD\n", argv[0]);
        return 2;
    }
    int requests = atoi(argv[2]), answers = atoi(argv[3]);
    VerilatedContext* context = new VerilatedContext;
    {
        Block block{context};
        std::vector<uint32_t> rows, outputs;
        for (;;) {
            uint32_t request[2];
            if (!read_all(requests, request, sizeof request) || request[0] == 2) break;
            if (request[0] != 1) return 3;
            rows.resize((size_t)request[1] * IN_WORDS);
            outputs.resize((size_t)request[1] * OUT_WORDS);
            if (!read_all(requests, rows.data(), rows.size() * 4)) return 3;
            for (uint32_t t = 0; t < request[1]; t++)
                block.step(&rows[(size_t)t * IN_WORDS], &outputs[(size_t)t * OUT_WORDS]);
            if (!write_all(answers, outputs.data(), outputs.size() * 4)) return 3;
        }
    }
    delete context;
    return 0;
}

#ifdef STIMULUS
#include "stimulus.h"

// `Stimulus` (stimulus.h): `Stimulus(uint64_t seed, const char* data)` (`data` the data file or
// null; `error` non-null if it cannot start), `void inputs(uint64_t cycle, uint32_t* row)`
// filling a zeroed input row, `void outputs(uint64_t cycle, const uint32_t* in, const uint32_t*
// out)` hearing the cycle's outputs.
static int generate_main(int argc, char** argv) {
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: %s --generate IN OUT CYCLES SEED [DATA]\n", argv[0]);
        return 2;
    }
    FILE* in = open_buffered(argv[2], "wb");
    if (!in) return fail("cannot open the input trace file");
    FILE* out = open_buffered(argv[3], "wb");
    if (!out) return fail("cannot open the output file");
    uint64_t cycles = strtoull(argv[4], nullptr, 10);
    Stimulus stimulus{strtoull(argv[5], nullptr, 10), argc == 7 ? argv[6] : nullptr};
    if (stimulus.error) return fail(stimulus.error);
    VerilatedContext* context = new VerilatedContext;
    {
        Block block{context};
        uint32_t in_row[IN_WORDS], out_row[OUT_WORDS];
        for (uint64_t t = 0; t < cycles; t++) {
            memset(in_row, 0, sizeof in_row);
            stimulus.inputs(t, in_row);
            in_row[IN_WORDS - 1] &= IN_MASK;
            fwrite(in_row, 4, IN_WORDS, in);
            block.step(in_row, out_row);
            stimulus.outputs(t, in_row, out_row);
            fwrite(out_row, 4, OUT_WORDS, out);
        }
    }
    if (fclose(out) != 0 || fclose(in) != 0) return fail("cannot write the trace files");
    delete context;
    printf("{\"cycles\": %" PRIu64 "}\n", cycles);
    return 0;
}
#endif

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "--replay") == 0) return replay_main(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--session") == 0) return session_main(argc, argv);
#ifdef STIMULUS
    if (argc > 1 && strcmp(argv[1], "--generate") == 0) return generate_main(argc, argv);
#endif
    fprintf(stderr, "usage: %s --replay IN OUT CYCLES | --session REQUEST_FD ANSWER_FD | "
                    "--generate IN OUT CYCLES SEED [DATA]\n", argv[0]);
    return 2;
}
