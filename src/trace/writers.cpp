// The trace files, from the blobs of all ranks: the Chrome trace-event JSON (with the task
// graph in "cascadeGraph") and the DOT graph. Rank 0 matches the two ends of every active
// message by (source, destination, sequence number), which gives both the flow arrows and
// the cross-rank promise edges.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "cascade/core/log.hpp"
#include "cascade/trace/detail/rank_data.hpp"
#include "cascade/trace/export.hpp"
#include "cascade/trace/recorder.hpp"

namespace cascade::trace {

namespace {

using detail::Flat;
using detail::RankData;

std::string json_str(const std::string& s) {
    std::string out = "\"";
    for (unsigned char ch : s) {
        switch (ch) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (ch < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", ch);
                    out += buf;
                } else {
                    out += static_cast<char>(ch);
                }
        }
    }
    return out + "\"";
}

std::string dot_str(const std::string& s) {
    std::string out = "\"";
    for (char ch : s) {
        if (ch == '"' || ch == '\\') out += '\\';
        out += ch;
    }
    return out + "\"";
}

const char* ctrl_name(std::uint64_t type) {
    switch (type) {
        case 1:
            return "COUNT";
        case 2:
            return "REQUEST";
        case 3:
            return "CONFIRM";
        case 4:
            return "SHUTDOWN";
        default:
            return "CTRL";
    }
}

struct Where {
    int rank;
    std::size_t thread;
    std::size_t index;
};
using MsgKey = std::tuple<int, int, std::uint64_t>;  // source, destination, sequence

class Writer {
  public:
    explicit Writer(std::vector<RankData> ranks) : ranks_(std::move(ranks)) {
        std::sort(ranks_.begin(), ranks_.end(),
                  [](const RankData& x, const RankData& y) { return x.rank < y.rank; });
        base_ = INT64_MAX;
        for (auto& d : ranks_)
            for (auto& evs : d.events)
                for (auto& f : evs)
                    if (f.t0 != 0) base_ = std::min(base_, f.t0 + d.offset);
        for (auto& d : ranks_)
            for (std::size_t t = 0; t < d.events.size(); ++t)
                for (std::size_t i = 0; i < d.events[t].size(); ++i) {
                    const Flat& f = d.events[t][i];
                    const Kind k = static_cast<Kind>(f.kind);
                    if (k == Kind::send) sends_[{d.rank, f.peer, f.a}] = Where{d.rank, t, i};
                    if (k == Kind::am_run) receives_.insert({f.peer, d.rank, f.a});
                    if (k == Kind::link && f.a != 0)
                        links_[f.a].push_back(LinkPoint{f.b, f.t0 + d.offset, d.rank, t, i});
                }
        arrange_links();
        if (base_ == INT64_MAX) base_ = 0;
        build_graph();
    }

    std::uint64_t dropped() const {
        std::uint64_t n = 0;
        for (auto& d : ranks_)
            for (auto x : d.dropped)
                n += x;
        return n;
    }
    std::size_t event_count() const {
        std::size_t n = 0;
        for (auto& d : ranks_)
            for (auto& evs : d.events)
                n += evs.size();
        return n;
    }

    void write_json(std::FILE* out) {
        first_ = true;
        std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", out);
        for (auto& d : ranks_) {
            const int pid = d.rank + 1;
            event(out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(pid) +
                           ",\"args\":{\"name\":" + json_str("rank " + std::to_string(d.rank)) +
                           "}}");
            event(out,
                  "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + std::to_string(pid) +
                      ",\"args\":{\"sort_index\":" + std::to_string(d.rank) + "}}");
            for (std::size_t t = 0; t < d.threads.size(); ++t) {
                const std::string ids =
                    ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid(d, t));
                event(out, "{\"ph\":\"M\",\"name\":\"thread_name\"" + ids +
                               ",\"args\":{\"name\":" + json_str(label(d, t)) + "}}");
                event(out, "{\"ph\":\"M\",\"name\":\"thread_sort_index\"" + ids +
                               ",\"args\":{\"sort_index\":" + std::to_string(t) + "}}");
                for (std::size_t i = 0; i < d.events[t].size(); ++i)
                    write_event(out, d, t, d.events[t][i], ids);
            }
        }
        std::fputs("\n],\n\"otherData\":{", out);
        std::fprintf(out, "\"producer\":\"cascade\",\"ranks\":%zu,\"dropped_events\":%llu",
                     ranks_.size(), static_cast<unsigned long long>(dropped()));
        std::fputs(",\"clock_offsets_ns\":\"", out);
        for (std::size_t r = 0; r < ranks_.size(); ++r)
            std::fprintf(out, "%s%lld", r ? " " : "", static_cast<long long>(ranks_[r].offset));
        std::fputs("\",\"counters\":{", out);
        for (std::size_t r = 0; r < ranks_.size(); ++r) {
            std::fprintf(out, "%s\"%d\":{", r ? "," : "", ranks_[r].rank);
            for (std::size_t i = 0; i < ranks_[r].counters.size(); ++i)
                std::fprintf(out, "%s%s:%llu", i ? "," : "",
                             json_str(ranks_[r].counters[i].first).c_str(),
                             static_cast<unsigned long long>(ranks_[r].counters[i].second));
            std::fputs("}", out);
        }
        std::fputs("}},\n\"cascadeGraph\":{\"nodes\":[", out);
        for (std::size_t n = 0; n < nodes_.size(); ++n)
            std::fprintf(out, "%s\n{\"rank\":%d,\"name\":%s,\"task\":%s}", n ? "," : "",
                         nodes_[n].rank, json_str(nodes_[n].name).c_str(),
                         nodes_[n].task ? "true" : "false");
        std::fputs("],\n\"edges\":[", out);
        bool first = true;
        for (auto& [e, count] : edges_) {
            std::fprintf(out, "%s\n[%zu,%zu,%llu,%s]", first ? "" : ",", std::get<0>(e),
                         std::get<1>(e), static_cast<unsigned long long>(count),
                         json_str(std::get<2>(e)).c_str());
            first = false;
        }
        std::fputs("]}}\n", out);
    }

    void write_dot(std::FILE* out) {
        std::fputs(
            "// Promise edges taken (fulfill_promise caller -> callee), written by Cascade.\n"
            "// Dashed: through an active message (labelled with its name); a box: a\n"
            "// thread outside tasks (e.g. main seeding the graph).\n",
            out);
        std::fputs("digraph cascade {\n  node [fontsize=10];\n", out);
        for (auto& d : ranks_) {
            std::fprintf(out, "  subgraph cluster_rank%d {\n    label=\"rank %d\";\n", d.rank,
                         d.rank);
            for (std::size_t n = 0; n < nodes_.size(); ++n)
                if (nodes_[n].rank == d.rank)
                    std::fprintf(out, "    %s [label=%s%s];\n", dot_str(node_id(n)).c_str(),
                                 dot_str(nodes_[n].name).c_str(),
                                 nodes_[n].task ? "" : ", shape=box");
            std::fputs("  }\n", out);
        }
        for (auto& [e, count] : edges_) {
            std::string attrs;
            if (!std::get<2>(e).empty()) attrs = "style=dashed, label=" + dot_str(std::get<2>(e));
            if (count > 1)
                attrs += (attrs.empty() ? "" : ", ") + std::string("penwidth=2, xlabel=\"x") +
                         std::to_string(count) + "\"";
            std::fprintf(out, "  %s -> %s%s;\n", dot_str(node_id(std::get<0>(e))).c_str(),
                         dot_str(node_id(std::get<1>(e))).c_str(),
                         attrs.empty() ? "" : (" [" + attrs + "]").c_str());
        }
        std::fputs("}\n", out);
    }

  private:
    struct Node {
        int rank;
        std::string name;
        bool task;
    };

    static std::string label(const RankData& d, std::size_t t) {
        return d.threads[t] + (d.progress[t] ? " (MPI progress)" : "");
    }
    static long tid(const RankData& d, std::size_t t) {
        return static_cast<long>(d.rank) * 1000 + static_cast<long>(t) + 1;
    }
    std::string us(std::int64_t t, const RankData& d) const {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(t + d.offset - base_) / 1e3);
        return buf;
    }
    static std::string dur(std::int64_t t0, std::int64_t t1) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3f", t1 > t0 ? static_cast<double>(t1 - t0) / 1e3 : 0.0);
        return buf;
    }
    const std::string& str(const RankData& d, std::uint32_t id) const {
        static const std::string empty;
        return id < d.strings.size() ? d.strings[id] : empty;
    }
    std::string node_id(std::size_t n) const {
        // Appended step by step: GCC 12 warns falsely (-Wrestrict) on the inlined
        // "r" + ... + ":" + name chain.
        std::string id = "r";
        id += std::to_string(nodes_[n].rank);
        id += ':';
        id += nodes_[n].name;
        return id;
    }
    void event(std::FILE* out, const std::string& s) {
        std::fputs(first_ ? "" : ",\n", out);
        std::fputs(s.c_str(), out);
        first_ = false;
    }
    // Flow ids are small integers (1, 2, ...) given in order of first use: Perfetto's JSON
    // importer reads a string id as hexadecimal, and viewers that hold ids as doubles lose
    // integers above 2^53.
    std::string msg_id(int src, int dst, std::uint64_t seq) {
        auto [it, fresh] = flow_ids_.emplace(MsgKey{src, dst, seq}, 0);
        if (fresh) it->second = ++flows_;
        return std::to_string(it->second);
    }

    // Linked transfers (Kind::link): the points of one link id in the order of their steps
    // (then of time) become one flow: "s" at the first, "t" at those between, "f" at the
    // last; a link seen at one point only draws nothing.
    void arrange_links() {
        for (auto& [id, pts] : links_) {
            if (pts.size() < 2) continue;
            std::sort(pts.begin(), pts.end(), [](const LinkPoint& x, const LinkPoint& y) {
                return x.step != y.step ? x.step < y.step : x.t < y.t;
            });
            const std::uint64_t flow = ++flows_;
            for (std::size_t k = 0; k < pts.size(); ++k)
                link_phase_[{pts[k].rank, pts[k].thread, pts[k].index}] = {
                    flow, k == 0                ? 's'
                          : k + 1 == pts.size() ? 'f'
                                                : 't'};
        }
    }

    void write_event(std::FILE* out, const RankData& d, std::size_t t, const Flat& f,
                     const std::string& ids) {
        const Kind k = static_cast<Kind>(f.kind);
        const std::string ts = ",\"ts\":" + us(f.t0, d);
        const std::string x = ",\"ph\":\"X\"" + ts + ",\"dur\":" + dur(f.t0, f.t1) + ids;
        const std::string mid = ",\"ts\":" + us(f.t0 + (f.t1 > f.t0 ? (f.t1 - f.t0) / 2 : 0), d);
        const std::string& am = str(d, f.name);
        switch (k) {
            case Kind::task: {
                if (f.t1 == 0) return;  // never finished (the job ended inside it)
                auto it = task_nodes_.find({d.rank, str(d, f.name)});
                event(out, "{\"name\":" + json_str(str(d, f.name)) + ",\"cat\":\"task\"" + x +
                               ",\"args\":{\"taskflow\":" + json_str(str(d, f.flow)) + ",\"key\":" +
                               json_str(str(d, f.key)) + ",\"rank\":" + std::to_string(d.rank) +
                               ",\"thread\":" + json_str(label(d, t)) +
                               (it != task_nodes_.end() ? ",\"node\":" + std::to_string(it->second)
                                                        : std::string()) +
                               "}}");
                return;
            }
            case Kind::idle:
                event(out, "{\"name\":\"idle\",\"cat\":\"idle\"" + x + "}");
                return;
            case Kind::progress:
                event(out, "{\"name\":\"progress\",\"cat\":\"comm\"" + x + "}");
                return;
            case Kind::steal:
                event(out, "{\"name\":\"steal\",\"cat\":\"steal\",\"ph\":\"i\",\"s\":\"t\"" + ts +
                               ids + ",\"args\":{\"victim_thread\":" + std::to_string(f.peer) +
                               "}}");
                return;
            case Kind::ctrl:
                event(out, "{\"name\":" +
                               json_str(std::string(ctrl_name(f.a)) + (f.b ? " from " : " to ") +
                                        std::to_string(f.peer)) +
                               ",\"cat\":\"completion\",\"ph\":\"i\",\"s\":\"t\"" + ts + ids +
                               ",\"args\":{\"epoch\":" + std::to_string(f.c) + "}}");
                return;
            case Kind::send: {
                event(out, "{\"name\":" + json_str("send " + am) + ",\"cat\":\"am\"" + x +
                               ",\"args\":{\"dest\":" + std::to_string(f.peer) + ",\"bytes\":" +
                               std::to_string(f.b) + ",\"seq\":" + std::to_string(f.a) + "}}");
                if (receives_.count({d.rank, f.peer, f.a}))
                    event(out, "{\"ph\":\"s\",\"name\":" + json_str(am) +
                                   ",\"cat\":\"am\",\"id\":" + msg_id(d.rank, f.peer, f.a) + mid +
                                   ids + "}");
                return;
            }
            case Kind::am_run: {
                event(out, "{\"name\":" + json_str(am) + ",\"cat\":\"am\"" + x +
                               ",\"args\":{\"source\":" + std::to_string(f.peer) + ",\"bytes\":" +
                               std::to_string(f.b) + ",\"seq\":" + std::to_string(f.a) + "}}");
                const MsgKey key{f.peer, d.rank, f.a};
                if (sends_.count(key) && flow_ends_.insert(key).second)
                    event(out, "{\"ph\":\"f\",\"bp\":\"e\",\"name\":" + json_str(am) +
                                   ",\"cat\":\"am\",\"id\":" + msg_id(f.peer, d.rank, f.a) + mid +
                                   ids + "}");
                return;
            }
            case Kind::large_send:
            case Kind::large_recv: {
                // A transfer spans several progress() calls: an async slice on its own track.
                const bool out_going = k == Kind::large_send;
                const std::string common =
                    "\"name\":" +
                    json_str((out_going ? "body to " : "body from ") + std::to_string(f.peer) +
                             " " + am) +
                    ",\"cat\":\"transfer\",\"id\":" + std::to_string(++async_id_) + ids;
                event(out, "{\"ph\":\"b\"," + common + ts +
                               ",\"args\":{\"bytes\":" + std::to_string(f.b) + "}}");
                event(out, "{\"ph\":\"e\"," + common + ",\"ts\":" + us(f.t1, d) + "}");
                return;
            }
            case Kind::edge:
                return;  // in cascadeGraph
            case Kind::link: {
                // The message's own steps are slices (inside the task or handler that sent or
                // received it); a device copy's step is the slice of its device track.
                const auto step = static_cast<LinkStep>(f.b);
                if (step == LinkStep::send || step == LinkStep::arrive)
                    event(out,
                          "{\"name\":" +
                              json_str((step == LinkStep::send ? "send piece " : "piece ") + am) +
                              ",\"cat\":\"transfer\"" + x + ",\"args\":{\"" +
                              (step == LinkStep::send ? "dest" : "source") + "\":" +
                              std::to_string(f.peer) + ",\"link\":" + std::to_string(f.a) + "}}");
                auto it = link_phase_.find(
                    {d.rank, t, static_cast<std::size_t>(&f - d.events[t].data())});
                if (it == link_phase_.end()) return;
                const char ph = it->second.second;
                event(out, std::string("{\"ph\":\"") + ph + "\"" +
                               (ph == 's' ? "" : ",\"bp\":\"e\"") +
                               ",\"name\":\"transfer\",\"cat\":\"transfer\",\"id\":" +
                               std::to_string(it->second.first) + mid + ids + "}");
                return;
            }
        }
    }

    // ---- the promise graph -------------------------------------------------------------------
    std::size_t node(int rank, const std::string& name, bool task) {
        auto& m = task ? task_nodes_ : thread_nodes_;
        auto [it, inserted] = m.emplace(std::make_pair(rank, name), nodes_.size());
        if (inserted) nodes_.push_back(Node{rank, name, task});
        return it->second;
    }

    // The node of whatever ran at `ctx` on (rank, thread): a task, or through an active
    // message the task (or thread) that sent it. `am` gets the message's name.
    std::size_t caller(const RankData& d, std::size_t t, std::uint64_t ctx, std::string& am,
                       int depth = 0) {
        if (ctx == kNone || ctx >= d.events[t].size() || depth > 16)
            return node(d.rank, d.threads[t], false);
        const Flat& f = d.events[t][ctx];
        const Kind k = static_cast<Kind>(f.kind);
        if (k == Kind::task) return node(d.rank, str(d, f.name), true);
        if (k == Kind::am_run || k == Kind::large_recv) {
            if (am.empty()) am = str(d, f.name);
            auto it = sends_.find({f.peer, d.rank, f.a});
            if (it == sends_.end()) return node(f.peer, "(unrecorded sender)", false);
            const Where w = it->second;
            const RankData& s = ranks_[pos_.at(w.rank)];
            return caller(s, w.thread, s.events[w.thread][w.index].c, am, depth + 1);
        }
        return node(d.rank, d.threads[t], false);
    }

    void build_graph() {
        // Where each rank's data is (one rank alone when a rank wrote its own events).
        for (std::size_t i = 0; i < ranks_.size(); ++i)
            if (!pos_.emplace(ranks_[i].rank, i).second) throw std::runtime_error("rank twice");
        for (auto& d : ranks_)
            for (auto& evs : d.events)
                for (auto& f : evs)
                    if (static_cast<Kind>(f.kind) == Kind::task) node(d.rank, str(d, f.name), true);
        for (auto& d : ranks_)
            for (std::size_t t = 0; t < d.events.size(); ++t)
                for (auto& f : d.events[t]) {
                    if (static_cast<Kind>(f.kind) != Kind::edge) continue;
                    std::string am;
                    const std::size_t from = caller(d, t, f.c, am);
                    const std::size_t to = node(d.rank, str(d, f.name), true);
                    ++edges_[{from, to, am}];
                }
    }

    std::vector<RankData> ranks_;
    std::map<int, std::size_t> pos_;  // rank -> index in ranks_
    std::int64_t base_ = 0;
    bool first_ = true;
    std::uint64_t async_id_ = 0;
    std::map<MsgKey, Where> sends_;
    std::set<MsgKey> receives_, flow_ends_;
    std::map<MsgKey, std::uint64_t> flow_ids_;
    std::uint64_t flows_ = 0;  // flow ids given so far
    struct LinkPoint {
        std::uint64_t step;
        std::int64_t t;  // rank 0's clock
        int rank;
        std::size_t thread, index;
    };
    std::map<std::uint64_t, std::vector<LinkPoint>> links_;  // by link id
    // (rank, thread, event index) -> (flow id, 's' / 't' / 'f')
    std::map<std::tuple<int, std::size_t, std::size_t>, std::pair<std::uint64_t, char>> link_phase_;
    std::vector<Node> nodes_;
    std::map<std::pair<int, std::string>, std::size_t> task_nodes_, thread_nodes_;
    std::map<std::tuple<std::size_t, std::size_t, std::string>, std::uint64_t> edges_;
};

// Writes a file whole or not at all: into a fresh temporary name beside it (created
// exclusively, never through a symbolic link), then renamed over `path` (which replaces a
// link at `path` instead of writing where it points). Returns false after printing why.
bool write_file(const std::string& path, const char* what,
                const std::function<void(std::FILE*)>& body) {
    const std::string tmp = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    std::FILE* f = fd >= 0 ? ::fdopen(fd, "w") : nullptr;
    if (!f) {
        log::error(std::string("trace: cannot write ") + what + " to '" + tmp +
                   "': " + std::strerror(errno));
        if (fd >= 0) ::close(fd);
        return false;
    }
    bool ok = true;
    try {
        body(f);
    } catch (const std::exception& e) {
        log::error(std::string("trace: writing ") + what + ": " + e.what());
        ok = false;
    }
    ok = std::fflush(f) == 0 && !std::ferror(f) && ok;
    ok = std::fclose(f) == 0 && ok;
    if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
        log::error(std::string("trace: cannot write ") + what + " to '" + path +
                   "': " + std::strerror(errno));
        ok = false;
    } else if (!ok) {
        log::error(std::string("trace: cannot write ") + what + " to '" + path + "'");
    }
    if (!ok) ::unlink(tmp.c_str());
    return ok;
}

// Rank 0's trace path, known on every rank (set_rank_files_base): where a rank that ends the
// job writes its own events (<path>.rank<N>.json).
std::string& rank_files_base() {
    static std::string* s = new std::string;
    return *s;
}

}  // namespace

std::string expand_rank(const std::string& path, int rank) {
    std::string out;
    out.reserve(path.size() + 8);
    for (std::size_t i = 0; i < path.size(); ++i) {
        if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'r') {
            out += std::to_string(rank);
            ++i;
        } else {
            out += path[i];
        }
    }
    return out;
}

bool per_rank_files() {
    const Options& o = options();
    return o.trace_path.find("%r") != std::string::npos ||
           o.dag_path.find("%r") != std::string::npos;
}

void write_files(const std::vector<std::vector<char>>& blobs, int file_rank) {
    std::vector<RankData> ranks;
    for (const auto& b : blobs)
        ranks.push_back(detail::deserialize(b.data(), b.size()));
    const Options& o = options();
    if (o.trace_path.empty() && o.dag_path.empty()) return;
    const std::string trace_path = expand_rank(o.trace_path, file_rank);
    const std::string dag_path = expand_rank(o.dag_path, file_rank);
    Writer w(std::move(ranks));
    if (!trace_path.empty())
        write_file(trace_path, "the trace", [&](std::FILE* f) { w.write_json(f); });
    if (!dag_path.empty())
        write_file(dag_path, "the task graph", [&](std::FILE* f) { w.write_dot(f); });
    std::string note = "trace: " + std::to_string(w.event_count()) + " events";
    if (!trace_path.empty()) note += " -> " + trace_path;
    if (!dag_path.empty()) note += ", graph -> " + dag_path;
    // Where the trace went is said once by default; with a file per rank, only when asked.
    log::write(per_rank_files() ? log::Level::info : log::Level::warn, note);
    if (w.dropped() > 0)
        log::warn("trace: " + std::to_string(w.dropped()) +
                  " events dropped (a thread's buffer was full); raise CASCADE_TRACE_EVENTS (now " +
                  std::to_string(o.events_per_thread) + " per thread)");
}

void set_rank_files_base(const std::string& path) {
    rank_files_base() = path;
}

void write_rank(int rank, const std::vector<std::string>& am_names) noexcept {
    if (!recording() || rank_files_base().empty()) return;
    try {
        const std::vector<char> blob = collect(rank, &am_names);
        std::vector<RankData> one;
        one.push_back(detail::deserialize(blob.data(), blob.size()));
        std::string path = rank_files_base();
        if (path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0)
            path.resize(path.size() - 5);
        path += ".rank" + std::to_string(rank) + ".json";
        Writer w(std::move(one));
        if (write_file(path, "this rank's events", [&](std::FILE* f) { w.write_json(f); }))
            log::warn("trace: " + std::to_string(w.event_count()) + " events of this rank -> " +
                      path);
    } catch (const std::exception& e) {
        log::error(std::string("trace: could not write this rank's events: ") + e.what());
    }
}

namespace detail {
void render_rank_blob(const char* data, std::size_t size, std::FILE* out) {
    std::vector<RankData> one;
    one.push_back(deserialize(data, size));
    Writer w(std::move(one));
    w.write_json(out);
    w.write_dot(out);
}
}  // namespace detail

}  // namespace cascade::trace
