// mtia_sim.hpp: the MTIA-sim runtime. A header-only C++17 library that executes the programming
// interface of docs/hardware/mtia-sim.md functionally (on host memory) and counts cycles with the
// manual's timing model (section 4 of the manual). Everything here is deterministic: the cycle
// count of a kernel depends only on the program and the shapes, never on the host.
//
// Functional part: device memory is host memory; a PE's local SRAM is one byte array
// (`Pe::sram()`); a DMA copies element by element as the program asks and tells the engine
// which bytes it moved (`DmaCopy::move`), so that alignment, bursts and SRAM ranges are known.
//
// Timing part: each PE has a control processor that issues one command per cycle in program
// order, and four engines (vector, SFU, reduction, DPE) plus one DMA port, each with its own
// timeline. A command starts when it is issued, its engine is free and its operands are ready
// (`ready` arguments: the cycle each operand was produced); it returns the cycle its result is
// ready. Blocking commands (direct loads from device memory, DMA waits) stall the control
// processor. Device-memory bandwidth is shared by the PEs that run concurrently.
//
// Illegal use raises `mtia::Error` with a rule id and the id of the offending call (the
// emitter numbers its calls; lowering/targets/mtia_sim/runtime.py maps the id back to the KIR op).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <initializer_list>
#include <math.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace mtia {

// ---- the chip (manual, section 2: capacities, rates and latencies) -----------------------------

constexpr int kPEs = 64;                      // an 8 x 8 grid of processing elements
constexpr uint64_t kSramBytes = 384 * 1024;   // local SRAM per PE
constexpr uint64_t kSramAlign = 64;           // SRAM allocation granularity
constexpr uint64_t kDmaAlign = 8;             // DMA rows start on 8-byte addresses (both sides)
constexpr uint64_t kBurst = 32;               // device memory moves 32-byte bursts
constexpr double kDeviceBytesPerCycle = 1600; // device memory, shared by all PEs
constexpr double kPortBytesPerCycle = 64;     // one PE's device-memory port (DMA and direct)
constexpr uint64_t kMemLatency = 500;         // device memory round trip, cycles
constexpr double kSramBytesPerCycle = 256;    // vector unit <-> local SRAM
constexpr uint64_t kVecLanes = 32;            // vector unit: elements of <= 32 bits per cycle
constexpr uint64_t kVecLatency = 4;
constexpr uint64_t kSfuPerCycle = 8;          // special-function unit: results per cycle
constexpr uint64_t kSfuLatency = 16;
constexpr uint64_t kRedPerCycle = 16;         // reduction engine: input elements per cycle
constexpr uint64_t kRedLatency = 8;
constexpr uint64_t kDpeTile = 32;             // DPE block: 32 x 32 x 32
constexpr uint64_t kDpeCycles16 = 32;         // per block with 16-bit (or 8-bit) operands
constexpr uint64_t kDpeCycles32 = 128;        // per block with f32 operands
constexpr uint64_t kDpeLatency = 32;
constexpr uint64_t kLaunchCycles = 2000;      // kernel launch

// ---- errors ----------------------------------------------------------------------------------

struct Error {
    std::string rule;     // mtia.dma-align, mtia.sram-overflow, mtia.dma-pending, ...
    std::string message;
    int call;             // the offending call
    int other;            // a related call (the DMA that was still in flight), or -1
};

[[noreturn]] inline void fail(const char* rule, int call, int other, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
inline void fail(const char* rule, int call, int other, const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    throw Error{rule, buf, call, other};
}

// ---- 16-bit floats (bf16 with round-to-nearest-even; f16 is the compiler's _Float16) -----------

struct bf16 {
    uint16_t bits;
};
inline float bf16_to_f32(bf16 x) {
    uint32_t u = (uint32_t)x.bits << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline bf16 f32_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{(uint16_t)((u >> 16) | 0x40)};  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return bf16{(uint16_t)(u >> 16)};
}
// One rounding from double: the float rounding can only err where it lands on a bf16 tie.
inline bf16 f64_to_bf16(double d) {
    float f = (float)d;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0xffffu) == 0x8000u && std::isfinite(d) && (double)f != d) {
        bool up = std::fabs(d) > std::fabs((double)f);
        return bf16{(uint16_t)((u >> 16) + (up ? 1 : 0))};
    }
    return f32_to_bf16(f);
}
inline bf16 bf16_bits(uint16_t b) { return bf16{b}; }
inline float f16_to_f32(_Float16 x) { return (float)x; }
inline _Float16 f32_to_f16(float f) { return (_Float16)f; }
inline _Float16 f64_to_f16(double d) { return (_Float16)d; }
inline _Float16 f16_bits(uint16_t b) {
    _Float16 r;
    std::memcpy(&r, &b, 2);
    return r;
}

inline float to_f32(float x) { return x; }
inline float to_f32(bf16 x) { return bf16_to_f32(x); }
inline float to_f32(_Float16 x) { return (float)x; }

inline uint64_t max_of(std::initializer_list<uint64_t> xs) {
    uint64_t m = 0;
    for (auto x : xs) m = std::max(m, x);
    return m;
}

// The DPE's arithmetic: out[m, n] = sum over k of a[m, k] * b[k, n], products and sums in f32,
// k ascending (row-major operands; the engine's timing is Pe::dpe).
template <typename TA, typename TB>
void matmul(const TA* a, const TB* b, float* out, int m, int n, int k) {
    std::vector<float> bf((size_t)k * n);
    for (size_t i = 0; i < bf.size(); ++i) bf[i] = to_f32(b[i]);
    for (int i = 0; i < m * n; ++i) out[i] = 0.0f;
    for (int i = 0; i < m; ++i)
        for (int kk = 0; kk < k; ++kk) {
            const float x = to_f32(a[(size_t)i * k + kk]);
            const float* brow = &bf[(size_t)kk * n];
            float* orow = out + (size_t)i * n;
            for (int j = 0; j < n; ++j) orow[j] += x * brow[j];
        }
}

// ---- device-memory access records --------------------------------------------------------------

// The bursts one command touches in device memory, element by element in program order: a new
// burst is counted whenever an element leaves the burst of the element before it, so a
// contiguous row costs bytes / 32 bursts and a scattered gather one burst per element.
struct Access {
    uint64_t bursts = 0, bytes = 0, last = ~0ull;
    void touch(const void* p, uint64_t size) {
        uint64_t a = (uint64_t)(uintptr_t)p, first = a / kBurst, end = (a + size - 1) / kBurst;
        bursts += (first == last) ? end - first : end - first + 1;
        last = end;
        bytes += size;
    }
};

// One DMA copy device memory -> SRAM, as the elements it moves: rows are maximal runs that are
// contiguous on both sides, and every row must start 8-byte aligned on both sides.
struct DmaCopy {
    int call;
    Access mem;
    uint64_t lo = ~0ull, hi = 0;  // SRAM bytes written
    uint64_t next_src = 0, next_dst = ~0ull, rows = 0;
    explicit DmaCopy(int c) : call(c) {}
    void move(const void* src, uint64_t dst, uint64_t size) {
        uint64_t s = (uint64_t)(uintptr_t)src;
        if (s != next_src || dst != next_dst) {
            if (s % kDmaAlign || dst % kDmaAlign)
                fail("mtia.dma-align", call, -1,
                     "DMA row starts at device address %#llx (%llu mod 8) and SRAM offset %llu (%llu mod 8): both "
                     "must be multiples of %llu bytes",
                     (unsigned long long)s, (unsigned long long)(s % kDmaAlign), (unsigned long long)dst,
                     (unsigned long long)(dst % kDmaAlign), (unsigned long long)kDmaAlign);
            rows++;
        }
        next_src = s + size;
        next_dst = dst + size;
        mem.touch(src, size);
        lo = std::min(lo, dst);
        hi = std::max(hi, dst + size);
    }
};

// ---- engines and the processing element -------------------------------------------------------

enum Engine { VEC = 0, SFU = 1, RED = 2, DPE = 3, ENGINES = 4 };

struct Stats {
    uint64_t busy[ENGINES] = {0, 0, 0, 0};
    uint64_t dma_bytes = 0, direct_bytes = 0, store_bytes = 0, stall = 0;
};

struct InFlight {
    uint64_t lo, hi, done;
    int call, group;
};

class Pe {
  public:
    explicit Pe(double port_rate) : rate_(port_rate), sram_(kSramBytes + kSramAlign) {}

    // -- programs (the grid runs program after program on each PE)
    void begin(uint64_t start) {
        start_ = start;
        moved_ = 0;
        issue_ = start;
        port_ = start;
        out_ = start;
        writes_ = start;
        for (auto& e : engine_) e = start;
        for (auto& b : busy_) b.clear();
        top_ = 0;
        open_ = 0;
        committed_.clear();
        inflight_.clear();
    }
    uint64_t end() const {
        uint64_t t = std::max(issue_, writes_);
        for (auto e : engine_) t = std::max(t, e);
        for (auto& f : inflight_) t = std::max(t, f.done);
        return t;
    }
    uint64_t now() const { return issue_; }
    const Stats& stats() const { return stats_; }

    // -- local SRAM
    unsigned char* sram() { return sram_.data(); }
    uint64_t sram_alloc(uint64_t bytes, int call) {
        uint64_t at = (top_ + kSramAlign - 1) / kSramAlign * kSramAlign;
        if (at + bytes > kSramBytes)
            fail("mtia.sram-overflow", call, -1,
                 "SRAM allocation of %llu bytes at offset %llu overflows the %llu bytes of local SRAM",
                 (unsigned long long)bytes, (unsigned long long)at, (unsigned long long)kSramBytes);
        top_ = at + bytes;
        return at;
    }
    // the vector unit reads or writes SRAM bytes [lo, hi): never while a DMA still writes them
    uint64_t sram_read(uint64_t lo, uint64_t hi, uint64_t ready, int call) {
        check_pending(lo, hi, call, "read");
        return exec(VEC, cdiv_d((double)(hi - lo), kSramBytesPerCycle), kVecLatency, ready);
    }
    uint64_t sram_write(uint64_t lo, uint64_t hi, uint64_t ready, int call) {
        check_pending(lo, hi, call, "write");
        return exec(VEC, cdiv_d((double)(hi - lo), kSramBytesPerCycle), kVecLatency, ready);
    }

    // -- DMA: asynchronous copies into SRAM, completing in groups counted by the DMA counter
    void dma_start(const DmaCopy& c, uint64_t ready) {
        issue_ += 1;
        if (c.mem.bytes == 0) return;
        port_ = transfer(port_, c.mem.bursts, ready);
        inflight_.push_back(InFlight{c.lo, c.hi, port_ + kMemLatency, c.call, open_});
        stats_.dma_bytes += c.mem.bytes;
    }
    void dma_commit() {
        committed_.push_back(open_);
        open_ += 1;
        issue_ += 1;
    }
    // block until at most `n` committed groups are in flight (the DMA counter reaches n)
    void dma_wait(int n, int /*call*/) {
        issue_ += 1;
        while ((int)committed_.size() > n) {
            int g = committed_.front();
            committed_.erase(committed_.begin());
            uint64_t done = 0;
            std::vector<InFlight> keep;
            for (auto& f : inflight_) {
                if (f.group == g) done = std::max(done, f.done);
                else keep.push_back(f);
            }
            inflight_.swap(keep);
            if (done > issue_) {
                stats_.stall += done - issue_;
                issue_ = done;
            }
        }
    }

    // -- direct access to device memory by the vector unit: blocking loads, posted stores
    uint64_t load(const Access& a, uint64_t ready) {
        issue_ += 1;
        if (a.bytes == 0) return issue_;
        port_ = transfer(port_, a.bursts, ready);
        uint64_t done = port_ + kMemLatency;
        stats_.direct_bytes += a.bytes;
        stats_.stall += done - issue_;
        issue_ = done;
        return done;
    }
    void store(const Access& a, uint64_t ready) {
        issue_ += 1;
        if (a.bytes == 0) return;
        out_ = transfer(out_, a.bursts, ready);
        writes_ = std::max(writes_, out_ + kMemLatency);
        stats_.store_bytes += a.bytes;
    }
    // read-modify-write in device memory: a load and a store of every burst, blocking
    uint64_t atomic(const Access& a, uint64_t ready) {
        issue_ += 1;
        if (a.bytes == 0) return issue_;
        port_ = transfer(port_, 2 * a.bursts, ready);
        uint64_t done = port_ + 2 * kMemLatency;
        stats_.stall += done - issue_;
        issue_ = done;
        return done;
    }

    // -- compute engines: return the cycle the result is ready
    uint64_t vector(uint64_t n, uint64_t elem_bytes, uint64_t ready) {
        uint64_t per = elem_bytes > 4 ? kVecLanes / 2 : kVecLanes;
        return exec(VEC, (n + per - 1) / per, kVecLatency, ready);
    }
    uint64_t sfu(uint64_t n, uint64_t ready) { return exec(SFU, (n + kSfuPerCycle - 1) / kSfuPerCycle, kSfuLatency, ready); }
    uint64_t reduce(uint64_t n, uint64_t ready) {
        uint64_t levels = 0;
        while ((1ull << levels) < std::max<uint64_t>(n, 1)) levels++;
        return exec(RED, (n + kRedPerCycle - 1) / kRedPerCycle, kRedLatency + levels, ready);
    }
    uint64_t dpe(uint64_t m, uint64_t n, uint64_t k, bool wide, uint64_t ready) {
        uint64_t blocks = cdiv(m, kDpeTile) * cdiv(n, kDpeTile) * cdiv(k, kDpeTile);
        return exec(DPE, blocks * (wide ? kDpeCycles32 : kDpeCycles16), kDpeLatency, ready);
    }
    // scalar arithmetic on values the engines produced runs on the vector unit (one lane, one
    // cycle) without stalling the control processor; `need` is the stall for a value that decides
    // control flow (a branch, a loop bound)
    uint64_t scalar(uint64_t ready) { return exec(VEC, 1, 1, ready); }
    void need(uint64_t ready) {
        if (ready > issue_) {
            stats_.stall += ready - issue_;
            issue_ = ready;
        }
    }

  private:
    static uint64_t cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
    static uint64_t cdiv_d(double bytes, double rate) { return (uint64_t)std::ceil(bytes / rate); }
    // One transfer on a queue of the port (reads: DMA, loads, atomics; writes: stores), which
    // starts when issued, its queue is free and its data is ready, and ends no earlier than the
    // port could have moved every burst issued so far on both queues: the two queues overlap,
    // but the PE never moves more than its share of device-memory bandwidth.
    uint64_t transfer(uint64_t queue, uint64_t bursts, uint64_t ready) {
        uint64_t start = std::max({issue_, queue, ready});
        moved_ += bursts * kBurst;
        return std::max(start + cdiv_d((double)(bursts * kBurst), rate_), start_ + cdiv_d((double)moved_, rate_));
    }
    // An engine runs each command as soon as the command is issued, its operands are ready and
    // the engine has a free slot that long: commands whose operands are ready dispatch ahead of
    // earlier ones still waiting (the engine's scoreboard), never two at once.
    uint64_t exec(Engine e, uint64_t busy, uint64_t latency, uint64_t ready) {
        issue_ += 1;
        auto& slots = busy_[e];
        size_t keep = 0;  // nothing can start before issue_ any more: drop what ended
        for (auto& iv : slots)
            if (iv.second > issue_) slots[keep++] = iv;
        slots.resize(keep);
        uint64_t t = std::max(issue_, ready);
        size_t at = 0;
        for (; at < slots.size(); ++at) {
            if (slots[at].second <= t) continue;
            if (t + busy <= slots[at].first) break;
            t = std::max(t, slots[at].second);
        }
        slots.insert(slots.begin() + at, {t, t + busy});
        engine_[e] = std::max(engine_[e], t + busy);
        stats_.busy[e] += busy;
        return t + busy + latency;
    }
    void check_pending(uint64_t lo, uint64_t hi, int call, const char* what) {
        for (auto& f : inflight_)
            if (f.lo < hi && lo < f.hi)
                fail("mtia.dma-pending", call, f.call,
                     "%s of SRAM bytes [%llu, %llu) while a DMA into [%llu, %llu) is still in flight: wait on its "
                     "counter (dma_wait) first",
                     what, (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)f.lo,
                     (unsigned long long)f.hi);
    }

    double rate_;
    std::vector<unsigned char> sram_;
    uint64_t start_ = 0, moved_ = 0;     // this program's first cycle, bytes through the port
    uint64_t issue_ = 0, port_ = 0, out_ = 0, writes_ = 0, top_ = 0;
    uint64_t engine_[ENGINES] = {0, 0, 0, 0};  // when each engine's last command ends
    std::vector<std::pair<uint64_t, uint64_t>> busy_[ENGINES];  // its commands not yet ended
    int open_ = 0;
    std::vector<int> committed_;
    std::vector<InFlight> inflight_;
    Stats stats_;
};

// ---- the device: a grid of programs over the PEs ------------------------------------------------

// Program l (grid axis 0 fastest) runs on PE l % 64, after the programs before it on that PE.
// The PEs that run at once share device memory: each port gets min(64, 1600 / active) bytes per
// cycle, `active` being the number of PEs that have programs (min(64, programs)).
struct Launch {
    uint64_t cycles = 0;
    Stats stats;
};

template <typename Body>
Launch run_grid(const int grid[3], Body&& body) {
    uint64_t programs = (uint64_t)grid[0] * grid[1] * grid[2];
    uint64_t active = std::min<uint64_t>(kPEs, std::max<uint64_t>(programs, 1));
    double rate = std::min(kPortBytesPerCycle, kDeviceBytesPerCycle / (double)active);
    Pe pe(rate);
    std::vector<uint64_t> clock(kPEs, 0);
    uint64_t l = 0;
    for (int z = 0; z < grid[2]; ++z)
        for (int y = 0; y < grid[1]; ++y)
            for (int x = 0; x < grid[0]; ++x, ++l) {
                int p = (int)(l % kPEs);
                pe.begin(clock[p]);
                const int pid[3] = {x, y, z};
                body(pe, pid);
                clock[p] = pe.end();
            }
    Launch out;
    out.cycles = kLaunchCycles + *std::max_element(clock.begin(), clock.end());
    out.stats = pe.stats();
    return out;
}

}  // namespace mtia
