// Task Bench (Slaughter et al., SC 2020) on Cascade: the task graphs of Task Bench's core
// library (StanfordLegion/task-bench, core/), run as Taskflow points.
//
// Every graph of the command line (several with -and) is one Taskflow whose key is (timestep,
// point); the graphs run at once on one pool. Points are split between ranks in contiguous
// blocks (as Task Bench's MPI implementation does) and between a rank's workers in
// contiguous blocks too (stealing allowed). A task reads its inputs where its producers left
// them: the output of a local producer in place, the output of a remote one in the copy its
// active message brought. A producer sends its output once to every other rank that has
// consumers of it (one small active message carrying the output bytes); the handler stores
// the bytes and fulfills the promises of that rank's consumers. Outputs are kept per
// timestep (the memory of Task Bench's other implementations with -field equal to -steps;
// no slot is reused, so no write-after-read ordering is needed).
//
// Task Bench's own check runs in every task: TaskGraph::execute_point asserts that each
// input holds (timestep - 1, dependency) in every position, and the core library is built
// with its assertions on. At the end each rank checks that it ran every one of its points.
//
// Options besides Task Bench's own (-steps, -width, -type, -kernel, -iter, -and, ...; see
// -h): -worker N (threads per rank, default 1; with N = 1 the thread that drives MPI is that
// worker, ThreadpoolOptions::joiner_works, otherwise N worker threads run beside it),
// -cascade-joiner-works and -cascade-worker-threads (either layout whatever N is),
// -cascade-corrupt (diagnostic: one input of
// one task is wrong, Task Bench's check must stop the run).
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cascade/cascade.hpp"
#include "core.h"

namespace {

using Key = std::uint64_t;  // timestep << 32 | point
constexpr Key key_of(long t, long p) {
    return (static_cast<Key>(t) << 32) | static_cast<Key>(p);
}
constexpr long timestep_of(Key k) {
    return static_cast<long>(k >> 32);
}
constexpr long point_of(Key k) {
    return static_cast<long>(k & 0xffffffffu);
}

using Intervals = std::vector<std::pair<long, long>>;

// The intersection of [a, b] with [lo, hi] (empty when first > second).
inline std::pair<long, long> clamp_interval(std::pair<long, long> iv, long lo, long hi) {
    return {std::max(iv.first, lo), std::min(iv.second, hi)};
}

struct Graph {
    TaskGraph g;
    int index = 0;
    long width = 0;
    std::vector<int> owner;     // rank of each point
    long first = 0, last = -1;  // this rank's points [first, last]
    std::vector<long> slot;     // per point: column in `store`, -1 if never read here
    long n_slots = 0;
    std::vector<char> store;         // timesteps x n_slots outputs
    std::vector<Intervals> deps;     // [dset * width + point]
    std::vector<Intervals> rdeps;    // [dset * width + point]
    std::vector<char> sends;         // [dset * width + point]: has consumers on other ranks
    std::vector<long> offset, span;  // per timestep: offset_at_timestep, width_at_timestep
    std::vector<long> dset_at;       // per timestep
    std::unique_ptr<cascade::Taskflow<Key>> tf;

    char* out(long t, long p) {
        return store.data() + (static_cast<std::size_t>(t) * static_cast<std::size_t>(n_slots) +
                               static_cast<std::size_t>(slot[static_cast<std::size_t>(p)])) *
                                  g.output_bytes_per_task;
    }
    const Intervals& deps_of(long t, long p) const {
        return deps[static_cast<std::size_t>(dset_at[static_cast<std::size_t>(t)] * width + p)];
    }
    const Intervals& rdeps_of(long t, long p) const {
        return rdeps[static_cast<std::size_t>(dset_at[static_cast<std::size_t>(t)] * width + p)];
    }
    bool in_range(long t, long p) const {
        const auto i = static_cast<std::size_t>(t);
        return p >= offset[i] && p < offset[i] + span[i];
    }
    // Inputs of (t, p): its dependencies that exist at t - 1.
    long n_inputs(long t, long p) const {
        if (t == 0) return 0;
        const auto i = static_cast<std::size_t>(t - 1);
        long n = 0;
        for (auto iv : deps_of(t, p)) {
            const auto [a, b] = clamp_interval(iv, offset[i], offset[i] + span[i] - 1);
            if (b >= a) n += b - a + 1;
        }
        return n;
    }
};

struct Options {
    int workers = 1;
    int joiner_works = -1;  // -1: when one thread per rank
    bool corrupt = false;
    int priority = 1;
};

Options parse_options(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-worker" && i + 1 < argc) {
            o.workers = std::atoi(argv[++i]);
            if (o.workers < 1) {
                std::fprintf(stderr, "error: -worker must be >= 1\n");
                std::exit(2);
            }
        } else if (a == "-cascade-worker-threads") {
            o.joiner_works = 0;
        } else if (a == "-cascade-joiner-works") {
            o.joiner_works = 1;
        } else if (a == "-cascade-corrupt") {
            o.corrupt = true;
        } else if (a == "-cascade-priority" && i + 1 < argc) {
            o.priority = std::atoi(argv[++i]);
        }
    }
    return o;
}

// Scratch memory of the kernels, one buffer per thread (as Task Bench's OpenMP and StarPU
// implementations do), prepared with the magic value the core checks.
char* thread_scratch(std::size_t bytes) {
    thread_local std::vector<char> buf;
    if (buf.size() < bytes) {
        buf.assign(bytes, 0);
        TaskGraph::prepare_scratch(buf.data(), buf.size());
    }
    return bytes ? buf.data() : nullptr;
}

}  // namespace

int main(int argc, char** argv) {
    cascade::Communicator comm;
    const int me = comm.rank(), n_ranks = comm.ranks();
    const Options opt = parse_options(argc, argv);
    App app(argc, argv);
    if (me == 0) app.display();

    std::vector<Graph> graphs(app.graphs.size());
    std::size_t max_scratch = 0;
    for (std::size_t gi = 0; gi < graphs.size(); ++gi) {
        Graph& G = graphs[gi];
        G.g = app.graphs[gi];
        G.index = static_cast<int>(gi);
        G.width = G.g.max_width;
        const long W = G.width, T = G.g.timesteps;
        if (W >= (1L << 32) || T >= (1L << 31)) {
            std::fprintf(stderr, "error: width and steps must be below 2^32 and 2^31\n");
            return 2;
        }
        G.owner.resize(static_cast<std::size_t>(W));
        for (int r = 0; r < n_ranks; ++r)
            for (long p = r * W / n_ranks; p < (r + 1) * W / n_ranks; ++p)
                G.owner[static_cast<std::size_t>(p)] = r;
        G.first = me * W / n_ranks;
        G.last = (me + 1) * W / n_ranks - 1;
        const long sets = G.g.max_dependence_sets();
        G.deps.resize(static_cast<std::size_t>(sets * W));
        G.rdeps.resize(static_cast<std::size_t>(sets * W));
        for (long d = 0; d < sets; ++d)
            for (long p = 0; p < W; ++p) {
                G.deps[static_cast<std::size_t>(d * W + p)] = G.g.dependencies(d, p);
                G.rdeps[static_cast<std::size_t>(d * W + p)] = G.g.reverse_dependencies(d, p);
            }
        G.sends.assign(static_cast<std::size_t>(sets * W), 0);
        for (long d = 0; d < sets; ++d)
            for (long p = 0; p < W; ++p)
                for (auto iv : G.rdeps[static_cast<std::size_t>(d * W + p)])
                    for (long q = iv.first; q <= iv.second; ++q)
                        if (G.owner[static_cast<std::size_t>(q)] !=
                            G.owner[static_cast<std::size_t>(p)])
                            G.sends[static_cast<std::size_t>(d * W + p)] = 1;
        for (long t = 0; t < T; ++t) {
            G.offset.push_back(G.g.offset_at_timestep(t));
            G.span.push_back(G.g.width_at_timestep(t));
            G.dset_at.push_back(G.g.dependence_set_at_timestep(t));
        }
        // Columns: this rank's points, and every remote point one of them reads.
        std::vector<char> needed(static_cast<std::size_t>(W), 0);
        for (long p = G.first; p <= G.last; ++p) {
            needed[static_cast<std::size_t>(p)] = 1;
            for (long d = 0; d < sets; ++d)
                for (auto iv : G.deps[static_cast<std::size_t>(d * W + p)])
                    for (long q = iv.first; q <= iv.second; ++q)
                        needed[static_cast<std::size_t>(q)] = 1;
        }
        G.slot.assign(static_cast<std::size_t>(W), -1);
        for (long p = 0; p < W; ++p)
            if (needed[static_cast<std::size_t>(p)])
                G.slot[static_cast<std::size_t>(p)] = G.n_slots++;
        G.store.assign(static_cast<std::size_t>(T) * static_cast<std::size_t>(G.n_slots) *
                           G.g.output_bytes_per_task,
                       0);
        max_scratch = std::max(max_scratch, G.g.scratch_bytes_per_task);
    }

    cascade::Threadpool tp(
        opt.workers, &comm,
        cascade::ThreadpoolOptions{
            .name = "taskbench",
            .joiner_works = opt.joiner_works < 0 ? opt.workers == 1 : opt.joiner_works == 1});
    const int threads = tp.workers();

    // Rank r's consumers of (t, p) at t + 1 fulfilled: the promises of those that live here.
    auto fulfill_local_consumers = [&](Graph& G, long t, long p) {
        const long t1 = t + 1;
        const auto i = static_cast<std::size_t>(t1);
        for (auto iv : G.rdeps_of(t1, p)) {
            auto [a, b] = clamp_interval(iv, G.offset[i], G.offset[i] + G.span[i] - 1);
            a = std::max(a, G.first);
            b = std::min(b, G.last);
            for (long q = a; q <= b; ++q)
                G.tf->fulfill_promise(key_of(t1, q));
        }
    };

    // The output of (t, p) of graph gi, for the consumers on this rank.
    auto* output_am = comm.make_active_msg(
        [&](int& gi, long& t, long& p, cascade::view<char>& bytes) {
            Graph& G = graphs[static_cast<std::size_t>(gi)];
            std::memcpy(G.out(t, p), bytes.data(), bytes.size());
            fulfill_local_consumers(G, t, p);
        },
        "taskbench_output");

    std::atomic<bool> corrupted{false};  // -cascade-corrupt: done once
    auto make_taskflow = [&](Graph& G) {
        G.tf = std::make_unique<cascade::Taskflow<Key>>(&tp, "taskbench");
        const long n_local = G.last - G.first + 1;
        // Tasks whose output other ranks wait for run first among a worker's ready tasks:
        // their messages leave early and the other tasks overlap the transfer.
        if (n_ranks > 1 && opt.priority)
            G.tf->set_priority([&G](Key k) {
                const long t = timestep_of(k);
                if (t + 1 >= G.g.timesteps) return 0.0;
                const auto d = static_cast<std::size_t>(G.dset_at[static_cast<std::size_t>(t + 1)]);
                return G.sends[d * static_cast<std::size_t>(G.width) +
                               static_cast<std::size_t>(point_of(k))]
                           ? 1.0
                           : 0.0;
            });
        G.tf->set_indegree([&G](Key k) {
                const long n = G.n_inputs(timestep_of(k), point_of(k));
                return n > 0 ? static_cast<int>(n) : 1;
            })
            .set_mapping([&G, n_local, threads](Key k) {
                return static_cast<int>((point_of(k) - G.first) * threads / n_local);
            })
            .set_name([&G](Key k) {
                return "graph " + std::to_string(G.index) + " point(" +
                       std::to_string(timestep_of(k)) + ", " + std::to_string(point_of(k)) + ")";
            })
            .set_task([&G, &corrupted, &opt, max_scratch](Key k) {
                const long t = timestep_of(k), p = point_of(k);
                thread_local std::vector<const char*> in;
                thread_local std::vector<std::size_t> in_bytes;
                in.clear();
                if (t > 0) {
                    const auto i = static_cast<std::size_t>(t - 1);
                    for (auto iv : G.deps_of(t, p)) {
                        const auto [a, b] =
                            clamp_interval(iv, G.offset[i], G.offset[i] + G.span[i] - 1);
                        for (long q = a; q <= b; ++q)
                            in.push_back(G.out(t - 1, q));
                    }
                }
                in_bytes.assign(in.size(), G.g.output_bytes_per_task);
                if (opt.corrupt && !in.empty() && !corrupted.exchange(true))
                    const_cast<char*>(in[0])[0] ^= 1;
                G.g.execute_point(t, p, G.out(t, p), G.g.output_bytes_per_task, in.data(),
                                  in_bytes.data(), in.size(), thread_scratch(max_scratch),
                                  G.g.scratch_bytes_per_task);
            })
            .set_fulfill([&G, &fulfill_local_consumers, output_am, me](Key k) {
                const long t = timestep_of(k), p = point_of(k);
                if (t + 1 >= G.g.timesteps) return;
                fulfill_local_consumers(G, t, p);
                // One message to each other rank with consumers of this output.
                thread_local std::vector<int> dests;
                dests.clear();
                const auto i = static_cast<std::size_t>(t + 1);
                for (auto iv : G.rdeps_of(t + 1, p)) {
                    const auto [a, b] =
                        clamp_interval(iv, G.offset[i], G.offset[i] + G.span[i] - 1);
                    if (b < a) continue;
                    for (int r = G.owner[static_cast<std::size_t>(a)];
                         r <= G.owner[static_cast<std::size_t>(b)]; ++r)
                        if (r != me && std::find(dests.begin(), dests.end(), r) == dests.end())
                            dests.push_back(r);
                }
                for (int r : dests)
                    output_am->send(r, G.index, t, p,
                                    cascade::view<char>(G.out(t, p), G.g.output_bytes_per_task));
            });
    };

    // Tasks with no inputs: every point of timestep 0, and later points whose dependencies
    // all lie outside the previous timestep (trivial, dom, tree).
    std::vector<std::vector<Key>> seeds(graphs.size());
    std::uint64_t expected_tasks = 0;
    for (Graph& G : graphs) {
        for (long t = 0; t < G.g.timesteps; ++t)
            for (long p = std::max(G.first, G.offset[static_cast<std::size_t>(t)]);
                 p <= std::min(G.last, G.offset[static_cast<std::size_t>(t)] +
                                           G.span[static_cast<std::size_t>(t)] - 1);
                 ++p) {
                ++expected_tasks;
                if (G.n_inputs(t, p) == 0)
                    seeds[static_cast<std::size_t>(G.index)].push_back(key_of(t, p));
            }
    }

    // Two runs, the second one timed (as Task Bench's MPI implementation does).
    double elapsed = 0;
    for (int iter = 0; iter < 2; ++iter) {
        for (Graph& G : graphs)
            make_taskflow(G);
        const std::uint64_t ran_before = tp.stats().tasks_run;
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        for (Graph& G : graphs)
            G.tf->fulfill_promises(seeds[static_cast<std::size_t>(G.index)]);
        tp.join();
        MPI_Barrier(MPI_COMM_WORLD);
        elapsed = MPI_Wtime() - start;
        const std::uint64_t ran = tp.stats().tasks_run - ran_before;
        if (ran != expected_tasks) {
            std::fprintf(stderr, "error: rank %d ran %llu tasks, expected %llu\n", me,
                         static_cast<unsigned long long>(ran),
                         static_cast<unsigned long long>(expected_tasks));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (Graph& G : graphs)
            G.tf.reset();
    }
    if (me == 0) app.report_timing(elapsed);
    return 0;
}
