// In-simulation AXI4 memory slaves of the testbench top (sim/tb/top.py), called through DPI-C.
//
// A C++ port of verif/axi_slave.py AxiSlaveCore (timing profiles nvidia/fast: the same delay
// line, the same "request taken one cycle before the handshake" rule, read data taken from
// memory when the request is taken; random: the same rules, the same random numbers - CPython's
// Mersenne Twister with its seeding, random() and randint()/choice() - drawn in the same order,
// and the same idle sleep as the Python adapter, so a seed gives the same timing in both) and of
// verif/monitors.py AxiMonitor (same checks, same messages), backed by a sparse byte memory
// (pages allocated on first write, zero elsewhere, addresses wrapped at the configured address
// width like verif/mem.py SparseMemory).
//
// NPORTS independent instances (memory, timing, monitor, counters), one per AXI port of
// NV_nvdla: port 0 nvdla_core2dbb_* (primary memory), port 1 nvdla_core2cvsram_* (the
// secondary memory, sec_mem, when the DUT has that port).
//
// Evaluation: tb_axi_eval(port, ...) at every falling edge of dla_core_clk (where the Python
// adapter evaluates its core) with the master's outputs; it returns the slave inputs for the
// next rising edge. tb_axi_settle(port, ...) at the rising edge (random profile only:
// rready/bready as that edge samples them). Python (sim/tb/simmem.py) reaches the state through
// the extern "C" simmem_* functions, whose first argument is the port (the simulator is linked
// with --export-dynamic; ctypes.CDLL(None)).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "Vtop__Dpi.h"

namespace {

constexpr int PAGE_BITS = 16;
constexpr uint64_t PAGE = 1ull << PAGE_BITS;
constexpr int MAX_BYTES = 64;        // widest beat: 512 bits
constexpr double STALL = 0.25;       // random profile: stall probability per channel and cycle
constexpr int NPORTS = 2;            // 0: nvdla_core2dbb, 1: nvdla_core2cvsram

// ---- CPython's random.Random -------------------------------------------------------------------
// MT19937 seeded like random.seed(n) for an int n >= 0 (init_by_array over the 32-bit words of
// n, least significant first; one word 0 for n = 0), random() from two draws (53 bits), and
// _randbelow(n) by rejection over getrandbits(n.bit_length()) (randint(0, b) = below(b + 1),
// choice(seq) = seq[below(len(seq))]): the numbers verif/axi_slave.py's random profile draws.
struct PyRandom {
    static constexpr int N = 624, M = 397;
    uint32_t mt[N];
    int mti = N + 1;

    void init_genrand(uint32_t s) {
        mt[0] = s;
        for (mti = 1; mti < N; mti++)
            mt[mti] = 1812433253u * (mt[mti - 1] ^ (mt[mti - 1] >> 30)) + (uint32_t)mti;
    }
    void seed(uint64_t s) {
        uint32_t key[2] = {(uint32_t)s, (uint32_t)(s >> 32)};
        int len = key[1] ? 2 : 1;
        init_genrand(19650218u);
        int i = 1, j = 0;
        for (int k = N > len ? N : len; k; k--) {
            mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525u)) + key[j] + (uint32_t)j;
            i++; j++;
            if (i >= N) { mt[0] = mt[N - 1]; i = 1; }
            if (j >= len) j = 0;
        }
        for (int k = N - 1; k; k--) {
            mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
            i++;
            if (i >= N) { mt[0] = mt[N - 1]; i = 1; }
        }
        mt[0] = 0x80000000u;
    }
    uint32_t next() {
        static const uint32_t mag01[2] = {0x0u, 0x9908b0dfu};
        uint32_t y;
        if (mti >= N) {
            int kk;
            for (kk = 0; kk < N - M; kk++) {
                y = (mt[kk] & 0x80000000u) | (mt[kk + 1] & 0x7fffffffu);
                mt[kk] = mt[kk + M] ^ (y >> 1) ^ mag01[y & 1];
            }
            for (; kk < N - 1; kk++) {
                y = (mt[kk] & 0x80000000u) | (mt[kk + 1] & 0x7fffffffu);
                mt[kk] = mt[kk + (M - N)] ^ (y >> 1) ^ mag01[y & 1];
            }
            y = (mt[N - 1] & 0x80000000u) | (mt[0] & 0x7fffffffu);
            mt[N - 1] = mt[M - 1] ^ (y >> 1) ^ mag01[y & 1];
            mti = 0;
        }
        y = mt[mti++];
        y ^= (y >> 11);
        y ^= (y << 7) & 0x9d2c5680u;
        y ^= (y << 15) & 0xefc60000u;
        y ^= (y >> 18);
        return y;
    }
    double random() {
        uint32_t a = next() >> 5, b = next() >> 6;
        return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
    }
    uint64_t getrandbits(int k) {          // 1 <= k <= 64
        if (k <= 32) return next() >> (32 - k);
        uint64_t lo = next();
        return lo | ((uint64_t)(next() >> (64 - k)) << 32);
    }
    uint64_t below(uint64_t n) {           // n >= 1
        int k = 64 - __builtin_clzll(n);
        uint64_t r = getrandbits(k);
        while (r >= n) r = getrandbits(k);
        return r;
    }
};

// per-ID queues in the order the IDs were first used since the reset (Python's dict order,
// which decides what choice() picks among the due IDs)
template <class T> struct IdQueues {
    std::vector<std::pair<int, std::deque<T>>> q;
    std::deque<T>& operator[](int id) {
        for (auto& kv : q) if (kv.first == id) return kv.second;
        q.emplace_back(id, std::deque<T>());
        return q.back().second;
    }
    bool empty() const {
        for (auto& kv : q) if (!kv.second.empty()) return false;
        return true;
    }
    void clear() { q.clear(); }
};

// ---- sparse memory --------------------------------------------------------------------------
struct Memory {
    uint64_t mask = 0xFFFFFFFFull;
    std::unordered_map<uint64_t, std::unique_ptr<uint8_t[]>> pages;
    uint64_t last_pn = ~0ull;
    uint8_t* last_page = nullptr;

    uint8_t* page(uint64_t pn, bool create) {
        if (pn == last_pn && last_page) return last_page;
        auto it = pages.find(pn);
        if (it == pages.end()) {
            if (!create) return nullptr;
            auto p = std::make_unique<uint8_t[]>(PAGE);
            std::memset(p.get(), 0, PAGE);
            it = pages.emplace(pn, std::move(p)).first;
        }
        last_pn = pn;
        last_page = it->second.get();
        return last_page;
    }
    void clear() { pages.clear(); last_pn = ~0ull; last_page = nullptr; }
    // chunks never cross a page or the wrap at the address width
    template <class F> void chunks(uint64_t addr, uint64_t size, F f) {
        uint64_t pos = 0;
        while (pos < size) {
            uint64_t a = (addr + pos) & mask;
            uint64_t off = a & (PAGE - 1);
            uint64_t n = std::min(PAGE - off, size - pos);
            if (mask - a + 1 != 0) n = std::min(n, mask - a + 1);
            f(a >> PAGE_BITS, off, pos, n);
            pos += n;
        }
    }
    void write(uint64_t addr, const uint8_t* d, uint64_t n) {
        chunks(addr, n, [&](uint64_t pn, uint64_t off, uint64_t pos, uint64_t k) {
            std::memcpy(page(pn, true) + off, d + pos, k);
        });
    }
    void read(uint64_t addr, uint8_t* d, uint64_t n) {
        chunks(addr, n, [&](uint64_t pn, uint64_t off, uint64_t pos, uint64_t k) {
            uint8_t* p = page(pn, false);
            if (p) std::memcpy(d + pos, p + off, k); else std::memset(d + pos, 0, k);
        });
    }
    void fill(uint64_t addr, uint64_t n, uint8_t v) {
        chunks(addr, n, [&](uint64_t pn, uint64_t off, uint64_t, uint64_t k) {
            if (v == 0 && k == PAGE) {
                if (pages.erase(pn) && pn == last_pn) { last_pn = ~0ull; last_page = nullptr; }
                return;
            }
            uint8_t* p = page(pn, v != 0);
            if (p) std::memset(p + off, v, k);
        });
    }
};

struct Beat {
    int id = 0, last = 0;
    uint8_t data[MAX_BYTES] = {};
};

std::string hexs(uint64_t v) {
    char b[32];
    std::snprintf(b, sizeof b, "%#llx", (unsigned long long)v);
    return v ? std::string(b) : std::string("0x0");
}

std::string hexbytes(const uint8_t* d, int n) {      // little-endian bytes as Python's {:#x}
    std::string s;
    int i = n - 1;
    while (i > 0 && d[i] == 0) --i;
    char b[4];
    std::snprintf(b, sizeof b, "%x", d[i]);
    s = b;
    for (--i; i >= 0; --i) { std::snprintf(b, sizeof b, "%02x", d[i]); s += b; }
    return "0x" + s;
}

// ---- master outputs of one cycle -----------------------------------------------------------
struct In {
    int arvalid, arid, arlen, awvalid, awid, awlen, wvalid, wlast, rready, bready;
    uint64_t araddr, awaddr, wstrb;
    uint8_t wdata[MAX_BYTES];
};

struct Out {
    int arready = 1, awready = 1, wready = 1, rvalid = 0, rid = 0, rlast = 0, bvalid = 0, bid = 0;
    uint8_t rdata[MAX_BYTES] = {};
};

// ---- protocol monitor (verif/monitors.py AxiMonitor) ---------------------------------------
struct Payload {              // ar/aw: a=id b=addr c=len; w: data, b=strb c=last
    uint64_t a = 0, b = 0, c = 0;
    uint8_t data[MAX_BYTES] = {};
};

struct Monitor {
    int nbytes = 8;
    bool any_ids = true;
    std::vector<bool> read_ids, write_ids;
    bool stalled[3] = {false, false, false};   // ar aw w
    uint64_t since[3] = {0, 0, 0};
    Payload held[3];
    bool any_stall = false;
    std::map<int, std::deque<int>> rd_out;
    std::map<int, int> wr_resp;
    std::deque<std::pair<int, int>> aw_lens;
    std::deque<int> w_early;
    int w_beats = 0;
    bool quiet = false;
    std::string error;
    uint64_t handshakes[5] = {0, 0, 0, 0, 0};   // ar aw w r b

    void reset(bool keep_error) {
        for (int i = 0; i < 3; ++i) stalled[i] = false;
        any_stall = false;
        rd_out.clear(); wr_resp.clear(); aw_lens.clear(); w_early.clear();
        w_beats = 0;
        quiet = false;
        if (!keep_error) {
            error.clear();
            for (auto& h : handshakes) h = 0;
        }
    }
    void fail(uint64_t now, const char* ch, const std::string& msg) {
        if (!error.empty()) return;
        std::string c(ch);
        for (auto& x : c) x = (char)toupper(x);
        error = "AXI " + c + " at cycle " + std::to_string(now) + ": " + msg;
    }
    std::string fmt(int ch, const Payload& p) const {
        if (ch == 0) return "arid=" + hexs(p.a) + " araddr=" + hexs(p.b) + " arlen=" + hexs(p.c);
        if (ch == 1) return "awid=" + hexs(p.a) + " awaddr=" + hexs(p.b) + " awlen=" + hexs(p.c);
        return "wdata=" + hexbytes(p.data, nbytes) + " wstrb=" + hexs(p.b) + " wlast=" + hexs(p.c);
    }
    bool same(int ch, const Payload& x, const Payload& y) const {
        if (x.a != y.a || x.b != y.b || x.c != y.c) return false;
        return ch != 2 || std::memcmp(x.data, y.data, nbytes) == 0;
    }
    static const char* name(int ch) { return ch == 0 ? "ar" : ch == 1 ? "aw" : "w"; }

    void held_error(uint64_t now, int ch, const Payload* p) {
        const char* c = name(ch);
        if (!p)
            fail(now, c, std::string(c) + "valid dropped before " + c + "ready (stalled since cycle "
                         + std::to_string(since[ch]) + ", " + fmt(ch, held[ch]) + ")");
        else
            fail(now, c, "payload changed while stalled (since cycle " + std::to_string(since[ch])
                         + "): " + fmt(ch, held[ch]) + " -> " + fmt(ch, *p));
    }

    void requests(uint64_t now, const In& in, const Out& out, int arv, int awv, int wv) {
        if (quiet && (arv || awv || wv)) {
            std::string names;
            const char* first = nullptr;
            const char* nm[3] = {"arvalid", "awvalid", "wvalid"};
            int vv[3] = {arv, awv, wv};
            for (int i = 0; i < 3; ++i)
                if (vv[i]) {
                    if (!first) first = name(i);
                    if (!names.empty()) names += ", ";
                    names += nm[i];
                }
            fail(now, first, names + " after a reset in the middle of a layer, before any layer was "
                                     "enabled again (a request or beat of the aborted layer)");
        }
        if (arv || stalled[0]) {
            Payload p; p.a = (uint64_t)in.arid; p.b = in.araddr; p.c = (uint64_t)in.arlen;
            request(now, 0, arv, out.arready, p);
        }
        if (awv || stalled[1]) {
            Payload p; p.a = (uint64_t)in.awid; p.b = in.awaddr; p.c = (uint64_t)in.awlen;
            request(now, 1, awv, out.awready, p);
        }
        if (wv || stalled[2]) wbeat(now, in, wv, out.wready);
        any_stall = stalled[0] || stalled[1] || stalled[2];
    }

    void request(uint64_t now, int ch, int valid, int ready, const Payload& p) {
        if (!valid) {
            held_error(now, ch, nullptr);
            stalled[ch] = false;
            return;
        }
        bool was = stalled[ch];
        if (!was) new_request(now, ch, p);
        else if (!same(ch, p, held[ch])) held_error(now, ch, &p);
        if (!ready) {
            if (!was) { stalled[ch] = true; since[ch] = now; held[ch] = p; }
            return;
        }
        stalled[ch] = false;
        handshakes[ch]++;
    }

    void new_request(uint64_t now, int ch, const Payload& p) {
        int id = (int)p.a;
        const std::vector<bool>& ids = ch == 0 ? read_ids : write_ids;
        const char* c = name(ch);
        if (!any_ids && (id < 0 || id >= (int)ids.size() || !ids[id])) {
            std::string allowed = "[";
            for (size_t i = 0; i < ids.size(); ++i)
                if (ids[i]) { if (allowed.size() > 1) allowed += ", "; allowed += std::to_string(i); }
            allowed += "]";
            fail(now, c, std::string(c) + "id " + std::to_string(id) + " is not a client ID (allowed "
                         + allowed + "; " + fmt(ch, p) + ")");
        }
        uint64_t start = p.b & ~(uint64_t)(nbytes - 1);
        uint64_t end = start + (p.c + 1) * (uint64_t)nbytes - 1;
        if (start / 4096 != end / 4096)
            fail(now, c, "burst " + hexs(start) + ".." + hexs(end) + " (" + std::to_string(p.c + 1)
                         + " beats) crosses a 4 KB boundary (" + fmt(ch, p) + ")");
        if (ch == 0) {
            rd_out[id].push_back((int)p.c + 1);
        } else {
            aw_lens.emplace_back(id, (int)p.c + 1);
            if (!w_early.empty()) {
                int b = w_early.front();
                w_early.pop_front();
                match_w(now, b);
            }
        }
    }

    void match_w(uint64_t now, int beats) {
        auto [wid, n] = aw_lens.front();
        aw_lens.pop_front();
        if (beats != n)
            fail(now, "w", "burst of " + std::to_string(beats) + " beats ended by wlast, but its AW (id "
                           + std::to_string(wid) + ") has awlen " + std::to_string(n - 1) + " ("
                           + std::to_string(n) + " beats)");
        wr_resp[wid] += 1;
    }

    void wbeat(uint64_t now, const In& in, int valid, int ready) {
        if (!valid) {
            held_error(now, 2, nullptr);
            stalled[2] = false;
            return;
        }
        int last;
        if (!stalled[2] && ready) {
            last = in.wlast;
        } else {
            Payload p;
            std::memcpy(p.data, in.wdata, nbytes);
            p.b = in.wstrb; p.c = (uint64_t)in.wlast;
            if (stalled[2] && !same(2, p, held[2])) held_error(now, 2, &p);
            if (!ready) {
                if (!stalled[2]) { stalled[2] = true; since[2] = now; held[2] = p; }
                return;
            }
            stalled[2] = false;
            last = (int)p.c;
        }
        handshakes[2]++;
        w_beats++;
        if (!aw_lens.empty() && w_early.empty()) {
            auto [wid, n] = aw_lens.front();
            if (!last && w_beats >= n) {
                fail(now, "w", "beat " + std::to_string(w_beats) + " of a " + std::to_string(n)
                               + "-beat burst (awid " + std::to_string(wid) + ", awlen "
                               + std::to_string(n - 1) + ") without wlast");
            } else if (last) {
                match_w(now, w_beats);
                w_beats = 0;
            }
        } else if (last) {
            w_early.push_back(w_beats);
            w_beats = 0;
        }
    }

    void check_idle(uint64_t now) {
        if (!w_early.empty() || w_beats) {
            fail(now, "w", std::to_string(w_early.size()) + " complete W burst(s) and "
                           + std::to_string(w_beats) + " beat(s) without an AW at the end of the trace");
        } else if (!aw_lens.empty()) {
            auto [wid, n] = aw_lens.front();
            fail(now, "aw", std::to_string(aw_lens.size()) + " AW burst(s) without their W beats at "
                            "the end of the trace (oldest: awid " + std::to_string(wid) + ", "
                            + std::to_string(n) + " beats)");
        }
    }

    void r_beat(uint64_t now, int rid, int rlast) {
        handshakes[3]++;
        auto it = rd_out.find(rid);
        if (it == rd_out.end() || it->second.empty()) {
            fail(now, "r", "R beat with rid " + std::to_string(rid) + ": no read of that ID outstanding");
            return;
        }
        auto& q = it->second;
        q.front() -= 1;
        if ((rlast != 0) != (q.front() == 0))
            fail(now, "r", "rlast=" + std::to_string(rlast) + " with " + std::to_string(q.front())
                           + " beats of the burst (rid " + std::to_string(rid) + ") left");
        if (q.front() == 0 || rlast) q.pop_front();
    }

    void b_resp(uint64_t now, int bid) {
        handshakes[4]++;
        int& n = wr_resp[bid];
        if (n == 0) {
            fail(now, "b", "B response with bid " + std::to_string(bid) + ": no complete write burst "
                           "of that ID outstanding");
            return;
        }
        n -= 1;
    }
};

// ---- the slave core (verif/axi_slave.py AxiSlaveCore) ---------------------------------------
struct AwEntry { int id; uint64_t addr; int left; };
struct WEntry { uint8_t data[MAX_BYTES]; uint64_t strb; int last; };
struct Slot { uint64_t empties; Beat beat; };          // empties > 0: a run of empty slots
struct Due { uint64_t due; std::vector<Beat> beats; };

enum { NVIDIA = 0, FAST = 1, RANDOM = 2 };

struct Core {
    Memory mem;
    Monitor mon;
    bool monitor_on = true;
    int nbytes = 8;
    int profile = NVIDIA;
    int read_latency = 32, accept_every = 2;
    uint64_t seed = 0;
    int mode = 0;              // 0: readies and valids low (in reset); 1: idle outputs; 2: run
    PyRandom rng;
    uint64_t now = 0;
    Out out;
    std::deque<AwEntry> aw_fifo;
    std::deque<WEntry> w_fifo;
    int ar_wait = 0, aw_wait = 0;
    uint64_t rd_beats = 0, wr_beats = 0, rd_reqs = 0, wr_reqs = 0;
    std::string own_error;
    // in-order
    std::deque<int> b_fifo;
    std::deque<Beat> r_fifo;
    std::deque<Slot> r0;
    uint64_t r0_beats = 0;
    // random
    IdQueues<Due> rq;
    IdQueues<uint64_t> bq;
    // random: the Python adapter's idle sleep (verif/trace/rtl_engine.py AxiResponder._run): after
    // a cycle without a request valid and with nothing in flight the core is not evaluated (no
    // random draws) until arvalid/awvalid/wvalid is high or rready differs from sleep_rready
    bool sleeping = false;
    int sleep_rready = 0;
    std::deque<Beat> r_burst;
    bool r_cur = false, b_cur = false;
    int r_ready_seen = 0, b_ready_seen = 0;
    bool seen = false;
    bool driven = false;       // random: drive() ran since the last settle()
    int v[3] = {0, 0, 0};
    bool rb = false, bb = false;
    int rb_id = 0, rb_last = 0, bb_id = 0;

    const std::string& error() const { return own_error.empty() && monitor_on ? mon.error : own_error; }

    void reset(bool keep_error) {
        std::string err = keep_error ? error() : std::string();
        rng.seed(seed);
        now = 0;
        out = Out();
        aw_fifo.clear(); w_fifo.clear();
        ar_wait = aw_wait = 0;
        rd_beats = wr_beats = rd_reqs = wr_reqs = 0;
        own_error.clear();
        mon.reset(keep_error);
        if (keep_error && error().empty()) own_error = err;
        b_fifo.clear(); r_fifo.clear(); r0.clear(); r0_beats = 0;
        if (read_latency) r0.push_back(Slot{(uint64_t)read_latency, Beat()});
        rq.clear(); bq.clear(); r_burst.clear();
        r_cur = b_cur = false;
        r_ready_seen = b_ready_seen = 0;
        seen = false;
        driven = sleeping = false;
    }

    bool idle() const {
        bool rqe = rq.empty(), bqe = bq.empty();
        return !(!r_fifo.empty() || r0_beats || !b_fifo.empty() || (!aw_fifo.empty() && !w_fifo.empty())
                 || ar_wait || aw_wait || out.rvalid || out.bvalid || r_cur || b_cur
                 || !r_burst.empty() || !rqe || !bqe);
    }

    void read_word(uint64_t addr, uint8_t* d) { mem.read(addr, d, nbytes); }

    void write_beat_() {
        AwEntry& aw = aw_fifo.front();
        WEntry w = w_fifo.front();
        w_fifo.pop_front();
        if ((w.last != 0) != (aw.left == 0) && error().empty())
            own_error = "AXI write: wlast=" + std::to_string(w.last) + " but " + std::to_string(aw.left)
                        + " beats remain for the burst at " + hexs(aw.addr) + " (awlen/wlast mismatch)";
        uint64_t a = aw.addr & mem.mask;
        uint64_t full = nbytes >= 64 ? ~0ull : ((1ull << nbytes) - 1);
        if ((w.strb & full) == full) {
            mem.write(a, w.data, nbytes);
        } else {
            uint8_t* p = mem.page(a >> PAGE_BITS, true) + (a & (PAGE - 1));
            for (int i = 0; i < nbytes; ++i)
                if ((w.strb >> i) & 1) p[i] = w.data[i];
        }
    }

    // returns the ID of a finished burst, or -1
    int write_beat() {
        AwEntry& aw = aw_fifo.front();
        int last = w_fifo.front().last;
        write_beat_();
        if (last || aw.left == 0) {
            int id = aw.id;
            aw_fifo.pop_front();
            return id;
        }
        aw.left -= 1;
        aw.addr += nbytes;
        return -1;
    }

    void read_burst(const In& in, std::vector<Beat>* vec, std::deque<Beat>* dq) {
        uint64_t addr = in.araddr & ~(uint64_t)(nbytes - 1);
        int n = in.arlen + 1;
        rd_reqs++;
        for (int i = 0; i < n; ++i) {
            Beat b;
            b.id = in.arid;
            b.last = i == n - 1;
            read_word(addr + (uint64_t)i * nbytes, b.data);
            if (vec) vec->push_back(b); else dq->push_back(b);
        }
    }

    void take_w(const In& in) {
        WEntry w;
        std::memcpy(w.data, in.wdata, nbytes);
        w.strb = in.wstrb;
        w.last = in.wlast;
        w_fifo.push_back(w);
        wr_beats++;
    }

    void drive(const In& in) {
        now++;
        seen = false;
        driven = true;
        rb = bb = false;
        if (profile == RANDOM) { drive_random(in); return; }
        drive_inorder(in);
        if (monitor_on) {
            if (seen || mon.any_stall) mon.requests(now, in, out, v[0], v[1], v[2]);
            if (rb) mon.r_beat(now, rb_id, rb_last);
            if (bb) mon.b_resp(now, bb_id);
        }
    }

    void settle(const In& in) {
        if (profile != RANDOM || sleeping) return;
        if (out.rvalid) r_ready_seen = in.rready;
        if (out.bvalid) b_ready_seen = in.bready;
        if (monitor_on) {
            if (seen || mon.any_stall) mon.requests(now, in, out, v[0], v[1], v[2]);
            if (out.rvalid && r_ready_seen) mon.r_beat(now, out.rid, out.rlast);
            if (out.bvalid && b_ready_seen) mon.b_resp(now, out.bid);
        }
        if (driven && !seen && idle()) { sleeping = true; sleep_rready = in.rready; }
        driven = false;
    }

    // random profile: evaluate unless asleep (see sleeping); the cycle counts either way
    void drive_or_sleep(const In& in) {
        if (sleeping) {
            if (!(in.arvalid || in.awvalid || in.wvalid || in.rready != sleep_rready)) {
                now++;
                return;
            }
            sleeping = false;
        }
        drive(in);
    }

    void drive_inorder(const In& in) {
        int acc = accept_every - 1;
        int awv = in.awvalid;
        if (awv) {
            seen = true;
            if (out.awready) {
                aw_fifo.push_back(AwEntry{in.awid, in.awaddr & ~(uint64_t)(nbytes - 1), in.awlen});
                wr_reqs++;
                aw_wait = acc;
            } else if (aw_wait) {
                aw_wait--;
            }
        } else if (aw_wait && !out.awready) {
            aw_wait--;
        }
        out.awready = aw_wait == 0;
        int wv = in.wvalid;
        if (wv) { seen = true; take_w(in); }
        int arv = in.arvalid;
        v[0] = arv; v[1] = awv; v[2] = wv;
        if (arv) {
            seen = true;
            if (out.arready) {
                read_burst(in, nullptr, &r_fifo);
                ar_wait = acc;
            } else if (ar_wait) {
                ar_wait--;
            }
        } else if (ar_wait && !out.arready) {
            ar_wait--;
        }
        out.arready = ar_wait == 0;
        if (!aw_fifo.empty() && !w_fifo.empty()) {
            int done = write_beat();
            if (done >= 0) b_fifo.push_back(done);
        }
        // read response: push one slot into the delay line, pop one when rready
        if (!r_fifo.empty()) {
            r0.push_back(Slot{0, r_fifo.front()});
            r_fifo.pop_front();
            r0_beats++;
        } else if (!r0.empty() && r0.back().empties) {
            r0.back().empties++;
        } else {
            r0.push_back(Slot{1, Beat()});
        }
        int o = 0;
        if (!r0.empty() && in.rready) {
            Slot& head = r0.front();
            if (head.empties) {
                if (head.empties == 1) r0.pop_front(); else head.empties--;
            } else {
                out.rid = head.beat.id;
                out.rlast = head.beat.last;
                std::memcpy(out.rdata, head.beat.data, nbytes);
                r0.pop_front();
                r0_beats--;
                rd_beats++;
                o = 1;
                rb = true; rb_id = out.rid; rb_last = out.rlast;
            }
        }
        out.rvalid = o;
        o = 0;
        if (!b_fifo.empty() && in.bready) {
            out.bid = b_fifo.front();
            b_fifo.pop_front();
            bb = true; bb_id = out.bid;
            o = 1;
        }
        out.bvalid = o;
    }

    double rnd() { return rng.random(); }
    uint64_t latency() { return rng.below((uint64_t)read_latency + 1); }

    static uint64_t due_of(const Due& d) { return d.due; }
    static uint64_t due_of(uint64_t d) { return d; }
    template <class T> int pick_due(IdQueues<T>& queues) {
        std::vector<int> due;
        for (auto& kv : queues.q)
            if (!kv.second.empty() && due_of(kv.second.front()) <= now) due.push_back(kv.first);
        if (due.empty()) return -1;
        return due[rng.below(due.size())];
    }

    void drive_random(const In& in) {
        int acc = accept_every - 1;
        if (r_cur && r_ready_seen) { r_cur = false; rd_beats++; }
        if (b_cur && b_ready_seen) { b_cur = false; }
        // AW then AR: ready for the next edge drawn first; a valid request meets it there
        {
            int rdy = (aw_wait == 0 && rnd() >= STALL) ? 1 : 0;
            if (aw_wait) aw_wait--;
            int valid = in.awvalid;
            v[1] = valid;
            seen |= valid != 0;
            if (rdy && valid) {
                aw_wait = acc;
                aw_fifo.push_back(AwEntry{in.awid, in.awaddr & ~(uint64_t)(nbytes - 1), in.awlen});
                wr_reqs++;
            }
            out.awready = rdy;
        }
        {
            int rdy = (ar_wait == 0 && rnd() >= STALL) ? 1 : 0;
            if (ar_wait) ar_wait--;
            int valid = in.arvalid;
            v[0] = valid;
            seen |= valid != 0;
            if (rdy && valid) {
                ar_wait = acc;
                Due d;
                read_burst(in, &d.beats, nullptr);
                d.due = now + 1 + latency();
                rq[in.arid].push_back(std::move(d));
            }
            out.arready = rdy;
        }
        int rdy = rnd() >= STALL ? 1 : 0;
        int valid = in.wvalid;
        v[2] = valid;
        seen |= valid != 0;
        if (rdy && valid) take_w(in);
        out.wready = rdy;
        if (!aw_fifo.empty() && !w_fifo.empty()) {
            int done = write_beat();
            if (done >= 0) bq[done].push_back(now + 1 + latency());
        }
        if (!r_cur && rnd() >= STALL) {
            if (r_burst.empty()) {
                int i = pick_due(rq);
                if (i >= 0) {
                    for (auto& b : rq[i].front().beats) r_burst.push_back(b);
                    rq[i].pop_front();
                }
            }
            if (!r_burst.empty()) {
                Beat& b = r_burst.front();
                out.rid = b.id; out.rlast = b.last;
                std::memcpy(out.rdata, b.data, nbytes);
                r_burst.pop_front();
                r_cur = true;
            }
        }
        out.rvalid = r_cur;
        if (!b_cur && rnd() >= STALL) {
            int i = pick_due(bq);
            if (i >= 0) {
                bq[i].pop_front();
                b_cur = true;
                out.bid = i;
            }
        }
        out.bvalid = b_cur;
        if (!out.rvalid) r_ready_seen = 0;
        if (!out.bvalid) b_ready_seen = 0;
    }
};

Core g[NPORTS];

// the port's core, or nullptr for a port number out of range
Core* port_core(int port) { return port >= 0 && port < NPORTS ? &g[port] : nullptr; }

void unpack(In& in, int nbytes, svBit arvalid, int arid, long long araddr, int arlen, svBit awvalid,
            int awid, long long awaddr, int awlen, svBit wvalid, const svBitVecVal* wdata,
            long long wstrb, svBit wlast, svBit rready, svBit bready) {
    in.arvalid = arvalid; in.arid = arid; in.araddr = (uint64_t)araddr; in.arlen = arlen;
    in.awvalid = awvalid; in.awid = awid; in.awaddr = (uint64_t)awaddr; in.awlen = awlen;
    in.wvalid = wvalid; in.wstrb = (uint64_t)wstrb; in.wlast = wlast;
    in.rready = rready; in.bready = bready;
    if (wvalid) std::memcpy(in.wdata, wdata, nbytes);    // svBitVecVal: 32-bit words, little-endian
}

}  // namespace

// ---- DPI-C (sim/tb/top.py) --------------------------------------------------------------------
// port: 0 nvdla_core2dbb, 1 nvdla_core2cvsram; wdata/rdata as wide as the widest port (a
// narrower port uses the low bytes)
extern "C" void tb_axi_eval(int port, svBit arvalid, int arid, long long araddr, int arlen,
                            svBit awvalid, int awid, long long awaddr, int awlen, svBit wvalid,
                            const svBitVecVal* wdata, long long wstrb, svBit wlast, svBit rready,
                            svBit bready, svBit* arready, svBit* awready, svBit* wready,
                            svBit* rvalid, int* rid, svBitVecVal* rdata, svBit* rlast,
                            svBit* bvalid, int* bid) {
    Core& c = g[port];
    if (c.mode == 2) {
        In in;
        unpack(in, c.nbytes, arvalid, arid, araddr, arlen, awvalid, awid, awaddr, awlen, wvalid,
               wdata, wstrb, wlast, rready, bready);
        if (c.profile == RANDOM) c.drive_or_sleep(in); else c.drive(in);
    }
    const Out& o = c.out;
    bool on = c.mode != 0;
    *arready = on && o.arready; *awready = on && o.awready; *wready = on && o.wready;
    *rvalid = on && o.rvalid; *bvalid = on && o.bvalid;
    *rid = o.rid; *rlast = o.rlast; *bid = o.bid;
    std::memcpy(rdata, o.rdata, c.nbytes);
}

extern "C" void tb_axi_settle(int port, svBit arvalid, int arid, long long araddr, int arlen,
                              svBit awvalid, int awid, long long awaddr, int awlen, svBit wvalid,
                              const svBitVecVal* wdata, long long wstrb, svBit wlast, svBit rready,
                              svBit bready) {
    Core& c = g[port];
    if (c.mode != 2 || c.profile != RANDOM) return;
    In in;
    unpack(in, c.nbytes, arvalid, arid, araddr, arlen, awvalid, awid, awaddr, awlen, wvalid, wdata,
           wstrb, wlast, rready, bready);
    c.settle(in);
}

// ---- Python API (ctypes; sim/tb/simmem.py) ----------------------------------------------------
// Every simmem_* function but simmem_present/simmem_ports takes the port first; a port out of
// range: simmem_configure returns -2, the others do nothing and return 0/nullptr.
extern "C" {

int simmem_present(void) { return 1; }
int simmem_ports(void) { return NPORTS; }

#define CORE_OR(ret) Core* cp = port_core(port); if (!cp) return ret; Core& c = *cp
#define CORE Core* cp = port_core(port); if (!cp) return; Core& c = *cp

// profile 0 nvidia, 1 fast, 2 random; ids: 256 flags each (nullptr: any ID allowed)
int simmem_configure(int port, int profile, int read_latency, int accept_every,
                     unsigned long long seed, int data_bytes, int address_width,
                     const uint8_t* read_ids, const uint8_t* write_ids, int monitor) {
    CORE_OR(-2);
    if (data_bytes < 1 || data_bytes > MAX_BYTES || address_width < 12 || address_width > 64)
        return -1;
    c.profile = profile;
    c.read_latency = read_latency;
    c.accept_every = accept_every;
    c.seed = seed;
    c.nbytes = data_bytes;
    c.mon.nbytes = data_bytes;
    c.monitor_on = monitor != 0;
    c.mem.mask = address_width >= 64 ? ~0ull : ((1ull << address_width) - 1);
    c.mem.clear();
    c.mon.any_ids = read_ids == nullptr;
    c.mon.read_ids.assign(256, false);
    c.mon.write_ids.assign(256, false);
    if (read_ids)
        for (int i = 0; i < 256; ++i) { c.mon.read_ids[i] = read_ids[i]; c.mon.write_ids[i] = write_ids[i]; }
    c.mode = 0;
    c.reset(false);
    return 0;
}

void simmem_reset(int port, int keep_error) { CORE; c.reset(keep_error != 0); }
void simmem_set_mode(int port, int mode) { CORE; c.mode = mode; }
void simmem_clear(int port) { CORE; c.mem.clear(); }
void simmem_write(int port, unsigned long long addr, const uint8_t* data, unsigned long long n) { CORE; c.mem.write(addr, data, n); }
void simmem_read(int port, unsigned long long addr, uint8_t* data, unsigned long long n) { CORE; c.mem.read(addr, data, n); }
void simmem_fill(int port, unsigned long long addr, unsigned long long n, int value) { CORE; c.mem.fill(addr, n, (uint8_t)value); }
unsigned long long simmem_pages(int port) { CORE_OR(0); return c.mem.pages.size(); }

// rd_beats, wr_beats, rd_reqs, wr_reqs, now, then handshakes ar aw w r b
void simmem_counters(int port, unsigned long long* out) {
    CORE;
    out[0] = c.rd_beats; out[1] = c.wr_beats; out[2] = c.rd_reqs; out[3] = c.wr_reqs; out[4] = c.now;
    for (int i = 0; i < 5; ++i) out[5 + i] = c.mon.handshakes[i];
}
const char* simmem_error(int port) { CORE_OR(nullptr); const std::string& e = c.error(); return e.empty() ? nullptr : e.c_str(); }
void simmem_set_error(int port, const char* msg) {
    CORE;
    if (c.error().empty()) {
        if (c.monitor_on) c.mon.error = msg; else c.own_error = msg;
    }
}
int simmem_idle(int port) { CORE_OR(1); return c.idle() ? 1 : 0; }
int simmem_get_quiet(int port) { CORE_OR(0); return c.mon.quiet ? 1 : 0; }
void simmem_set_quiet(int port, int q) { CORE; c.mon.quiet = q != 0; }
void simmem_check_idle(int port, unsigned long long now) { CORE; if (c.monitor_on) c.mon.check_idle(now); }
int simmem_any_stall(int port) { CORE_OR(0); return c.mon.any_stall ? 1 : 0; }

#undef CORE
#undef CORE_OR

}  // extern "C"
