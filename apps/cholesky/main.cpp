// cholesky: distributed tiled dense Cholesky factorization (A = L L^T, lower, double
// precision) on Cascade taskflows. Tiles are spread over a P x Q grid of MPI ranks in a 2D
// block-cyclic layout; each rank runs a pool of worker threads. Generates a random SPD
// matrix, factors it --repeat times, and reports time, GFlop/s (n^3/3 flops), runtime
// efficiency (time inside BLAS/LAPACK kernels, summed over all ranks and threads, over
// ranks x threads x wall time) and, with --check, the relative residual
// ||A - L L^T||_F / ||A||_F. --reference times LAPACKE_dpotrf on the whole matrix with
// multithreaded OpenBLAS instead (one rank). --device sim|cpu|opencl|cuda factors on the devices of
// the device layer instead (one rank): tiles as Data, memory capped to --cap of the matrix
// per device, bytes moved compared with the schedule's minimum (device_cholesky).
//
// Run: mpiexec -n 2 cholesky --n 4096 --nb 256 --threads 1 --check
//      cholesky --device sim --n 2048 --nb 256 --sims 2 --cap 0.25 --check
// The last line on rank 0 is a machine-readable summary ("RESULT {json}") for bench/apps.
//
// Layout of the app: tile_matrix (storage), distribution (who owns which tile),
// kernels (BLAS calls and their clock), priorities + cholesky_graph (the task graph and its
// messages), device_cholesky (the same factorization on devices), check (the residual), this
// file (the driver).

#include <mpi.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "../common/blas.hpp"
#include "cascade/cascade.hpp"
#include "check.hpp"
#include "cholesky_graph.hpp"
#include "common/record.hpp"
#include "common/stats.hpp"
#ifdef CASCADE_CHOLESKY_DEVICES
#include "device_cholesky.hpp"
#endif
#include "distribution.hpp"
#include "kernels.hpp"
#include "tile_matrix.hpp"

using namespace cascade::apps;

namespace {

constexpr double residual_tolerance = 1e-12;

struct Options {
    int n = 2048;
    int nb = 128;
    int threads = 0;   // 0: cores / ranks
    std::string grid;  // "PxQ"; empty: as square as possible
    int repeat = 1;
    bool check = false;
    bool reference = false;
    std::uint64_t seed = 2024;
    std::string priority = "critical-path";
    int verbose = 0;
    double peak_gflops = 0;    // > 0: also report the speed as a fraction of this
    bool indefinite = false;   // testing: the error path when a task fails
    std::string trees = "on";  // broadcast detection: a tile to k ranks leaves once per tree
    double fake_gflops = 0;    // > 0: kernels sleep flops / rate (GFlop/s) instead
    std::string device;      // sim|cpu|opencl|cuda: on the device layer's devices; empty: taskflows
    int sims = 2;            // --device sim: simulated devices
    double cap = 0.25;       // --device: data per device, as a fraction of the matrix
    double max_moved = 1.5;  // --device --check: bytes moved / the schedule's minimum, at most
};

struct RunResult {
    double seconds = 0;         // wall time, slowest rank
    double kernel_seconds = 0;  // tiled runs: summed over ranks and threads
    double residual = -1;       // < 0: not checked
    long long tiles_sent = 0;   // tiled runs: summed over ranks
    // Broadcasts (summed over ranks): sends merged into trees / sends of tiles with >= 2
    // remote readers; messages the tiles' owners sent.
    double detected_fraction = 0;
    long long broadcasts = 0, root_messages = 0;
};

using cascade_bench::median;
using cascade_bench::thread_cpu_seconds;
double now() {
    return cascade_bench::now_seconds();
}

double sum_all(double x, MPI_Comm comm) {
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, comm);
    return x;
}
double max_all(double x, MPI_Comm comm) {
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MAX, comm);
    return x;
}

RunResult run_tiled(const Options& opt, const BlockCyclic& dist, int rank, bool print_details) {
    TileMatrix a(TileLayout(opt.n, opt.nb), dist, rank);
    a.fill_random_spd(opt.seed);
    if (opt.indefinite) {  // a negative pivot in the middle diagonal tile: its potrf fails
        const int mid = a.layout().nt / 2;
        if (a.is_local(mid, mid)) a.tile(mid, mid)[0] = -1.0;
    }

    // One BLAS thread per task: the parallelism comes from the task graph.
    blas_set_threads(1);
    cascade::CommunicatorOptions copts;
    copts.broadcast_detection = opt.trees == "on";
    cascade::Communicator comm(MPI_COMM_WORLD, copts);
    cascade::Threadpool tp(opt.threads, &comm, opt.verbose > 1 ? 1 : 0, "cholesky");
    KernelClock clock(opt.threads);
    CholeskyGraph graph(tp, comm, a, dist, clock,
                        opt.priority == "none" ? PriorityKind::none : PriorityKind::critical_path,
                        opt.fake_gflops);

    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now(), cpu0 = thread_cpu_seconds();
    graph.start();
    tp.join();  // this thread drives MPI meanwhile
    const double local_seconds = now() - t0, progress_cpu = thread_cpu_seconds() - cpu0;

    RunResult r;
    r.seconds = max_all(local_seconds, MPI_COMM_WORLD);
    r.kernel_seconds = sum_all(clock.seconds(), MPI_COMM_WORLD);
    r.tiles_sent =
        static_cast<long long>(sum_all(static_cast<double>(graph.tiles_sent()), MPI_COMM_WORLD));
    const cascade::BroadcastStats bc = comm.broadcasts().stats();
    const double multi = sum_all(static_cast<double>(graph.multi_reader_sends()), MPI_COMM_WORLD);
    const double merged = sum_all(static_cast<double>(bc.detected_sends), MPI_COMM_WORLD);
    r.detected_fraction = multi > 0 ? merged / multi : 1.0;
    r.broadcasts =
        static_cast<long long>(sum_all(static_cast<double>(bc.detected), MPI_COMM_WORLD));
    r.root_messages =
        static_cast<long long>(sum_all(static_cast<double>(bc.root_messages), MPI_COMM_WORLD));

    const long long ran = static_cast<long long>(tp.stats().tasks_run);
    if (ran != graph.local_task_count())
        throw std::runtime_error("rank " + std::to_string(rank) + " ran " + std::to_string(ran) +
                                 " tasks, expected " + std::to_string(graph.local_task_count()));
    if (print_details) {
        for (int k = 0; k < kernel_count; ++k) {
            const Kernel kk = static_cast<Kernel>(k);
            std::printf("  rank %d %-5s %8llu calls  %9.4f s\n", rank, kernel_name(kk),
                        static_cast<unsigned long long>(clock.calls(kk)), clock.seconds(kk));
        }
        for (int t = 0; t < opt.threads; ++t)
            std::printf("  rank %d thread %d: %llu tasks (%llu stolen), busy %.1f%%\n", rank, t,
                        static_cast<unsigned long long>(tp.stats(t).tasks_run),
                        static_cast<unsigned long long>(tp.stats(t).tasks_stolen),
                        100.0 * clock.thread_seconds(t) / local_seconds);
        std::printf(
            "  rank %d: %.1f MB of tiles, %.1f MB of received copies; the thread "
            "driving MPI used %.1f%% of a core\n",
            rank, a.local_bytes() / 1e6, a.copy_bytes() / 1e6,
            100.0 * progress_cpu / local_seconds);
    }
    if (opt.check)
        r.residual = distributed_residual(a, dist, opt.seed, MPI_COMM_WORLD,
                                          std::max(1u, std::thread::hardware_concurrency()));
    return r;
}

// LAPACKE_dpotrf on the whole matrix, parallelized by OpenBLAS itself with opt.threads.
RunResult run_reference(const Options& opt) {
    TileMatrix tiles(TileLayout(opt.n, opt.nb), BlockCyclic(1, 1, 1), 0);
    tiles.fill_random_spd(opt.seed);
    std::vector<double> a = tiles.to_dense_lower();  // the same matrix as the tiled runs

    blas_set_threads(opt.threads);
    RunResult r;
    const double t0 = now();
    potrf_tile(opt.n, a.data(), opt.n);
    r.seconds = now() - t0;
    if (opt.check) {
        // Reuse the tiled check: put the factor back into the tiles.
        const TileLayout& L = tiles.layout();
        for (int j = 0; j < L.nt; ++j)
            for (int i = j; i < L.nt; ++i)
                for (int c = 0; c < L.rows(j); ++c)
                    for (int row = 0; row < L.rows(i); ++row)
                        tiles.tile(i, j)[row + static_cast<std::size_t>(c) * L.rows(i)] =
                            a[(L.first_row(i) + row) +
                              static_cast<std::size_t>(L.first_row(j) + c) * opt.n];
        r.residual =
            distributed_residual(tiles, BlockCyclic(1, 1, 1), opt.seed, MPI_COMM_SELF, opt.threads);
    }
    return r;
}

std::string format_residual(double res) {
    if (res < 0) return "residual not checked";
    char buf[64];
    std::snprintf(buf, sizeof buf, "residual %.1e", res);
    return buf;
}

#ifdef CASCADE_CHOLESKY_DEVICES
// --device: the factorization on the devices of one process, --repeat times; checks the
// residual and the bytes moved against the schedule's minimum (with --check).
int run_devices(const Options& opt) {
    DeviceRunOptions d;
    d.kind = opt.device;
    d.n = opt.n;
    d.nb = opt.nb;
    d.threads = opt.threads;
    d.sims = opt.sims;
    d.cap = opt.cap;
    d.seed = opt.seed;
    d.indefinite = opt.indefinite;
    const TileLayout layout(opt.n, opt.nb);
    const double gflop = static_cast<double>(opt.n) * opt.n * opt.n / 3.0 * 1e-9;
    const double matrix_mib = static_cast<double>(opt.n) * opt.n * sizeof(double) / 1048576.0;
    const std::string devices = opt.device == "sim"      ? std::to_string(opt.sims) + " sim devices"
                                : opt.device == "opencl" ? "the cpu device and an OpenCL device"
                                : opt.device == "cuda"   ? "the cpu device and a CUDA device"
                                                         : "the cpu device";
    char cap[96] = ", each holding at most its own memory";
    if (opt.device == "cpu")
        std::snprintf(cap, sizeof cap, " on the host's memory");
    else if (opt.cap > 0)
        std::snprintf(cap, sizeof cap, ", each holding at most %g %% of the matrix (%.1f MiB)",
                      100 * opt.cap, opt.cap * matrix_mib);
    std::printf(
        "cholesky on devices: n=%d nb=%d (%d x %d tiles%s, %lld tasks), %s%s, %d pool "
        "threads, OpenBLAS %s kernels\n",
        opt.n, opt.nb, layout.nt, layout.nt, opt.n % opt.nb != 0 ? ", last one ragged" : "",
        CholeskyGraph::task_count(layout.nt), devices.c_str(), cap, opt.threads, blas_corename());

    std::vector<double> seconds;
    double worst_residual = -1, worst_ratio = 0;
    DeviceRunResult last;
    try {
        for (int rep = 0; rep < opt.repeat; ++rep) {
            TileMatrix factor(layout, BlockCyclic(1, 1, 1), 0);
            const DeviceRunResult r = run_on_devices(d, factor);
            const double residual =
                opt.check
                    ? distributed_residual(factor, BlockCyclic(1, 1, 1), opt.seed, MPI_COMM_SELF,
                                           std::max(1u, std::thread::hardware_concurrency()))
                    : -1;
            seconds.push_back(r.seconds);
            worst_residual = std::max(worst_residual, residual);
            worst_ratio = std::max(worst_ratio, r.ratio());
            std::printf(
                "run %d/%d: %.4f s, %.2f GFlop/s, moved %.1f MiB, minimum %.1f MiB (ratio %.2f), "
                "%llu evictions, kernels:",
                rep + 1, opt.repeat, r.seconds, gflop / r.seconds, r.bytes_moved / 1048576.0,
                r.bytes_minimum / 1048576.0, r.ratio(),
                static_cast<unsigned long long>(r.evictions));
            for (const auto& [name, count] : r.kernels)
                std::printf(" %s %llu", name.c_str(), static_cast<unsigned long long>(count));
            std::printf(", %s\n", format_residual(residual).c_str());
            last = r;
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cholesky: FAILED: %s\n", e.what());
        return 1;
    }
    const double med = median(seconds);
    const bool residual_ok = !opt.check || worst_residual < residual_tolerance;
    const bool moved_ok = !opt.check || worst_ratio <= opt.max_moved;
    std::printf("cholesky device=%s n=%d nb=%d", opt.device.c_str(), opt.n, opt.nb);
    if (opt.device == "sim") std::printf(" sims=%d", opt.sims);
    std::printf(" cap=%.2f: %.3f s, %.2f GFlop/s", opt.cap, med, gflop / med);
    if (opt.repeat > 1) std::printf(" (median of %d)", opt.repeat);
    std::printf(", moved/minimum %.2f%s, %s%s\n", worst_ratio,
                opt.check ? (moved_ok ? " (OK)" : " (FAILED)") : "",
                format_residual(worst_residual).c_str(),
                opt.check ? (residual_ok ? " (OK)" : " (FAILED)") : "");

    cascade_bench::Record line;
    line.add("app", "cholesky").add("system", "cascade").add("device", opt.device);
    line.add("n", opt.n).add("nb", opt.nb).add("ranks", 1).add("threads", opt.threads);
    line.add("sims", opt.device == "sim" ? opt.sims : 0).add("cap", opt.cap);
    line.add("seconds", med).add("gflops", gflop / med);
    line.add("bytes_moved", last.bytes_moved).add("bytes_minimum", last.bytes_minimum);
    line.add("ratio", worst_ratio).add("evictions", last.evictions).add("tasks", last.tasks);
    for (const auto& [name, count] : last.kernels)
        line.add("kernels_" + name, count);
    line.add("runs", seconds);
    if (worst_residual < 0)
        line.add_null("residual");
    else
        line.add("residual", worst_residual, "%.3e");
    line.print_result();

    if (!residual_ok)
        std::fprintf(stderr,
                     "cholesky: FAILED: relative residual %.3e is not below %.0e (device=%s n=%d "
                     "nb=%d seed=%llu)\n",
                     worst_residual, residual_tolerance, opt.device.c_str(), opt.n, opt.nb,
                     static_cast<unsigned long long>(opt.seed));
    if (!moved_ok)
        std::fprintf(stderr,
                     "cholesky: FAILED: the devices moved %.2fx the bytes the schedule needs "
                     "(at most %.1fx allowed; device=%s n=%d nb=%d cap=%.2f)\n",
                     worst_ratio, opt.max_moved, opt.device.c_str(), opt.n, opt.nb, opt.cap);
    return residual_ok && moved_ok ? 0 : 1;
}
#endif

// "PxQ" -> (P, Q); throws CLI::ValidationError on anything else or a product != ranks.
void parse_grid(const std::string& s, int ranks, int& p, int& q) {
    const auto x = s.find('x');
    std::size_t used_p = 0, used_q = 0;
    try {
        if (x == std::string::npos) throw std::invalid_argument(s);
        p = std::stoi(s.substr(0, x), &used_p);
        q = std::stoi(s.substr(x + 1), &used_q);
    } catch (const std::exception&) {
        throw CLI::ValidationError("--grid", "expected PxQ (e.g. 2x1), got '" + s + "'");
    }
    if (used_p != x || used_q != s.size() - x - 1 || p < 1 || q < 1)
        throw CLI::ValidationError("--grid", "expected PxQ with P, Q >= 1, got '" + s + "'");
    if (p * q != ranks)
        throw CLI::ValidationError("--grid", "grid " + s + " has " + std::to_string(p * q) +
                                                 " processes but the job has " +
                                                 std::to_string(ranks) + " ranks");
}

int run(int argc, char** argv, int rank, int ranks) {
    Options opt;
    CLI::App app{"Distributed tiled dense Cholesky factorization on Cascade taskflows"};
    app.add_option("--n", opt.n, "Matrix order")
        ->check(CLI::Range(1, 1 << 30))
        ->capture_default_str();
    app.add_option("--nb", opt.nb, "Tile size (the last tile is smaller if nb does not divide n)")
        ->check(CLI::Range(1, 1 << 30))
        ->capture_default_str();
    app.add_option("--grid", opt.grid,
                   "Process grid PxQ for the 2D block-cyclic layout (P*Q = ranks; default: as "
                   "square as possible, P <= Q)");
    app.add_option("--threads", opt.threads, "Worker threads per rank (default: cores / ranks)")
        ->check(CLI::Range(1, 4096));
    app.add_option("--repeat", opt.repeat, "Number of factorizations")
        ->check(CLI::Range(1, 1000000))
        ->capture_default_str();
    app.add_flag("--check", opt.check, "Check ||A - L L^T||_F / ||A||_F < 1e-12 (exit 1 if not)");
    app.add_option("--seed", opt.seed, "Seed of the random SPD matrix")->capture_default_str();
    app.add_flag("--reference", opt.reference,
                 "Time LAPACKE_dpotrf on the full matrix with OpenBLAS using --threads threads "
                 "instead of the task graph (one rank)");
    app.add_option("--priority", opt.priority, "Task priorities")
        ->check(CLI::IsMember({"critical-path", "none"}))
        ->capture_default_str();
    app.add_option("--peak-gflops", opt.peak_gflops,
                   "The machine's measured dgemm GFlop/s (e.g. from dgemm_peak): also report "
                   "the speed as a fraction of it")
        ->check(CLI::PositiveNumber);
    app.add_flag("--indefinite", opt.indefinite,
                 "Testing: make the matrix indefinite, so a potrf task fails and the run "
                 "reports which one");
    app.add_option("--trees", opt.trees,
                   "Broadcast detection: a tile read by several ranks leaves its owner once, "
                   "as a tree (off: once per reader)")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    app.add_option("--fake-kernels", opt.fake_gflops,
                   "Kernels sleep flops/RATE seconds (RATE in GFlop/s per worker) instead of "
                   "computing, so that many ranks on few cores each stand for a core and the "
                   "network decides; the factor is not computed (no --check)")
        ->check(CLI::PositiveNumber);
    app.add_flag("-v,--verbose", opt.verbose,
                 "Per-kernel and per-thread statistics (-vv: runtime logs)");
    app.add_option("--device", opt.device,
                   "Factor on the device layer's devices instead of the taskflows (one rank): "
                   "sim (--sims simulated devices), cpu (the pool's workers), opencl (the cpu "
                   "device and an OpenCL device, CLBlast's trsm, syrk and gemm there) or cuda "
                   "(the cpu device and a CUDA device, cuBLAS's trsm, syrk and gemm there)")
        ->check(CLI::IsMember({"sim", "cpu", "opencl", "cuda"}));
    app.add_option("--max-moved", opt.max_moved,
                   "--device with --check: fail if the devices move more than this many times "
                   "the bytes the schedule needs")
        ->check(CLI::Range(1.0, 1000.0))
        ->capture_default_str();
    app.add_option("--sims", opt.sims, "--device sim: number of simulated devices")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    app.add_option("--cap", opt.cap,
                   "--device: data each device may hold, as a fraction of the matrix (0: the "
                   "device's memory)")
        ->check(CLI::Range(0.0, 1e6))
        ->capture_default_str();
    int pr = 0, pc = 0;
    try {
        app.parse(argc, argv);
        if (opt.grid.empty()) {
            const BlockCyclic square(ranks, 1);
            pr = square.grid_rows();
            pc = square.grid_cols();
        } else {
            parse_grid(opt.grid, ranks, pr, pc);
        }
        if (opt.fake_gflops > 0 && (opt.check || opt.reference))
            throw CLI::ValidationError("--fake-kernels",
                                       "computes nothing: not with --check or --reference");
        if (opt.reference && ranks != 1)
            throw CLI::ValidationError("--reference",
                                       "runs on one rank, not " + std::to_string(ranks));
        if (!opt.device.empty()) {
            if (ranks != 1)
                throw CLI::ValidationError(
                    "--device", "runs on one rank, not " + std::to_string(ranks) +
                                    " (the device layer has no MPI: device data across ranks "
                                    "is not supported)");
            if (opt.reference || opt.fake_gflops > 0)
                throw CLI::ValidationError("--device", "not with --reference or --fake-kernels");
        }
    } catch (const CLI::ParseError& e) {
        const int code = rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 1);
        return code;
    }
    if (opt.threads == 0)
        opt.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / ranks);

    const TileLayout layout(opt.n, opt.nb);
    const BlockCyclic dist(pr, pc, opt.threads);
    const double gflop = static_cast<double>(opt.n) * opt.n * opt.n / 3.0 * 1e-9;
    const bool root = rank == 0;

    if (const char* warning = blas_core_warning(); warning && root)
        std::fprintf(stderr, "cholesky: warning: %s\n", warning);
    if (!opt.device.empty()) {
#ifdef CASCADE_CHOLESKY_DEVICES
        return run_devices(opt);
#else
        std::fprintf(stderr, "cholesky: --device: this build has no device layer\n");
        return 1;
#endif
    }

    if (root) {
        if (opt.reference)
            std::printf(
                "cholesky reference: LAPACKE_dpotrf, n=%d, OpenBLAS (%s kernels) with %d "
                "threads\n",
                opt.n, blas_corename(), opt.threads);
        else
            std::printf(
                "cholesky: n=%d nb=%d (%d x %d tiles%s, %lld tasks), %d ranks x %d "
                "threads (%s), priorities %s, OpenBLAS %s kernels\n",
                opt.n, opt.nb, layout.nt, layout.nt, opt.n % opt.nb != 0 ? ", last one ragged" : "",
                CholeskyGraph::task_count(layout.nt), ranks, opt.threads, dist.describe().c_str(),
                opt.priority.c_str(), blas_corename());
    }

    std::vector<RunResult> runs;
    try {
        for (int rep = 0; rep < opt.repeat; ++rep) {
            const RunResult r =
                opt.reference ? run_reference(opt) : run_tiled(opt, dist, rank, opt.verbose > 0);
            runs.push_back(r);
            if (!root) continue;
            std::printf("run %d/%d: %.4f s, %.2f GFlop/s", rep + 1, opt.repeat, r.seconds,
                        gflop / r.seconds);
            if (!opt.reference)
                std::printf(
                    ", efficiency %.1f%%, %lld tiles sent (%lld trees, %lld root "
                    "messages, %.0f%% of multi-reader sends in trees)",
                    100.0 * r.kernel_seconds / (ranks * opt.threads * r.seconds), r.tiles_sent,
                    r.broadcasts, r.root_messages, 100.0 * r.detected_fraction);
            std::printf(", %s\n", format_residual(r.residual).c_str());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cholesky: FAILED: %s\n", e.what());
        if (ranks > 1) MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    if (!root) return 0;

    // Summary: medians over the runs, and the worst residual of all runs.
    std::vector<double> seconds, efficiency;
    double worst_residual = -1;
    for (const RunResult& r : runs) {
        seconds.push_back(r.seconds);
        efficiency.push_back(r.kernel_seconds / (ranks * opt.threads * r.seconds));
        worst_residual = std::max(worst_residual, r.residual);
    }
    const double med = median(seconds), med_eff = median(efficiency);
    const bool ok = !opt.check || worst_residual < residual_tolerance;

    if (opt.reference)
        std::printf("cholesky reference n=%d threads=%d", opt.n, opt.threads);
    else
        std::printf("cholesky n=%d nb=%d ranks=%d (%dx%d) threads=%d", opt.n, opt.nb, ranks, pr, pc,
                    opt.threads);
    std::printf(": %.3f s, %.2f GFlop/s", med, gflop / med);
    if (opt.repeat > 1) std::printf(" (median of %d)", opt.repeat);
    if (!opt.reference) std::printf(", efficiency %.1f%%", 100.0 * med_eff);
    std::printf(", %s%s\n", format_residual(worst_residual).c_str(),
                opt.check ? (ok ? " (OK)" : " (FAILED)") : "");
    if (opt.peak_gflops > 0)
        std::printf("cholesky: %.2f GFlop/s is %.1f%% of the measured dgemm peak (%.1f GFlop/s)\n",
                    gflop / med, 100.0 * gflop / med / opt.peak_gflops, opt.peak_gflops);

    cascade_bench::Record line;
    line.add("app", "cholesky")
        .add("system", opt.reference ? "openblas" : "cascade")
        .add("n", opt.n);
    if (opt.reference)
        line.add_null("nb");
    else
        line.add("nb", opt.nb);
    line.add("ranks", ranks)
        .add("grid", std::to_string(pr) + "x" + std::to_string(pc))
        .add("threads", opt.threads)
        .add("seconds", med)
        .add("gflops", gflop / med);
    if (!opt.reference) {
        line.add("efficiency", med_eff);
        line.add("trees", opt.trees);
        line.add("detected_fraction", runs.back().detected_fraction);
        line.add("fake_gflops", opt.fake_gflops);
    }
    line.add("runs", seconds);
    if (worst_residual < 0)
        line.add_null("residual");
    else
        line.add("residual", worst_residual);
    line.print_result();

    if (!ok) {
        std::fprintf(stderr,
                     "cholesky: FAILED: relative residual %.3e is not below %.0e (n=%d nb=%d "
                     "ranks=%d threads=%d seed=%llu)\n",
                     worst_residual, residual_tolerance, opt.n, opt.nb, ranks, opt.threads,
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
    int code = run(argc, argv, rank, ranks);
    // A failed check on rank 0 fails the job on every rank.
    MPI_Allreduce(MPI_IN_PLACE, &code, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return code;
}
