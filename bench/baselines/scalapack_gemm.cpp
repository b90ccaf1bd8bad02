// scalapack_gemm: the ScaLAPACK baseline for the GEMM benchmark. pdgemm C = A B on n x n
// matrices in 2D block-cyclic layout (nb x nb blocks) over a P x Q BLACS grid, one BLAS thread
// per rank. Times --repeat products and prints the median; --check compares C x with A (B x)
// evaluated from the generator on rank 0 (see gemm_check_residual in common.hpp).
//
//   mpiexec -n 2 scalapack_gemm --n 4096 --nb 256 [--grid 2x1] [--repeat 3] [--check]

#include <mpi.h>

#include <cstdio>
#include <vector>

#include "common.hpp"
#include "scalapack_api.hpp"

using namespace baselines;

namespace {

template <class F>
void fill(const BlockCyclicLocal& m, std::vector<double>& a, F entry) {
    for (int lj = 0; lj < m.cols; ++lj) {
        const int gj = m.global_col(lj);
        for (int li = 0; li < m.rows; ++li)
            a[li + static_cast<std::size_t>(lj) * m.lld] = entry(m.global_row(li), gj);
    }
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv, kNb | kGrid);
    MPI_Init(&argc, &argv);
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (!resolve_grid(o, ranks, rank, "scalapack_gemm")) {
        MPI_Finalize();
        return 2;
    }
    openblas_set_num_threads(1);

    int ctxt = 0, P = o.P, Q = o.Q, myrow = 0, mycol = 0;
    Cblacs_get(-1, 0, &ctxt);
    Cblacs_gridinit(&ctxt, "Row", P, Q);
    Cblacs_gridinfo(ctxt, &P, &Q, &myrow, &mycol);
    const BlockCyclicLocal m(o.n, o.nb, ctxt, P, Q, myrow, mycol);
    if (m.info != 0) {
        if (rank == 0) std::fprintf(stderr, "scalapack_gemm: error: descinit info %d\n", m.info);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0)
        std::printf("scalapack_gemm: n %d, nb %d, grid %dx%d, %d rank(s) x 1 thread, %d run(s)\n",
                    o.n, o.nb, P, Q, ranks, o.repeat);

    const std::uint64_t seed = o.seed;
    std::vector<double> a(m.size()), b(m.size()), c(m.size(), 0.0);
    fill(m, a, [seed](int i, int j) { return gemm_a(seed, i, j); });
    fill(m, b, [seed](int i, int j) { return gemm_b(seed, i, j); });

    std::vector<double> runs;
    const int one = 1;
    const double one_d = 1, zero_d = 0;
    for (int r = 0; r < o.repeat; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now_seconds();
        pdgemm_("N", "N", &o.n, &o.n, &o.n, &one_d, a.data(), &one, &one, m.desc, b.data(), &one,
                &one, m.desc, &zero_d, c.data(), &one, &one, m.desc, 1, 1);
        MPI_Barrier(MPI_COMM_WORLD);
        const double t = now_seconds() - t0;
        runs.push_back(t);
        if (rank == 0) {
            std::printf("run %d: %.4f s, %.1f GFlop/s\n", r, t, gemm_gflop(o.n) / t);
            std::fflush(stdout);
        }
    }

    int failed = 0;
    double res = -1;
    if (o.check) {
        // Each rank multiplies its blocks of C by the matching entries of x; rank 0 sums.
        std::vector<double> cx(o.n, 0.0), total(rank == 0 ? o.n : 0);
        for (int lj = 0; lj < m.cols; ++lj) {
            const double xj = check_x(seed, m.global_col(lj));
            for (int li = 0; li < m.rows; ++li)
                cx[m.global_row(li)] += c[li + static_cast<std::size_t>(lj) * m.lld] * xj;
        }
        MPI_Reduce(cx.data(), total.data(), o.n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            res = gemm_check_residual(seed, o.n, total);
            failed = report_check(res) ? 0 : 1;
        }
    }
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!failed && rank == 0)
        print_result("gemm", "scalapack", o.n, o.nb, ranks, 1, o, runs, gemm_gflop(o.n), res);

    Cblacs_gridexit(ctxt);
    Cblacs_exit(1);
    MPI_Finalize();
    return failed ? 1 : 0;
}
