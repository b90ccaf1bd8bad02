// Collecting this rank's trace: the events of every thread, named, converted to nanoseconds
// and flattened into a blob (see trace/detail/rank_data.hpp).
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cascade/core/log.hpp"
#include "cascade/trace/detail/rank_data.hpp"
#include "cascade/trace/export.hpp"
#include "cascade/trace/recorder.hpp"

namespace cascade::trace {

namespace detail {

namespace {

bool is_am(const Event& e) {
    const Kind k = e.kind;
    return k == Kind::send || k == Kind::am_run || k == Kind::large_send || k == Kind::large_recv ||
           (k == Kind::link && (e.b == static_cast<std::uint64_t>(LinkStep::send) ||
                                e.b == static_cast<std::uint64_t>(LinkStep::arrive)));
}

// This process's events, named. AM events are named from `am_names` the first time.
RankData collect_data(int rank, const std::vector<std::string>* am_names) {
    resolve_all();
    RankData d;
    d.rank = rank;
    d.offset = clock_offset();
    const StampClock ns = stamp_clock();
    for (Buffer* b : buffers()) {
        const std::size_t n = b->count();
        std::vector<Flat> evs;
        evs.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
            Event& e = (*b)[i];
            if (is_am(e) && e.name == 0 && am_names && e.am < am_names->size())
                e.name = intern((*am_names)[e.am]);
            Flat f{};
            f.t0 = e.t0 ? ns(e.t0) : 0;
            f.t1 = e.t1 ? ns(e.t1) : 0;
            f.a = e.a;
            f.b = e.b;
            f.c = e.c;
            f.peer = e.peer;
            f.am = e.am;
            f.name = e.name;
            f.flow = e.flow;
            f.key = e.key;
            f.kind = static_cast<std::uint8_t>(e.kind);
            evs.push_back(f);
        }
        d.threads.push_back(b->label());
        d.progress.push_back(b->progress_thread ? 1 : 0);
        d.dropped.push_back(b->dropped());
        d.events.push_back(std::move(evs));
    }
    d.strings = strings();
    d.counters = counters();
    return d;
}

// ---- flat bytes --------------------------------------------------------------------------------
// resize + memcpy rather than insert: GCC 12 warns falsely (-Wstringop-overflow) on the
// inlined insert of a few bytes.
void put(std::vector<char>& out, const void* p, std::size_t n) {
    const std::size_t at = out.size();
    out.resize(at + n);
    if (n > 0) std::memcpy(out.data() + at, p, n);
}
void put_u64(std::vector<char>& out, std::uint64_t v) {
    put(out, &v, sizeof v);
}
void put_str(std::vector<char>& out, const std::string& s) {
    put_u64(out, s.size());
    put(out, s.data(), s.size());
}

}  // namespace

std::vector<char> serialize(const RankData& d) {
    std::vector<char> out;
    put_u64(out, static_cast<std::uint64_t>(d.rank));
    put_u64(out, static_cast<std::uint64_t>(d.offset));
    put_u64(out, d.strings.size());
    for (auto& s : d.strings)
        put_str(out, s);
    put_u64(out, d.threads.size());
    for (std::size_t t = 0; t < d.threads.size(); ++t) {
        put_str(out, d.threads[t]);
        put_u64(out, d.progress[t]);
        put_u64(out, d.dropped[t]);
        put_u64(out, d.events[t].size());
        put(out, d.events[t].data(), d.events[t].size() * sizeof(Flat));
    }
    put_u64(out, d.counters.size());
    for (const auto& [name, value] : d.counters) {
        put_str(out, name);
        put_u64(out, value);
    }
    return out;
}

namespace {

// Parsing bytes that came over the network: every count is checked against the bytes left
// before anything is allocated from it, and nothing may be left over.
struct Reader {
    const char* p;
    const char* end;
    std::size_t left() const { return static_cast<std::size_t>(end - p); }
    void get(void* dst, std::size_t n) {
        if (left() < n) throw std::runtime_error("truncated trace data");
        if (n) std::memcpy(dst, p, n);
        p += n;
    }
    std::uint64_t u64() {
        std::uint64_t v;
        get(&v, sizeof v);
        return v;
    }
    // A count of items of at least `min_bytes` each that must fit in what is left.
    std::size_t count(std::size_t min_bytes) {
        const std::uint64_t n = u64();
        if (n > left() / min_bytes) throw std::runtime_error("trace data: count past the end");
        return static_cast<std::size_t>(n);
    }
    std::string str() {
        const std::size_t n = count(1);
        std::string s(n, '\0');
        get(s.data(), n);
        return s;
    }
};

constexpr std::uint8_t kMaxKind = static_cast<std::uint8_t>(Kind::link);  // the last kind

}  // namespace

RankData deserialize(const char* p, std::size_t n) {
    Reader r{p, p + n};
    RankData d;
    const std::uint64_t rank = r.u64();
    if (rank >= (std::uint64_t(1) << 24)) throw std::runtime_error("trace data: bad rank");
    d.rank = static_cast<int>(rank);
    d.offset = static_cast<std::int64_t>(r.u64());
    // Times are nanoseconds: anything past 2^62 (146 years) is garbage, and bounding them
    // keeps the sums and differences the writer takes inside 64 bits.
    constexpr std::int64_t kMaxTime = std::int64_t(1) << 62;
    auto time_ok = [&](std::int64_t t) { return t > -kMaxTime && t < kMaxTime; };
    if (!time_ok(d.offset)) throw std::runtime_error("trace data: bad clock offset");
    d.strings.resize(r.count(sizeof(std::uint64_t)));
    for (auto& s : d.strings)
        s = r.str();
    const std::size_t nt = r.count(4 * sizeof(std::uint64_t));
    for (std::size_t t = 0; t < nt; ++t) {
        d.threads.push_back(r.str());
        d.progress.push_back(r.u64());
        d.dropped.push_back(r.u64());
        std::vector<Flat> evs(r.count(sizeof(Flat)));
        r.get(evs.data(), evs.size() * sizeof(Flat));
        for (const Flat& f : evs) {
            if (f.kind == 0 || f.kind > kMaxKind)
                throw std::runtime_error("trace data: unknown event kind " +
                                         std::to_string(f.kind));
            if (!time_ok(f.t0) || !time_ok(f.t1)) throw std::runtime_error("trace data: bad time");
        }
        d.events.push_back(std::move(evs));
    }
    const std::uint64_t nc = r.count(2 * sizeof(std::uint64_t));
    for (std::uint64_t i = 0; i < nc; ++i) {
        std::string name = r.str();
        d.counters.emplace_back(std::move(name), r.u64());
    }
    if (r.left() != 0) throw std::runtime_error("trace data: bytes left over");
    return d;
}

}  // namespace detail

std::vector<char> collect(int rank, const std::vector<std::string>* am_names) {
    return detail::serialize(detail::collect_data(rank, am_names));
}

void write_at_exit() {
    if (!recording() || written()) return;
    set_written(true);
    try {
        // Without a communicator the rank is the launcher's (a program of several ranks that
        // uses only pools writes one file per rank when the path holds %r).
        const int rank = std::max(0, log::rank());
        write_files({collect(rank, nullptr)}, rank);
    } catch (const std::exception& e) {
        log::error(std::string("trace: could not write the trace: ") + e.what());
    }
}

}  // namespace cascade::trace
