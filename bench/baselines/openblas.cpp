// openblas: the single-process reference for the application benchmarks. One LAPACKE_dpotrf
// (lower) or cblas_dgemm on the whole n x n matrix with OpenBLAS's own T threads: what the
// machine's tuned library reaches without any task runtime (the practical limit).
//
//   openblas --op potrf|gemm --n 4096 [--threads T] [--repeat R] [--check]
//
// --check: potrf: ||A - L L^T||_F / ||A||_F (dsyrk); gemm: ||C x - A (B x)|| relative to
// ||A||_F ||B||_F ||x|| with A (B x) evaluated from the generator, not by BLAS.

#include <cblas.h>
#include <lapacke.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "common.hpp"

using namespace baselines;

namespace {

using Matrix = std::vector<double>;  // column-major n x n

void fill_spd(int n, std::uint64_t seed, Matrix& a) {
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i)
            a[i + static_cast<std::size_t>(j) * n] = spd_entry(seed, n, i, j);
}

double cholesky_residual(int n, std::uint64_t seed, Matrix& l) {
    for (int j = 1; j < n; ++j)
        for (int i = 0; i < j; ++i)
            l[i + static_cast<std::size_t>(j) * n] = 0.0;
    Matrix r(static_cast<std::size_t>(n) * n);
    fill_spd(n, seed, r);
    double aa = 0, rr = 0;
    for (int j = 0; j < n; ++j)
        for (int i = j; i < n; ++i) {
            const double v = r[i + static_cast<std::size_t>(j) * n];
            aa += (i == j ? 1 : 2) * v * v;
        }
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, n, n, -1.0, l.data(), n, 1.0, r.data(), n);
    for (int j = 0; j < n; ++j)
        for (int i = j; i < n; ++i) {
            const double v = r[i + static_cast<std::size_t>(j) * n];
            rr += (i == j ? 1 : 2) * v * v;
        }
    return std::sqrt(rr / aa);
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse_options(argc, argv, kThreads | kOp);
    const int n = o.n;
    const bool potrf = o.op == "potrf";
    openblas_set_num_threads(o.threads);
    std::printf("openblas: %s, n %d, %d thread(s), %d run(s)\n", o.op.c_str(), n, o.threads,
                o.repeat);

    const std::size_t nn = static_cast<std::size_t>(n) * n;
    Matrix a(nn), b, c;
    if (!potrf) {
        b.resize(nn);
        c.resize(nn);
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < n; ++i) {
                a[i + static_cast<std::size_t>(j) * n] = gemm_a(o.seed, i, j);
                b[i + static_cast<std::size_t>(j) * n] = gemm_b(o.seed, i, j);
            }
    }
    const double gflop = potrf ? cholesky_gflop(n) : gemm_gflop(n);
    std::vector<double> runs;
    for (int r = 0; r < o.repeat; ++r) {
        if (potrf) fill_spd(n, o.seed, a);
        const double t0 = now_seconds();
        if (potrf) {
            const int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', n, a.data(), n);
            if (info != 0) {
                std::fprintf(stderr, "openblas: error: dpotrf info %d\n", info);
                return 1;
            }
        } else {
            cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a.data(), n,
                        b.data(), n, 0.0, c.data(), n);
        }
        const double t = now_seconds() - t0;
        runs.push_back(t);
        std::printf("run %d: %.4f s, %.1f GFlop/s\n", r, t, gflop / t);
        std::fflush(stdout);
    }

    double res = -1;
    if (o.check) {
        if (potrf) {
            res = cholesky_residual(n, o.seed, a);
        } else {
            std::vector<double> cx(n, 0.0);
            for (int j = 0; j < n; ++j) {
                const double xj = check_x(o.seed, j);
                for (int i = 0; i < n; ++i)
                    cx[i] += c[i + static_cast<std::size_t>(j) * n] * xj;
            }
            res = gemm_check_residual(o.seed, n, cx);
        }
        if (!report_check(res)) return 1;
    }
    print_result(potrf ? "cholesky" : "gemm", "openblas", n, -1, 1, o.threads, o, runs, gflop, res);
    return 0;
}
