// cholesky: tiled dense Cholesky factorization (A = L L^T, lower, double precision) on Cascade
// taskflows, on one process. Generates a random SPD matrix, factors it --repeat times, and
// reports time, GFlop/s (n^3/3 flops), runtime efficiency (time inside BLAS/LAPACK kernels
// over threads x wall time) and, with --check, the relative residual ||A - L L^T||_F / ||A||_F.
// --reference times LAPACKE_dpotrf on the whole matrix with multithreaded OpenBLAS instead.
//
// Layout of the app: tile_matrix (storage), distribution (who owns which tile),
// kernels (BLAS calls and their clock), priorities + cholesky_graph (the task graph),
// this file (the driver).

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "../common/blas.hpp"
#include "cascade/cascade.hpp"
#include "cholesky_graph.hpp"
#include "distribution.hpp"
#include "kernels.hpp"
#include "tile_matrix.hpp"

using namespace cascade::apps;

namespace {

constexpr double residual_tolerance = 1e-12;

struct Options {
    int n = 2048;
    int nb = 128;
    int threads = 1;
    int repeat = 1;
    bool check = false;
    bool reference = false;
    std::uint64_t seed = 2024;
    std::string priority = "critical-path";
    int verbose = 0;
    bool indefinite = false;  // testing: the error path when a task fails
};

struct RunResult {
    double seconds = 0;
    double kernel_seconds = 0;  // tiled runs only
    double residual = -1;       // < 0: not checked
};

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Frobenius norm of a symmetric matrix stored in the lower triangle of a dense n x n array.
double frobenius_sym_lower(const std::vector<double>& a, int n) {
    double diag = 0, off = 0;
    const std::size_t un = static_cast<std::size_t>(n);
    for (std::size_t c = 0; c < un; ++c) {
        diag += a[c + c * un] * a[c + c * un];
        for (std::size_t r = c + 1; r < un; ++r)
            off += a[r + c * un] * a[r + c * un];
    }
    return std::sqrt(diag + 2 * off);
}

// ||A - L L^T||_F / ||A||_F with dense BLAS (dsyrk) on copies: `a` is the input's lower
// triangle (overwritten), `l` the factor's lower triangle (upper part zero).
double relative_residual(std::vector<double> a, const std::vector<double>& l, int n,
                         int blas_threads) {
    const double norm_a = frobenius_sym_lower(a, n);
    blas_set_threads(blas_threads);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, n, n, -1.0, l.data(), n, 1.0, a.data(), n);
    blas_set_threads(1);
    return frobenius_sym_lower(a, n) / norm_a;
}

RunResult run_tiled(const Options& opt, const BlockCyclic& dist, bool print_details) {
    TileMatrix a(TileLayout(opt.n, opt.nb), dist, /*rank=*/0);
    a.fill_random_spd(opt.seed);
    if (opt.indefinite) {  // a negative pivot in the middle diagonal tile: its potrf fails
        const int mid = a.layout().nt / 2;
        a.tile(mid, mid)[0] = -1.0;
    }
    std::vector<double> a_copy;
    if (opt.check) a_copy = a.to_dense_lower();

    // One BLAS thread per task: the parallelism comes from the task graph.
    blas_set_threads(1);
    cascade::ThreadpoolOptions tp_opts;
    tp_opts.name = "cholesky";
    tp_opts.verb = opt.verbose > 1 ? 1 : 0;
    cascade::Threadpool tp(opt.threads, tp_opts);
    KernelClock clock(opt.threads);
    CholeskyGraph graph(tp, a, dist, clock,
                        opt.priority == "none" ? PriorityKind::none : PriorityKind::critical_path);

    RunResult r;
    const double t0 = now();
    graph.start();
    tp.join();
    r.seconds = now() - t0;
    r.kernel_seconds = clock.seconds();

    const long long expected = CholeskyGraph::task_count(a.layout().nt);
    if (static_cast<long long>(tp.tasks_run()) != expected)
        throw std::runtime_error("ran " + std::to_string(tp.tasks_run()) + " tasks, expected " +
                                 std::to_string(expected));
    if (print_details) {
        for (int k = 0; k < kernel_count; ++k) {
            const Kernel kk = static_cast<Kernel>(k);
            std::printf("  %-5s %8llu calls  %9.4f s\n", kernel_name(kk),
                        static_cast<unsigned long long>(clock.calls(kk)), clock.seconds(kk));
        }
        for (int t = 0; t < opt.threads; ++t)
            std::printf("  thread %d: %llu tasks (%llu stolen), busy %.1f%%\n", t,
                        static_cast<unsigned long long>(tp.tasks_run(t)),
                        static_cast<unsigned long long>(tp.tasks_stolen(t)),
                        100.0 * clock.thread_seconds(t) / r.seconds);
    }
    if (opt.check)
        r.residual = relative_residual(std::move(a_copy), a.to_dense_lower(), opt.n, opt.threads);
    return r;
}

// LAPACKE_dpotrf on the whole matrix, parallelized by OpenBLAS itself with opt.threads.
RunResult run_reference(const Options& opt) {
    std::vector<double> a;
    {
        TileMatrix tiles(TileLayout(opt.n, opt.nb), BlockCyclic(1, 1), 0);
        tiles.fill_random_spd(opt.seed);
        a = tiles.to_dense_lower();  // the same matrix as the tiled runs
    }
    std::vector<double> a_copy;
    if (opt.check) a_copy = a;

    blas_set_threads(opt.threads);
    RunResult r;
    const double t0 = now();
    potrf_tile(opt.n, a.data(), opt.n);
    r.seconds = now() - t0;
    if (opt.check) r.residual = relative_residual(std::move(a_copy), a, opt.n, opt.threads);
    return r;
}

std::string format_residual(double res) {
    if (res < 0) return "residual not checked";
    char buf[64];
    std::snprintf(buf, sizeof buf, "residual %.1e", res);
    return buf;
}

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // keep stdout and stderr lines in order
    Options opt;
    opt.threads = std::max(1u, std::thread::hardware_concurrency());

    CLI::App app{"Tiled dense Cholesky factorization on Cascade taskflows (one process)"};
    app.add_option("--n", opt.n, "Matrix order")
        ->check(CLI::Range(1, 1 << 30))
        ->capture_default_str();
    app.add_option("--nb", opt.nb, "Tile size (the last tile is smaller if nb does not divide n)")
        ->check(CLI::Range(1, 1 << 30))
        ->capture_default_str();
    app.add_option("--threads", opt.threads, "Worker threads")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    app.add_option("--repeat", opt.repeat, "Number of factorizations")
        ->check(CLI::Range(1, 1000000))
        ->capture_default_str();
    app.add_flag("--check", opt.check, "Check ||A - L L^T||_F / ||A||_F < 1e-12 (exit 1 if not)");
    app.add_option("--seed", opt.seed, "Seed of the random SPD matrix")->capture_default_str();
    app.add_flag("--reference", opt.reference,
                 "Time LAPACKE_dpotrf on the full matrix with OpenBLAS using --threads threads "
                 "instead of the task graph");
    app.add_option("--priority", opt.priority, "Task priorities")
        ->check(CLI::IsMember({"critical-path", "none"}))
        ->capture_default_str();
    app.add_flag("--indefinite", opt.indefinite,
                 "Testing: make the matrix indefinite, so a potrf task fails and the run "
                 "reports which one");
    app.add_flag("-v,--verbose", opt.verbose,
                 "Per-kernel and per-thread statistics (-vv: runtime logs)");
    CLI11_PARSE(app, argc, argv);

    const TileLayout layout(opt.n, opt.nb);
    const BlockCyclic dist(1, opt.threads);
    const double gflop = static_cast<double>(opt.n) * opt.n * opt.n / 3.0 * 1e-9;

    if (const char* warning = blas_core_warning())
        std::fprintf(stderr, "cholesky: warning: %s\n", warning);
    if (opt.reference)
        std::printf(
            "cholesky reference: LAPACKE_dpotrf, n=%d, OpenBLAS (%s kernels) with %d "
            "threads\n",
            opt.n, blas_corename(), opt.threads);
    else
        std::printf(
            "cholesky: n=%d nb=%d (%d x %d tiles%s, %lld tasks), %d threads (%s), "
            "priorities %s, OpenBLAS %s kernels\n",
            opt.n, opt.nb, layout.nt, layout.nt, opt.n % opt.nb != 0 ? ", last one ragged" : "",
            CholeskyGraph::task_count(layout.nt), opt.threads, dist.describe().c_str(),
            opt.priority.c_str(), blas_corename());

    std::vector<RunResult> runs;
    try {
        for (int rep = 0; rep < opt.repeat; ++rep) {
            const RunResult r =
                opt.reference ? run_reference(opt) : run_tiled(opt, dist, opt.verbose > 0);
            runs.push_back(r);
            std::printf("run %d/%d: %.4f s, %.2f GFlop/s", rep + 1, opt.repeat, r.seconds,
                        gflop / r.seconds);
            if (!opt.reference)
                std::printf(", efficiency %.1f%%",
                            100.0 * r.kernel_seconds / (opt.threads * r.seconds));
            std::printf(", %s\n", format_residual(r.residual).c_str());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cholesky: FAILED: %s\n", e.what());
        return 1;
    }

    // Summary: the best run, and the worst residual of all runs.
    const RunResult best = *std::min_element(
        runs.begin(), runs.end(),
        [](const RunResult& x, const RunResult& y) { return x.seconds < y.seconds; });
    double worst_residual = -1;
    for (const RunResult& r : runs)
        worst_residual = std::max(worst_residual, r.residual);
    const bool ok = !opt.check || worst_residual < residual_tolerance;

    if (opt.reference)
        std::printf("cholesky reference n=%d threads=%d", opt.n, opt.threads);
    else
        std::printf("cholesky n=%d nb=%d threads=%d", opt.n, opt.nb, opt.threads);
    std::printf(": %.3f s, %.2f GFlop/s", best.seconds, gflop / best.seconds);
    if (opt.repeat > 1) std::printf(" (best of %d)", opt.repeat);
    if (!opt.reference)
        std::printf(", efficiency %.1f%%",
                    100.0 * best.kernel_seconds / (opt.threads * best.seconds));
    std::printf(", %s%s\n", format_residual(worst_residual).c_str(),
                opt.check ? (ok ? " (OK)" : " (FAILED)") : "");
    if (!ok) {
        std::fprintf(stderr,
                     "cholesky: FAILED: relative residual %.3e is not below %.0e (n=%d nb=%d "
                     "threads=%d seed=%llu)\n",
                     worst_residual, residual_tolerance, opt.n, opt.nb, opt.threads,
                     static_cast<unsigned long long>(opt.seed));
        return 1;
    }
    return 0;
}
