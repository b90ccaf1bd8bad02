// One configuration of the randomized sweep (tests/stress/stress.py, ./cascade stress): a
// random DAG of tasks spread over the ranks and threads, whose edges are local promises,
// small active messages, large active messages (bodies with a checked pattern, in chunks of
// --chunk bytes) and messages a rank sends to itself; optionally remote async calls with
// big arguments and kept results running at the same time. Every task computes a value from
// the values of its predecessors, so a lost, doubled, reordered-into-the-wrong-buffer or
// corrupted message shows as a wrong value. The graph is a function of --seed (the same on
// every rank); --rounds runs it that many times with a join in between. With --order K each
// task also sends K numbered messages, each to one rank or to three at once (merged into a
// tree), held for broadcast detection or not, while some handlers are slow: every rank must
// see each task's numbers in increasing order, each once. --window sets the back-pressure
// limit (max_bytes_in_flight; 256 makes nearly every send wait for room).
//
// Exit status 0 and the line "stress_dag: ok ..." on rank 0 when every value, every run
// count and every body was right; else "stress_dag: FAILED ..." and status 1.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cascade/cascade.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
    unsigned seed = 1;
    int threads = 2;
    int tasks = 1000;
    int max_preds = 4;
    bool aggregate = true;
    std::size_t chunk = 0;  // 0: the default
    int large_pct = 10;     // of the edges between tasks on different ranks
    int self_pct = 10;      // of the edges between tasks on the same rank
    int max_body = 300000;  // bytes of a large body at most
    int futures = 0;        // async calls per rank per round
    bool keep = false;      // keep_result on the calls that make big vectors
    int rounds = 2;
    int order = 0;  // numbered messages per task (per-sender order checks)
    // CommunicatorOptions::max_bytes_in_flight (back-pressure; 0: none)
    std::size_t window = cascade::CommunicatorOptions{}.max_bytes_in_flight;
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string k = argv[i];
        if (i + 1 >= argc) throw std::runtime_error("option " + k + " needs a value");
        const long v = std::stol(argv[++i]);
        if (k == "--seed")
            o.seed = static_cast<unsigned>(v);
        else if (k == "--threads")
            o.threads = static_cast<int>(v);
        else if (k == "--tasks")
            o.tasks = static_cast<int>(v);
        else if (k == "--max-preds")
            o.max_preds = static_cast<int>(v);
        else if (k == "--aggregate")
            o.aggregate = v != 0;
        else if (k == "--chunk")
            o.chunk = static_cast<std::size_t>(v);
        else if (k == "--large-pct")
            o.large_pct = static_cast<int>(v);
        else if (k == "--self-pct")
            o.self_pct = static_cast<int>(v);
        else if (k == "--max-body")
            o.max_body = static_cast<int>(v);
        else if (k == "--futures")
            o.futures = static_cast<int>(v);
        else if (k == "--keep")
            o.keep = v != 0;
        else if (k == "--rounds")
            o.rounds = static_cast<int>(v);
        else if (k == "--order")
            o.order = static_cast<int>(v);
        else if (k == "--window")
            o.window = static_cast<std::size_t>(v);
        else
            throw std::runtime_error("unknown option " + k);
    }
    if (o.threads < 1 || o.tasks < 1 || o.rounds < 1 || o.max_body < 0 || o.order < 0 ||
        o.window > (std::size_t(1) << 40))
        throw std::runtime_error(
            "--threads, --tasks, --rounds must be >= 1; --max-body, --order, --window >= 0");
    return o;
}

std::uint64_t mix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Byte b of the body that carries `value`.
char body_byte(std::uint64_t value, std::size_t b) {
    return static_cast<char>(mix(value + b / 64) >> (8 * (b % 8)));
}

enum class Kind : int { local, small, large, self_small, self_large };

// The numbered messages of task i (--order): message k goes to dests(i, k), 1 or 3 ranks, as
// `how`: 0 held, 1 an AM with detection off, 2 send_now, 3 held to three ranks (a tree).
struct Numbered {
    int how;
    int dests[3];
    int count;
};
Numbered numbered(unsigned seed, int i, int k, int ranks) {
    const std::uint64_t h =
        mix((std::uint64_t(seed) << 40) ^ (std::uint64_t(i) << 20) ^ static_cast<std::uint64_t>(k));
    Numbered m{static_cast<int>(h % 4), {0, 0, 0}, 1};
    m.dests[0] = static_cast<int>((h >> 8) % static_cast<unsigned>(ranks));
    if (m.how == 3 && ranks >= 3) {
        m.count = 3;
        for (int j = 1; j < 3; ++j)
            m.dests[j] = (m.dests[0] + j) % ranks;
    } else if (m.how == 3) {
        m.how = 0;
    }
    return m;
}

struct Edge {
    int from, to;
    Kind kind;
    int bytes;  // large bodies
};

struct Graph {
    std::vector<int> rank_of, thread_of, indegree;
    std::vector<std::vector<int>> out;  // edge ids leaving each task
    std::vector<Edge> edges;
    std::vector<std::uint64_t> expect;  // value of each task
};

Graph make_graph(const Options& o, int ranks) {
    std::mt19937 rng(o.seed);
    const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    Graph g;
    const int n = o.tasks;
    g.rank_of.resize(n);
    g.thread_of.resize(n);
    g.indegree.assign(n, 0);
    g.out.resize(n);
    std::vector<std::vector<int>> preds(n);
    for (int i = 0; i < n; ++i) {
        g.rank_of[i] = pick(ranks);
        g.thread_of[i] = pick(o.threads);
        if (i == 0) continue;
        const int m = pick(o.max_preds + 1);
        for (int e = 0; e < m; ++e) {
            // mostly recent tasks (long chains), sometimes any earlier one (wide fan-in)
            const int j = pick(4) ? std::max(0, i - 1 - pick(std::min(i, 20))) : pick(i);
            bool dup = false;
            for (int p : preds[i])
                dup |= p == j;
            if (dup) continue;
            preds[i].push_back(j);
            Edge ed{j, i, Kind::local, 0};
            const bool same = g.rank_of[i] == g.rank_of[j];
            const bool large = pick(100) < o.large_pct;
            if (same) {
                if (pick(100) < o.self_pct) ed.kind = large ? Kind::self_large : Kind::self_small;
            } else {
                ed.kind = large ? Kind::large : Kind::small;
            }
            if (ed.kind == Kind::large || ed.kind == Kind::self_large) {
                // empty, tiny, odd and big bodies
                const int r = pick(8);
                ed.bytes = r == 0 ? 0 : r == 1 ? 1 + pick(16) : pick(o.max_body + 1);
            }
            g.out[j].push_back(static_cast<int>(g.edges.size()));
            g.edges.push_back(ed);
            ++g.indegree[i];
        }
    }
    // Values in topological order (task ids are one).
    g.expect.assign(n, 0);
    std::vector<std::uint64_t> acc(n, 0);
    for (int i = 0; i < n; ++i) {
        g.expect[i] = mix(acc[i] ^ (static_cast<std::uint64_t>(i) << 20));
        for (int e : g.out[i])
            acc[g.edges[e].to] += g.expect[i];
    }
    return g;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    try {
        o = parse(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "stress_dag: %s\n", e.what());
        return 2;
    }
    long bad = 0;
    int me = 0, ranks = 1;
    {
        cascade::Communicator comm(MPI_COMM_WORLD,
                                   cascade::CommunicatorOptions{.aggregate = o.aggregate,
                                                                .max_bytes_in_flight = o.window});
        me = comm.rank();
        ranks = comm.ranks();
        if (o.chunk > 0) comm.set_large_chunk(o.chunk);
        const Graph g = make_graph(o, ranks);
        const int n = o.tasks;
        cascade::Threadpool tp(o.threads, &comm);
        cascade::Futures fx(tp, &comm);

        std::vector<std::atomic<std::uint64_t>> acc(n);
        std::vector<std::atomic<int>> runs(n);
        std::vector<std::uint64_t> value(n, 0);
        std::vector<std::vector<char>> out_body(g.edges.size()), in_body(g.edges.size());
        std::atomic<long> corrupt{0}, sent_large{0}, arrived_large{0};
        // --order: the last number seen from each task in this round (communication thread),
        // numbers seen out of order, and how many arrived.
        std::vector<int> last_number(n, -1);
        long out_of_order = 0, numbered_in = 0;
        int round = 0;

        cascade::Taskflow<int> tf(&tp, "stress");
        auto deliver = [&](int e, std::uint64_t v) {
            acc[g.edges[e].to].fetch_add(v);
            tf.fulfill_promise(round * n + g.edges[e].to);
        };
        auto small = comm.make_active_msg(
            [&](int& e, std::uint64_t& v, int& r) {
                if (r != round || g.edges[e].to < 0) corrupt.fetch_add(1);
                deliver(e, v);
            },
            "stress_small");
        auto large = comm.make_large_active_msg(
            [&](int& e, std::uint64_t& v) {
                const std::vector<char>& b = in_body[e];
                if (b.size() != static_cast<std::size_t>(g.edges[e].bytes)) corrupt.fetch_add(1);
                for (std::size_t k = 0; k < b.size(); ++k)
                    if (b[k] != body_byte(v, k)) {
                        corrupt.fetch_add(1);
                        break;
                    }
                in_body[e] = {};
                arrived_large.fetch_add(1);
                deliver(e, v);
            },
            [&](int& e, std::uint64_t&) {
                in_body[e].assign(static_cast<std::size_t>(g.edges[e].bytes), 0);
                return in_body[e].data();
            },
            [&](int& e, std::uint64_t&) {
                out_body[e] = {};
                sent_large.fetch_add(1);
            },
            "stress_large");

        auto on_numbered = [&](int& i, int& k, int& r) {
            if (r != round || i < 0 || i >= n) {
                corrupt.fetch_add(1);
                return;
            }
            if (k <= last_number[i]) ++out_of_order;
            last_number[i] = k;
            ++numbered_in;
            // A slow handler now and then: trees through this rank wait for it.
            if (mix(static_cast<std::uint64_t>(i * 131 + k)) % 64 == 0)
                std::this_thread::sleep_for(std::chrono::microseconds(300));
        };
        auto held = comm.make_active_msg(on_numbered, "stress_numbered");
        auto unheld = comm.make_active_msg(on_numbered, "stress_numbered_unheld");
        unheld->set_broadcast_detection(false);

        tf.set_indegree([&](int k) { return std::max(1, g.indegree[k % n]); })
            .set_mapping([&](int k) { return g.thread_of[k % n]; })
            .set_name([&](int k) { return "stress(" + std::to_string(k % n) + ")"; })
            .set_task([&](int k) {
                const int i = k % n;
                runs[i].fetch_add(1);
                const std::uint64_t v = mix(acc[i].load() ^ (static_cast<std::uint64_t>(i) << 20));
                value[i] = v;
                for (int e : g.out[i]) {
                    const Edge& ed = g.edges[e];
                    const int dest = g.rank_of[ed.to];
                    switch (ed.kind) {
                        case Kind::local:
                            deliver(e, v);
                            break;
                        case Kind::small:
                        case Kind::self_small:
                            small->send(dest, e, v, round);
                            break;
                        case Kind::large:
                        case Kind::self_large: {
                            std::vector<char>& b = out_body[e];
                            b.resize(static_cast<std::size_t>(ed.bytes));
                            for (std::size_t x = 0; x < b.size(); ++x)
                                b[x] = body_byte(v, x);
                            large->send_large(dest, cascade::view<char>(b.data(), b.size()), e, v);
                            break;
                        }
                    }
                }
                for (int q = 0; q < o.order; ++q) {
                    const Numbered m = numbered(o.seed, i, q, ranks);
                    for (int d = 0; d < m.count; ++d) {
                        if (m.how == 1)
                            unheld->send(m.dests[d], i, q, round);
                        else if (m.how == 2)
                            held->send_now(m.dests[d], i, q, round);
                        else
                            held->send(m.dests[d], i, q, round);
                    }
                }
            });

        // Futures: big vectors made on one rank (kept there with --keep), checked on another,
        // and big arguments sent from here.
        const std::size_t big = cascade::Futures::kLargeArg / sizeof(double) + 3;
        auto fill = [](int s, std::size_t len) {
            std::vector<double> v(len);
            for (std::size_t x = 0; x < len; ++x)
                v[x] = static_cast<double>((static_cast<std::size_t>(s) * 7 + x) % 1000);
            return v;
        };
        auto make = fx.make_async([&](int& s, long& len) { return fill(s, std::size_t(len)); },
                                  "stress_make", cascade::AsyncOptions{.keep_result = o.keep});
        auto check =
            fx.make_async([&](const std::vector<double>& v, int& s,
                              long& len) { return v == fill(s, std::size_t(len)) ? 0 : 1; },
                          "stress_check");

        std::mt19937 frng(o.seed * 7919u + static_cast<unsigned>(me));
        for (round = 0; round < o.rounds; ++round) {
            for (auto& a : acc)
                a.store(0);
            for (int i = 0; i < n; ++i)
                if (g.indegree[i] == 0 && g.rank_of[i] == me) tf.fulfill_promise(round * n + i);
            std::vector<cascade::future<int>> checks;
            for (int c = 0; c < o.futures; ++c) {
                const int s = static_cast<int>(frng() % 100000);
                const long len = frng() % 3 ? static_cast<long>(big + frng() % 1000)
                                            : static_cast<long>(1 + frng() % 100);
                const int r1 = static_cast<int>(frng() % static_cast<unsigned>(ranks));
                const int r2 = static_cast<int>(frng() % static_cast<unsigned>(ranks));
                if (frng() % 2) {
                    auto f = cascade::async(r1, make, s, len).share();
                    checks.push_back(cascade::async(r2, check, f, s, len));
                    if (frng() % 2) bad += f.get() != fill(s, std::size_t(len));
                } else {
                    checks.push_back(cascade::async(r2, check, fill(s, std::size_t(len)), s, len));
                }
            }
            for (auto& f : checks)
                bad += f.get();
            tp.join();
            for (int i = 0; i < n; ++i) {
                const int want_runs = g.rank_of[i] == me ? 1 : 0;
                if (runs[i].load() != want_runs) ++bad;
                if (want_runs && value[i] != g.expect[i]) ++bad;
                runs[i].store(0);
            }
            std::fill(last_number.begin(), last_number.end(), -1);
            if (round + 1 < o.rounds) tp.start();
        }
        long large_edges_out = 0, large_edges_in = 0;
        for (const Edge& e : g.edges) {
            if (e.kind != Kind::large && e.kind != Kind::self_large) continue;
            large_edges_out += g.rank_of[e.from] == me;
            large_edges_in += g.rank_of[e.to] == me;
        }
        if (sent_large.load() != large_edges_out * o.rounds) ++bad;
        if (arrived_large.load() != large_edges_in * o.rounds) ++bad;
        long numbered_expected = 0;
        for (int i = 0; i < n && o.order > 0; ++i)
            for (int q = 0; q < o.order; ++q) {
                const Numbered m = numbered(o.seed, i, q, ranks);
                for (int d = 0; d < m.count; ++d)
                    numbered_expected += m.dests[d] == me;
            }
        if (numbered_in != numbered_expected * o.rounds || out_of_order > 0) {
            std::fprintf(stderr,
                         "stress_dag: rank %d: %ld numbered messages of %ld, %ld out of order\n",
                         me, numbered_in, numbered_expected * o.rounds, out_of_order);
            ++bad;
        }
        bad += out_of_order;
        bad += corrupt.load();
        long total = 0;
        MPI_Allreduce(&bad, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        bad = total;
        if (me == 0) {
            long kinds[5] = {};
            for (const Edge& e : g.edges)
                ++kinds[static_cast<int>(e.kind)];
            std::printf(
                "stress_dag: %s ranks=%d threads=%d tasks=%d edges: local=%ld small=%ld "
                "large=%ld self_small=%ld self_large=%ld futures=%d keep=%d aggregate=%d "
                "chunk=%zu rounds=%d order=%d window=%zu errors=%ld\n",
                bad ? "FAILED" : "ok", ranks, o.threads, n, kinds[0], kinds[1], kinds[2], kinds[3],
                kinds[4], o.futures, o.keep ? 1 : 0, o.aggregate ? 1 : 0, o.chunk, o.rounds,
                o.order, o.window, bad);
            std::fflush(stdout);
        }
    }
    return bad ? 1 : 0;
}
