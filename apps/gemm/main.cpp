// gemm: distributed C = A B (n x n, double precision, tiles of nb) on Cascade, in two
// variants of TaskTorrent §III-B: --variant 2d (2D block-cyclic, SUMMA-like chains of block
// products, one dgemm per block of C tiles and per k, on the owner of the block) and --variant 3d
// (DNS on a P x P x P cube of ranks, partial products reduced along the third dimension). A and B
// are random, generated tile by tile on their owners; each run is timed from a barrier to the end
// of the task graph. Prints per run the time, GFlop/s (2 n^3 flops) and runtime efficiency (time
// inside BLAS over ranks x threads x wall time), then on rank 0 one RESULT line (JSON) with
// medians.
//
// Layout of the app: tiles (storage, random entries), distribution (tile -> rank, thread),
// kernels + blas_clock (BLAS calls and their time), gemm_2d / gemm_dns (the task graphs),
// check (the reference product), this file (the driver).

#include <mpi.h>
#include <sched.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../common/blas.hpp"
#include "cascade/cascade.hpp"
#include "check.hpp"
#include "common/record.hpp"
#include "common/stats.hpp"
#include "distribution.hpp"
#include "gemm_2d.hpp"
#include "gemm_dns.hpp"

using namespace cascade::apps;
using namespace cascade::apps::gemm;
using cascade_bench::median;

namespace {

constexpr double tolerance = 1e-12;

struct Options {
    int n = 4096;
    int nb = 256;
    std::string variant = "2d";
    std::string grid;
    int threads = 0;  // 0: cores of this node / ranks on this node
    int repeat = 1;
    bool check = false;
    std::uint64_t seed = 2024;
    bool verbose = false;
    int send_window = 4;
    std::string trees = "on";
    std::string block = "auto";
};

struct Run {
    double seconds = 0;       // slowest rank
    double blas_seconds = 0;  // all threads of all ranks
};

// Ranks sharing this node, for the default thread count.
int ranks_on_node() {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int n = 1;
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
    return n;
}

// CPUs this process may run on (mpiexec may bind each rank to one core), or 0 if unknown.
int usable_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    return CPU_COUNT(&set);
}

// Ends the run's taskflows before its pool goes away, also when the run throws.
struct RunScope {
    GemmAlgorithm& alg;
    ~RunScope() { alg.end_run(); }
};

Run run_once(GemmAlgorithm& alg, cascade::Communicator& comm, int threads, BlasClock& clock,
             bool verbose) {
    clock.reset();
    double seconds = 0;
    double stolen = 0;
    double first_call = -1;  // seconds from the start to the first BLAS call
    {
        cascade::Threadpool tp(threads, &comm, 0, "gemm", /*start=*/false);
        alg.begin_run(tp, clock);
        RunScope scope{alg};
        MPI_Barrier(MPI_COMM_WORLD);
        const auto t0 = std::chrono::steady_clock::now();
        tp.start();
        alg.start();
        tp.join();
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (const auto first = clock.first_call())
            first_call = std::chrono::duration<double>(*first - t0).count();
        if (tp.stats().tasks_run != alg.local_tasks())
            throw std::runtime_error("rank " + std::to_string(comm.rank()) + " ran " +
                                     std::to_string(tp.stats().tasks_run) + " tasks, expected " +
                                     std::to_string(alg.local_tasks()));
        stolen = static_cast<double>(tp.stats().tasks_stolen);
    }
    const double local[2] = {seconds, clock.seconds()};
    Run r;
    MPI_Reduce(&local[0], &r.seconds, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&local[1], &r.blas_seconds, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (verbose) {  // per rank: wall time, BLAS time, tasks, stolen tasks, first BLAS call
        constexpr int k = 5;
        const int ranks = comm.ranks();
        const double mine[k] = {seconds, clock.seconds(), static_cast<double>(alg.local_tasks()),
                                stolen, first_call};
        std::vector<double> all(comm.rank() == 0 ? k * static_cast<std::size_t>(ranks) : 0);
        MPI_Gather(mine, k, MPI_DOUBLE, all.data(), k, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        for (int q = 0; q < ranks && comm.rank() == 0; ++q) {
            const double* x = &all[k * static_cast<std::size_t>(q)];
            std::printf(
                "  rank %d: %.4f s, BLAS %.4f s over %d threads (%.1f%% busy), %.0f tasks "
                "(%.0f stolen), first BLAS call after %.2f ms\n",
                q, x[0], x[1], threads, 100.0 * x[1] / (threads * x[0]), x[2], x[3], 1e3 * x[4]);
        }
    }
    return r;
}

// Checks the options against the job; returns the algorithm or throws UsageError.
std::unique_ptr<GemmAlgorithm> make_algorithm(const Options& opt, cascade::Communicator& comm) {
    const int ranks = comm.ranks();
    const Tiling t(opt.n, opt.nb);
    if (opt.variant == "2d") {
        Grid2D grid = Grid2D::square(ranks);
        if (!opt.grid.empty()) {
            const auto g = Grid2D::parse(opt.grid);
            if (!g)
                throw cascade::UsageError("--grid: expected PxQ with P, Q >= 1 (e.g. 1x2), got '" +
                                          opt.grid + "'");
            if (g->ranks() != ranks)
                throw cascade::UsageError("--grid " + opt.grid + " has " +
                                          std::to_string(g->ranks()) + " ranks, but the job has " +
                                          std::to_string(ranks));
            grid = *g;
        }
        BlockShape block;
        if (opt.block != "auto") {
            const auto b = Grid2D::parse(opt.block);
            if (!b)
                throw cascade::UsageError(
                    "--block: expected auto or RxC with R, C >= 1 (C tiles per task, e.g. 2x4), "
                    "got '" +
                    opt.block + "'");
            block = {b->P(), b->Q()};
        }
        return std::make_unique<Gemm2D>(comm, t, grid, opt.seed, opt.send_window, opt.trees == "on",
                                        block, opt.threads);
    }
    if (!opt.grid.empty())
        throw cascade::UsageError("--grid applies to --variant 2d only (3d uses a P x P x P cube)");
    if (opt.block != "auto")
        throw cascade::UsageError(
            "--block applies to --variant 2d only (3d runs one tile per task)");
    const auto cube = Cube::of(ranks);
    if (!cube)
        throw cascade::UsageError(
            "--variant 3d needs a cube number of ranks (1, 8, 27, 64, ...: P x P x P), but the "
            "job has " +
            std::to_string(ranks) + "; use --variant 2d or run on 1 or 8 ranks");
    return std::make_unique<GemmDNS>(comm, t, *cube, opt.seed, opt.send_window);
}

int run(int argc, char** argv, int rank, int ranks) {
    Options opt;
    CLI::App app{"Distributed C = A B on Cascade: 2D block-cyclic (SUMMA-like) or 3D (DNS)"};
    app.add_option("--n", opt.n, "Matrix order")
        ->check(CLI::Range(1, 1 << 30))
        ->capture_default_str();
    app.add_option("--nb", opt.nb, "Tile size (the last tile is smaller if nb does not divide n)")
        ->check(CLI::Range(1, 1 << 30))
        ->capture_default_str();
    app.add_option("--variant", opt.variant, "2d: block-cyclic over a PxQ grid; 3d: DNS, P^3 ranks")
        ->check(CLI::IsMember({"2d", "3d"}))
        ->capture_default_str();
    app.add_option("--grid", opt.grid, "Process grid PxQ for --variant 2d (default: most square)");
    app.add_option("--threads", opt.threads,
                   "Worker threads per rank (default: cores of the node / ranks on the node)")
        ->check(CLI::Range(1, 4096));
    app.add_option("--repeat", opt.repeat, "Number of timed products")
        ->check(CLI::Range(1, 1000000))
        ->capture_default_str();
    app.add_flag("--check", opt.check,
                 "Check ||C - A B||_F / ||A B||_F < 1e-12 against a reference dgemm (exit 1 if "
                 "not)");
    app.add_option("--seed", opt.seed, "Seed of the random A and B")->capture_default_str();
    app.add_option("--send-window", opt.send_window,
                   "Tiles in flight to one peer at a time, the rest queued in the order they are "
                   "needed (0: all at once)")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    app.add_option("--trees", opt.trees,
                   "2d: each tile goes to its grid row or column as one broadcast tree (off: "
                   "once per peer)")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    app.add_option("--block", opt.block,
                   "2d: C tiles per task, RxC (one dgemm call per task on the whole block), or "
                   "auto: blocks of about 2048 x 2048 elements, at least one per worker")
        ->capture_default_str();
    app.add_flag("-v,--verbose", opt.verbose, "Per-rank time, BLAS time and task counts");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (rank == 0) return app.exit(e);
        return e.get_exit_code();
    }
    if (opt.threads == 0)
        opt.threads =
            std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks_on_node());

    cascade::Communicator comm(MPI_COMM_WORLD);
    std::unique_ptr<GemmAlgorithm> alg;
    try {
        alg = make_algorithm(opt, comm);
    } catch (const cascade::UsageError& e) {
        if (rank == 0) std::fprintf(stderr, "gemm: error: %s\n", e.what());
        return 2;
    }

    const Tiling t(opt.n, opt.nb);
    if (rank == 0) {
        if (const char* warning = blas_core_warning())
            std::fprintf(stderr, "gemm: warning: %s\n", warning);
        if (const int cpus = usable_cpus(); cpus > 0 && cpus < opt.threads)
            std::fprintf(stderr,
                         "gemm: warning: rank 0 may only run on %d CPU(s) but has %d worker "
                         "threads (mpiexec binds ranks to cores; Open MPI: --bind-to none)\n",
                         cpus, opt.threads);
        std::printf(
            "gemm: variant %s, n=%d nb=%d (%d x %d tiles%s), %d ranks x %d threads, OpenBLAS "
            "%s kernels\n",
            alg->describe().c_str(), opt.n, opt.nb, t.nt, t.nt,
            opt.n % opt.nb != 0 ? ", last one ragged" : "", ranks, opt.threads, blas_corename());
    }

    // One BLAS thread per task: the parallelism comes from the task graph.
    blas_set_threads(1);
    const double gflop = 2.0 * opt.n * static_cast<double>(opt.n) * opt.n * 1e-9;
    BlasClock clock(opt.threads);
    std::vector<double> seconds, gflops, efficiency;
    for (int rep = 0; rep < opt.repeat; ++rep) {
        const Run r = run_once(*alg, comm, opt.threads, clock, opt.verbose);
        if (rank != 0) continue;
        seconds.push_back(r.seconds);
        gflops.push_back(gflop / r.seconds);
        efficiency.push_back(r.blas_seconds / (ranks * opt.threads * r.seconds));
        std::printf("run %d/%d: %.4f s, %.2f GFlop/s, efficiency %.1f%%\n", rep + 1, opt.repeat,
                    r.seconds, gflops.back(), 100.0 * efficiency.back());
    }

    std::optional<double> residual;
    if (opt.check) residual = relative_error(MPI_COMM_WORLD, t, opt.seed, *alg, opt.threads);
    if (rank != 0) return residual && !(*residual < tolerance) ? 1 : 0;

    const bool ok = !residual || *residual < tolerance;
    if (residual)
        std::printf("residual ||C - A B||_F / ||A B||_F = %.3e (%s)\n", *residual,
                    ok ? "OK" : "FAILED");
    cascade_bench::Record line;
    line.add("app", "gemm")
        .add("system", "cascade")
        .add("variant", opt.variant)
        .add("n", opt.n)
        .add("nb", opt.nb)
        .add("ranks", ranks)
        .add("threads", opt.threads)
        .add("seconds", median(seconds))
        .add("gflops", median(gflops))
        .add("efficiency", median(efficiency))
        .add("runs", seconds);
    if (residual)
        line.add("residual", *residual);
    else
        line.add_null("residual");
    line.print_result();
    if (!ok) {
        std::fprintf(stderr,
                     "gemm: FAILED: relative error %.3e is not below %.0e (variant %s n=%d nb=%d "
                     "ranks=%d threads=%d seed=%llu)\n",
                     *residual, tolerance, opt.variant.c_str(), opt.n, opt.nb, ranks, opt.threads,
                     static_cast<unsigned long long>(opt.seed));
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // keep stdout and stderr lines in order
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    int code = 0;
    try {
        code = run(argc, argv, rank, ranks);
    } catch (const std::exception& e) {
        // A task or handler failed on this rank: the others cannot finish without it.
        std::fprintf(stderr, "gemm: rank %d FAILED: %s\n", rank, e.what());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return code;
}
