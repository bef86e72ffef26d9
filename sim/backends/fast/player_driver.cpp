// The compiled RT-unit player (gpurtl.sim.backends.fast.player): wave programs issued to the
// verilated PlayerUnit (the rt_unit build and a ds_bvh_stack, ports `i` and `o`) under the
// rules of the CU model's RT unit mode, gpurtl.golden.cu.rt_unit.run, with the levels below the
// L0 as gpurtl.golden.cu.rt_unit.HierarchyPort over gpurtl.golden.memory.Hierarchy answers them.
// Every RT unit result and every stack response is compared with the programs' expected words.
//
// "cycle_config.h", written per build by gpurtl.sim.backends.fast.player, defines `Top`,
// IN_WORDS, OUT_WORDS, IN_MASK, the bit fields of both packed rows (`Field IN_...`, `Field
// OUT_...`) and TAG_BITS.
//
// usage: sim PROGRAMS TIMING RECORDS WAVES MAX_CYCLES
//   PROGRAMS: the arrays of gpurtl.golden.traversal.program.WavePrograms, each a u64 element
//     count and the elements (see player._write_programs for the order);
//   TIMING: "slots simds lds_latency beats bvhcnt_max stack_stride levels" then per level below
//     the L0 "size ways delta lines_per_cycle mshrs";
//   RECORDS: written, per wave instruction in completion order, i64 wave, kind (0 bvh, 1 ds),
//     issue cycle, complete cycle; WAVES: per wave i64 slot, launch cycle, end cycle.
// The last line on stdout is a JSON summary, or {"error": ...}.
#include "cycle_config.h"
#include "verilated.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "cycle_model.h"

// The k-th element of an array field whose elements are `width` bits apart.
static inline Field at(Field first, uint32_t k, uint32_t width) {
    return Field{first.offset + k * width, first.width};
}

// ---- the levels below the L0: gpurtl.golden.memory.Hierarchy with the default hints ------
struct Cache {
    int64_t size = 0, sets = 0;
    int ways = 1, mshrs = 0;
    double delta = 0, lines_per_cycle = 1;
    // per set: (line, fill time), least recently used first
    std::vector<std::vector<std::pair<uint64_t, double>>> tags;
    double port_free = 0.0;
    std::priority_queue<double, std::vector<double>, std::greater<double>> fills;
    uint64_t accesses = 0, hits = 0, pending_hits = 0, misses = 0;

    void insert(uint64_t line, double fill) {
        auto& s = tags[line % (uint64_t)sets];
        for (size_t k = 0; k < s.size(); k++)
            if (s[k].first == line) {
                s.erase(s.begin() + (long)k);
                break;
            }
        if ((int)s.size() >= ways) s.erase(s.begin());
        s.emplace_back(line, fill);
    }
};

struct Hierarchy {
    std::vector<Cache> caches;

    // Cycle (a float, as the golden model's) at which `line` requested at `t` is back.
    double access(uint64_t line, double t, size_t level = 0) {
        Cache& c = caches[level];
        double start = std::max(t, c.port_free);
        c.port_free = start + 1.0 / c.lines_per_cycle;
        c.accesses++;
        if (!c.sets) {
            c.hits++;
            return start + c.delta;
        }
        auto& s = c.tags[line % (uint64_t)c.sets];
        for (size_t k = 0; k < s.size(); k++) {
            if (s[k].first != line) continue;
            double fill = s[k].second;
            s.erase(s.begin() + (long)k);  // a use makes the line the most recent
            s.emplace_back(line, fill);
            if (fill > start) {
                c.pending_hits++;
                return fill + c.delta;
            }
            c.hits++;
            return start + c.delta;
        }
        c.misses++;
        while (!c.fills.empty() && c.fills.top() <= start) c.fills.pop();
        if (c.mshrs && (int)c.fills.size() >= c.mshrs) {
            start = c.fills.top();
            c.fills.pop();
        }
        double fill = access(line, start, level + 1);
        c.fills.push(fill);
        c.insert(line, fill);
        return fill + c.delta;
    }

    void warm(const std::vector<uint32_t>& lines) {
        for (auto& c : caches)
            if (c.sets)
                for (uint32_t line : lines) {
                    auto& s = c.tags[line % (uint64_t)c.sets];
                    bool present = false;
                    for (auto& e : s) present = present || e.first == line;
                    if (!present) c.insert(line, 0.0);
                }
    }
};

// ---- the programs --------------------------------------------------------------------------
struct Programs {
    std::vector<int64_t> wave_iters, setup, shade, iter_lanes, iter_valu;
    std::vector<uint32_t> lane, dual, origin, dir, extent, imask, node_ptr, pflags, desc;
    std::vector<uint32_t> r_dw, r_origin, r_dir, r_status;
    std::vector<uint32_t> s_op, s_addr, s_last, s_data, s_prim, s_tri, s_new, s_dst, s_err;
    std::vector<uint32_t> lines, line_words;
};

template <typename T>
static bool read_array(FILE* f, std::vector<T>& out) {
    uint64_t n;
    if (fread(&n, 8, 1, f) != 1) return false;
    out.resize(n);
    return n == 0 || fread(out.data(), sizeof(T), n, f) == n;
}

static bool read_programs(const char* path, Programs& p) {
    FILE* f = fopen(path, "rb");
    if (!f) return false;
    bool ok = read_array(f, p.wave_iters) && read_array(f, p.setup) && read_array(f, p.shade) &&
              read_array(f, p.iter_lanes) && read_array(f, p.iter_valu) &&
              read_array(f, p.lane) && read_array(f, p.dual) && read_array(f, p.origin) &&
              read_array(f, p.dir) && read_array(f, p.extent) && read_array(f, p.imask) &&
              read_array(f, p.node_ptr) && read_array(f, p.pflags) && read_array(f, p.desc) &&
              read_array(f, p.r_dw) && read_array(f, p.r_origin) && read_array(f, p.r_dir) &&
              read_array(f, p.r_status) && read_array(f, p.s_op) && read_array(f, p.s_addr) &&
              read_array(f, p.s_last) && read_array(f, p.s_data) && read_array(f, p.s_prim) &&
              read_array(f, p.s_tri) && read_array(f, p.s_new) && read_array(f, p.s_dst) &&
              read_array(f, p.s_err) && read_array(f, p.lines) && read_array(f, p.line_words);
    fclose(f);
    return ok;
}

// ---- the run ---------------------------------------------------------------------------
enum State { VALU, BVH, DS, WAIT_BVH, NEXT, END };

struct Wave {
    int64_t index = -1, ready = 0, step = 0, steps = 0, count = 0, got = 0;
    int64_t issue = 0, complete = -1, launched = 0;
    int state = VALU;
    bool message = false;
    int64_t iteration() const { return step; }
};

struct Lane {  // a lane in the texture address path: entry, slot, first/last of its instruction
    int64_t entry;
    int slot;
    bool first, last;
};

struct StackJob {  // a stack request sent or to send, and whose expected response it has
    int64_t entry, wave, iteration;
    int slot;
};

struct Mismatch {
    int64_t wave, iteration, lane, cycle;
    std::string field;
    uint64_t got, want;
};

static int fail(const char* what) {
    printf("{\"error\": \"%s\"}\n", what);
    return 1;
}

int main(int argc, char** argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s PROGRAMS TIMING RECORDS WAVES MAX_CYCLES\n", argv[0]);
        return 2;
    }
    Programs p;
    if (!read_programs(argv[1], p)) return fail("cannot read the programs");
    FILE* tf = fopen(argv[2], "r");
    if (!tf) return fail("cannot read the timing parameters");
    int slots, simds, beats, bvhcnt_max, levels;
    int64_t lds_latency, stack_stride;
    if (fscanf(tf, "%d %d %" SCNd64 " %d %d %" SCNd64 " %d", &slots, &simds, &lds_latency, &beats,
               &bvhcnt_max, &stack_stride, &levels) != 7)
        return fail("bad timing parameters");
    Hierarchy memory;
    for (int k = 0; k < levels; k++) {
        Cache c;
        if (fscanf(tf, "%" SCNd64 " %d %lf %lf %d", &c.size, &c.ways, &c.delta,
                   &c.lines_per_cycle, &c.mshrs) != 5)
            return fail("bad level parameters");
        c.sets = c.size ? c.size / (128 * c.ways) : 0;
        c.tags.resize((size_t)c.sets);
        memory.caches.push_back(std::move(c));
    }
    fclose(tf);
    if (memory.caches.empty() || memory.caches.back().size) return fail("the last level must be DRAM");
    if (slots != (1 << TAG_BITS)) return fail("the slots differ from the build's tag_bits");
    uint64_t max_cycles = strtoull(argv[5], nullptr, 10);
    FILE* records = fopen(argv[3], "wb");
    if (!records) return fail("cannot write the records");
    const int64_t W = (int64_t)p.setup.size();
    std::vector<int64_t> wave_rows((size_t)W * 3, -1);
    memory.warm(p.lines);
    auto line_index = [&](uint64_t line) -> int64_t {
        auto it = std::lower_bound(p.lines.begin(), p.lines.end(), (uint32_t)line);
        if (it == p.lines.end() || *it != line) return -1;
        return it - p.lines.begin();
    };

    // the shader side (gpurtl.golden.cu.rt_unit.run)
    std::vector<Wave> waves((size_t)slots);
    std::vector<bool> live((size_t)slots, false);
    std::vector<int64_t> simd_free((size_t)simds, 0);
    int64_t lds_next = 0, next_wave = 0;
    std::deque<Lane> fifo;
    auto valu = [&](int slot, int64_t start, int64_t cost) {
        int64_t& free = simd_free[(size_t)(slot % simds)];
        int64_t begin = std::max(start, free);
        free = begin + cost;
        return begin + cost;
    };
    auto launch = [&](int slot, int64_t at) {
        Wave w;
        w.index = next_wave++;
        w.steps = p.wave_iters[(size_t)w.index + 1] - p.wave_iters[(size_t)w.index];
        w.message = w.steps > 0;
        w.ready = valu(slot, at, p.setup[(size_t)w.index]);
        w.state = VALU;
        w.launched = at;
        waves[(size_t)slot] = w;
        live[(size_t)slot] = true;
    };
    auto iter_of = [&](const Wave& w) { return p.wave_iters[(size_t)w.index] + w.step; };

    // the memory behind the L0 (gpurtl.golden.cu.rt_unit.HierarchyPort)
    std::vector<std::pair<int64_t, uint64_t>> due;  // (cycle due, line)
    bool offering = false;
    uint64_t offer = 0;
    int beat = 0;
    const uint32_t beat_words = 32 / (uint32_t)beats;

    // the stack (every request through ds_bvh_stack, checked in order)
    std::deque<StackJob> stack_queue, stack_sent;
    uint64_t stack_checked = 0;

    uint64_t mismatches = 0;
    std::vector<Mismatch> first;
    auto differ = [&](int64_t wave, int64_t iteration, int64_t lane, int64_t cycle,
                      const std::string& field, uint64_t got, uint64_t want) {
        if (got == want) return;
        mismatches++;
        if (first.size() < 20) first.push_back({wave, iteration, lane, cycle, field, got, want});
    };

    uint64_t lookups[3] = {0, 0, 0}, refused_full = 0, refused_other = 0, busy = 0, results = 0;
    int64_t in_flight = 0, in_flight_max = 0;
    double in_flight_sum = 0;
    uint32_t in_row[IN_WORDS], out_row[OUT_WORDS];
    const Field DESC = {IN_rt_inst_payload_desc_sort_en.offset, 18};
    const Field S_ADDR = {IN_ds_i_payload_stack_addr_valid_entries.offset, 32};
    const Field S_NEW = {OUT_ds_o_payload_stack_addr_valid_entries.offset, 32};

    VerilatedContext* context = new VerilatedContext;
    Block* model = new Block{context};  // deleted before the context; a failure leaves both
    Block& unit = *model;
    for (int slot = 0; slot < slots; slot++)
        if (next_wave < W) launch(slot, 0);
    uint64_t cycle = 0;
    auto any_live = [&]() {
        for (bool b : live)
            if (b) return true;
        return false;
    };

    // one cycle of the RTL with this cycle's RT unit lane and stack request
    auto stack_inputs = [&]() {
        if (stack_queue.empty()) return;
        const StackJob& job = stack_queue.front();
        size_t e = (size_t)job.entry;
        uint32_t shift = (uint32_t)(job.slot * stack_stride) << 15;
        put(in_row, IN_ds_i_valid, 1);
        put(in_row, IN_ds_i_payload_op, p.s_op[e]);
        put(in_row, S_ADDR, p.s_addr[e] + shift);
        put(in_row, IN_ds_i_payload_last_node_ptr, p.s_last[e]);
        for (uint32_t k = 0; k < 8; k++)
            put(in_row, at(IN_ds_i_payload_data_0, k, 32), p.s_data[e * 8 + k]);
        put(in_row, IN_ds_i_payload_tri_size_opt, p.s_tri[e]);
        put(in_row, IN_ds_i_payload_prim_range, p.s_prim[e]);
    };
    auto stack_outputs = [&](uint64_t now) {
        if (!stack_queue.empty() && get(out_row, OUT_ds_i_ready)) {
            stack_sent.push_back(stack_queue.front());
            stack_queue.pop_front();
        }
        if (get(out_row, OUT_ds_o_valid)) {
            if (stack_sent.empty()) return false;
            StackJob job = stack_sent.front();
            stack_sent.pop_front();
            size_t e = (size_t)job.entry;
            uint32_t shift = (uint32_t)(job.slot * stack_stride) << 15;
            int64_t lane = p.lane[e];
            differ(job.wave, job.iteration, lane, (int64_t)now, "stack_addr", get(out_row, S_NEW),
                   (uint32_t)(p.s_new[e] + shift));
            differ(job.wave, job.iteration, lane, (int64_t)now, "dst0",
                   get(out_row, OUT_ds_o_payload_dst0), p.s_dst[e * 2]);
            differ(job.wave, job.iteration, lane, (int64_t)now, "dst1",
                   get(out_row, OUT_ds_o_payload_dst1), p.s_dst[e * 2 + 1]);
            differ(job.wave, job.iteration, lane, (int64_t)now, "error",
                   get(out_row, OUT_ds_o_payload_error), p.s_err[e]);
            stack_checked++;
        }
        return true;
    };

    while (any_live() || !fifo.empty()) {
        if (cycle >= max_cycles) return fail("the waves did not end within the cycle limit");
        const int64_t now = (int64_t)cycle;
        bool issued = false;
        for (int slot = 0; slot < slots; slot++) {
            if (!live[(size_t)slot]) continue;
            Wave& w = waves[(size_t)slot];
            if (w.ready > now) continue;
            if (w.state == NEXT) {  // the stack answers are in: the next iteration
                w.step++;
                w.message = w.step < w.steps;
                w.state = VALU;
            }
            if (w.state == VALU) {
                if (!w.message) {
                    w.ready = valu(slot, now, p.shade[(size_t)w.index]);
                    w.state = END;
                    continue;
                }
                w.ready = valu(slot, now, p.iter_valu[(size_t)iter_of(w)]);
                w.state = BVH;
            } else if ((w.state == BVH || w.state == DS) && !issued) {
                issued = true;
                if (w.state == BVH) {
                    int64_t it = iter_of(w);
                    int64_t lo = p.iter_lanes[(size_t)it], hi = p.iter_lanes[(size_t)it + 1];
                    for (int64_t e = lo; e < hi; e++) fifo.push_back({e, slot, e == lo, e == hi - 1});
                    w.count = hi - lo;
                    w.got = 0;
                    w.issue = now;
                    w.complete = -1;
                    w.state = WAIT_BVH;
                    w.ready = now + 1;
                } else {
                    int64_t start = std::max(now + 1, lds_next);
                    lds_next = start + w.count;
                    int64_t done = lds_next - 1 + lds_latency;
                    int64_t row[4] = {w.index, 1, now, done};
                    fwrite(row, 8, 4, records);
                    w.state = NEXT;
                    w.ready = done + 1;
                }
            } else if (w.state == END) {
                int64_t* r = &wave_rows[(size_t)w.index * 3];
                r[0] = slot, r[1] = w.launched, r[2] = now;
                live[(size_t)slot] = false;
                if (next_wave < W) launch(slot, now + 1);
            }
        }
        // this cycle's inputs
        memset(in_row, 0, sizeof in_row);
        const Lane* head = fifo.empty() ? nullptr : &fifo.front();
        if (head) {
            size_t e = (size_t)head->entry;
            put(in_row, IN_rt_inst_valid, 1);
            put(in_row, IN_rt_inst_payload_tag, (uint64_t)head->slot);
            put(in_row, IN_rt_inst_payload_last, head->last);
            put(in_row, IN_rt_inst_payload_dual, p.dual[e]);
            for (uint32_t k = 0; k < 3; k++) {
                put(in_row, at(IN_rt_inst_payload_ray_origin_0, k, 32), p.origin[e * 3 + k]);
                put(in_row, at(IN_rt_inst_payload_ray_dir_0, k, 32), p.dir[e * 3 + k]);
            }
            put(in_row, IN_rt_inst_payload_ray_extent, p.extent[e]);
            put(in_row, IN_rt_inst_payload_ray_instance_mask, p.imask[e]);
            put(in_row, IN_rt_inst_payload_node_ptr_0, p.node_ptr[e * 2]);
            put(in_row, at(IN_rt_inst_payload_node_ptr_0, 1, 32), p.node_ptr[e * 2 + 1]);
            put(in_row, IN_rt_inst_payload_pointer_flags, p.pflags[e]);
            put(in_row, DESC, p.desc[e]);
        }
        put(in_row, IN_rt_out_ready, 1);
        put(in_row, IN_rt_mem_req_ready, 1);
        if (!offering) {
            size_t best = due.size();
            for (size_t k = 0; k < due.size(); k++)
                if (due[k].first <= now && (best == due.size() || due[k] < due[best])) best = k;
            if (best != due.size()) {
                offer = due[best].second;
                due.erase(due.begin() + (long)best);
                offering = true;
            }
        }
        if (offering) {
            put(in_row, IN_rt_fill_valid, 1);
            put(in_row, IN_rt_fill_payload_line, offer);
            int64_t index = line_index(offer);
            if (index >= 0)
                for (uint32_t k = 0; k < beat_words; k++)
                    put(in_row, at(IN_rt_fill_payload_data, k, 32),
                        p.line_words[(size_t)index * 32 + (size_t)beat * beat_words + k]);
        }
        stack_inputs();
        put(in_row, IN_ds_o_ready, 1);
        bool fill_offered = offering;
        unit.step(in_row, out_row);
        // the memory takes note of this cycle's transfers
        if (get(out_row, OUT_rt_mem_req_valid)) {
            uint64_t line = get(out_row, OUT_rt_mem_req_payload_line);
            due.emplace_back((int64_t)std::ceil(memory.access(line, (double)now)), line);
        }
        if (fill_offered && get(out_row, OUT_rt_fill_ready)) {
            beat = (beat + 1) % beats;
            if (beat == 0) offering = false;
        }
        bool any_count = false;
        int counts[64];
        for (int s = 0; s < slots; s++) {
            counts[s] = (int)get(out_row, at(OUT_rt_bvh_bvhcnt_0, (uint32_t)s,
                                             OUT_rt_bvh_bvhcnt_0.width));
            any_count = any_count || counts[s];
        }
        if (head && get(out_row, OUT_rt_inst_ready)) {
            fifo.pop_front();
            in_flight++;
        } else if (head) {
            bool full = head->first && counts[head->slot] == bvhcnt_max;
            (full ? refused_full : refused_other)++;
        }
        if (get(out_row, OUT_rt_event_valid)) lookups[get(out_row, OUT_rt_event_kind) % 3]++;
        // the RT unit's error flags stay low under these rules (no fill it did not ask for, no
        // dual instruction it cannot run, no wait word)
        differ(-1, -1, -1, now, "err.unexpected_fill", get(out_row, OUT_rt_err_unexpected_fill), 0);
        differ(-1, -1, -1, now, "err.dual", get(out_row, OUT_rt_err_dual), 0);
        busy += any_count;
        if (get(out_row, OUT_rt_out_valid)) {
            results++;
            in_flight--;
            int slot = (int)get(out_row, OUT_rt_out_payload_wave);
            Wave& w = waves[(size_t)slot];
            if (!live[(size_t)slot] || w.state != WAIT_BVH || w.got >= w.count) {
                char text[120];
                snprintf(text, sizeof text, "cycle %" PRIu64 ": an RT unit result for no waiting wave",
                         cycle);
                return fail(text);
            }
            int64_t it = iter_of(w);
            size_t e = (size_t)(p.iter_lanes[(size_t)it] + w.got);
            int64_t lane = p.lane[e];
            for (uint32_t k = 0; k < 10; k++)
                differ(w.index, w.step, lane, now, "dw[" + std::to_string(k) + "]",
                       get(out_row, at(OUT_rt_out_payload_result_dw_0, k, 32)), p.r_dw[e * 10 + k]);
            for (uint32_t k = 0; k < 3; k++) {
                differ(w.index, w.step, lane, now, "origin[" + std::to_string(k) + "]",
                       get(out_row, at(OUT_rt_out_payload_result_origin_0, k, 32)),
                       p.r_origin[e * 3 + k]);
                differ(w.index, w.step, lane, now, "dir[" + std::to_string(k) + "]",
                       get(out_row, at(OUT_rt_out_payload_result_dir_0, k, 32)),
                       p.r_dir[e * 3 + k]);
            }
            differ(w.index, w.step, lane, now, "status",
                   get(out_row, OUT_rt_out_payload_result_status), p.r_status[e]);
            differ(w.index, w.step, lane, now, "last", get(out_row, OUT_rt_out_payload_last),
                   w.got == w.count - 1);
            w.got++;
            if (w.got == w.count) w.complete = now;
        }
        if (!stack_outputs(cycle)) return fail("a ds_bvh_stack response for no request");
        in_flight_max = std::max(in_flight_max, in_flight);
        in_flight_sum += (double)in_flight;
        for (int slot = 0; slot < slots; slot++) {
            if (!live[(size_t)slot]) continue;
            Wave& w = waves[(size_t)slot];
            if (w.state != WAIT_BVH || w.complete < 0) continue;
            if (w.complete < now && counts[slot] == 0) {
                int64_t row[4] = {w.index, 0, w.issue, w.complete};
                fwrite(row, 8, 4, records);
                int64_t it = iter_of(w);
                for (int64_t e = p.iter_lanes[(size_t)it]; e < p.iter_lanes[(size_t)it + 1]; e++)
                    stack_queue.push_back({e, w.index, w.step, slot});
                w.state = DS;
                w.ready = now + 1;
            }
        }
        cycle++;
    }
    const uint64_t cycles = cycle;
    // the stack requests still in the RTL: their responses are checked too
    for (uint64_t extra = 0; !stack_queue.empty() || !stack_sent.empty(); extra++) {
        if (extra > 100000) return fail("the ds_bvh_stack RTL did not answer every request");
        memset(in_row, 0, sizeof in_row);
        put(in_row, IN_rt_out_ready, 1);
        put(in_row, IN_rt_mem_req_ready, 1);
        stack_inputs();
        put(in_row, IN_ds_o_ready, 1);
        unit.step(in_row, out_row);
        if (!stack_outputs(cycle + extra)) return fail("a ds_bvh_stack response for no request");
    }
    if (fclose(records) != 0) return fail("cannot write the records");
    FILE* wf = fopen(argv[4], "wb");
    if (!wf || fwrite(wave_rows.data(), 8, wave_rows.size(), wf) != wave_rows.size() ||
        fclose(wf) != 0)
        return fail("cannot write the wave records");
    delete model;
    delete context;

    printf("{\"cycles\": %" PRIu64 ", \"lookups\": {\"hit\": %" PRIu64 ", \"pending_hit\": %" PRIu64
           ", \"miss\": %" PRIu64 "}, \"refused\": {\"full\": %" PRIu64 ", \"other\": %" PRIu64
           "}, \"busy\": %" PRIu64 ", \"results\": %" PRIu64
           ", \"in_flight\": {\"max\": %" PRId64 ", \"mean\": %.6f}, \"stack_checked\": %" PRIu64
           ", \"mismatches\": %" PRIu64 ", \"first_mismatches\": [",
           cycles, lookups[0], lookups[1], lookups[2], refused_full, refused_other, busy, results,
           in_flight_max, cycles ? in_flight_sum / (double)cycles : 0.0, stack_checked,
           mismatches);
    for (size_t k = 0; k < first.size(); k++) {
        const Mismatch& m = first[k];
        printf("%s{\"wave\": %" PRId64 ", \"iteration\": %" PRId64 ", \"lane\": %" PRId64
               ", \"field\": \"%s\", \"got\": %" PRIu64 ", \"want\": %" PRIu64 ", \"cycle\": %" PRId64
               "}",
               k ? ", " : "", m.wave, m.iteration, m.lane, m.field.c_str(), m.got, m.want, m.cycle);
    }
    printf("], \"memory\": [");
    for (size_t k = 0; k < memory.caches.size(); k++) {
        const Cache& c = memory.caches[k];
        printf("%s{\"accesses\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"pending_hits\": %" PRIu64
               ", \"misses\": %" PRIu64 "}",
               k ? ", " : "", c.accesses, c.hits, c.pending_hits, c.misses);
    }
    printf("]}\n");
    return 0;
}
