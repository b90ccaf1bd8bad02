// Collecting this rank's trace: the events of every thread, named, converted to nanoseconds
// and flattened into a blob (see trace/detail/rank_data.hpp).
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cascade/trace/detail/rank_data.hpp"
#include "cascade/trace/export.hpp"
#include "cascade/trace/recorder.hpp"

namespace cascade::trace {

namespace detail {

namespace {

bool is_am(Kind k) {
    return k == Kind::send || k == Kind::am_run || k == Kind::large_send || k == Kind::large_recv;
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
            if (is_am(e.kind) && e.name == 0 && am_names && e.am < am_names->size())
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

struct Reader {
    const char* p;
    const char* end;
    void get(void* dst, std::size_t n) {
        if (static_cast<std::size_t>(end - p) < n) throw std::runtime_error("truncated trace data");
        std::memcpy(dst, p, n);
        p += n;
    }
    std::uint64_t u64() {
        std::uint64_t v;
        get(&v, sizeof v);
        return v;
    }
    std::string str() {
        const std::uint64_t n = u64();
        std::string s(n, '\0');
        get(s.data(), n);
        return s;
    }
};

}  // namespace

RankData deserialize(const char* p, std::size_t n) {
    Reader r{p, p + n};
    RankData d;
    d.rank = static_cast<int>(r.u64());
    d.offset = static_cast<std::int64_t>(r.u64());
    d.strings.resize(r.u64());
    for (auto& s : d.strings)
        s = r.str();
    const std::uint64_t nt = r.u64();
    for (std::uint64_t t = 0; t < nt; ++t) {
        d.threads.push_back(r.str());
        d.progress.push_back(r.u64());
        d.dropped.push_back(r.u64());
        std::vector<Flat> evs(r.u64());
        r.get(evs.data(), evs.size() * sizeof(Flat));
        d.events.push_back(std::move(evs));
    }
    const std::uint64_t nc = r.u64();
    for (std::uint64_t i = 0; i < nc; ++i) {
        std::string name = r.str();
        d.counters.emplace_back(std::move(name), r.u64());
    }
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
        write_files({collect(0, nullptr)});
    } catch (const std::exception& e) {
        std::cerr << "cascade: trace: could not write the trace: " << e.what() << '\n';
    }
}

}  // namespace cascade::trace
