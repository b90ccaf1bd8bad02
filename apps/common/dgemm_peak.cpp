// dgemm_peak: the machine's practical floating-point peak, measured as OpenBLAS's
// multithreaded dgemm on square matrices (best of --repeat). ./cascade demo reports the
// Cholesky's speed as a fraction of this number.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "blas.hpp"

int main(int argc, char** argv) {
    int n = 4096, threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    int repeat = 3;
    CLI::App app{"Measure OpenBLAS dgemm GFlop/s on all cores"};
    app.add_option("--n", n, "Matrix order")->check(CLI::Range(1, 1 << 16))->capture_default_str();
    app.add_option("--threads", threads, "OpenBLAS threads")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    app.add_option("--repeat", repeat, "Repeats (best is reported)")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    cascade::apps::blas_set_threads(threads);
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    std::vector<double> a(nn, 0.5), b(nn, 0.25), c(nn, 0.0);
    double best = 1e300;
    for (int r = 0; r < repeat + 1; ++r) {  // the first call warms up (thread start, pages)
        const auto t0 = std::chrono::steady_clock::now();
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a.data(), n, b.data(),
                    n, 0.0, c.data(), n);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r > 0) best = std::min(best, s);
    }
    const double gflops = 2.0 * n * n * static_cast<double>(n) * 1e-9 / best;
    std::printf("dgemm peak: %.1f GFlop/s (n=%d, %d threads, OpenBLAS %s kernels)\n", gflops, n,
                threads, cascade::apps::blas_corename());
    return 0;
}
