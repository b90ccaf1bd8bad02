// scalapack_cholesky: the ScaLAPACK baseline for the Cholesky benchmark. pdpotrf (lower) on an
// n x n SPD matrix in 2D block-cyclic layout (nb x nb blocks) over a P x Q BLACS grid, one
// BLAS thread per rank. Times --repeat factorizations (the matrix is regenerated, untimed,
// before each) and prints the median; --check computes ||A - L L^T||_F / ||A||_F on the
// distributed factor with pdsyrk and pdlansy.
//
//   mpiexec -n 2 scalapack_cholesky --n 4096 --nb 256 [--grid 2x1] [--repeat 3] [--check]

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "common.hpp"
#include "scalapack_api.hpp"

using namespace baselines;

namespace {

void fill_spd(const BlockCyclicLocal& m, std::uint64_t seed, std::vector<double>& a) {
    for (int lj = 0; lj < m.cols; ++lj) {
        const int gj = m.global_col(lj);
        for (int li = 0; li < m.rows; ++li)
            a[li + static_cast<std::size_t>(lj) * m.lld] =
                spd_entry(seed, m.n, m.global_row(li), gj);
    }
}

// ||A - L L^T||_F / ||A||_F with L in the lower triangle of `l` (its upper part is zeroed here).
double residual(const BlockCyclicLocal& m, std::uint64_t seed, std::vector<double>& l) {
    const int one = 1, two = 2, nm1 = m.n - 1;
    const double zero_d = 0, one_d = 1, minus_one = -1;
    if (nm1 > 0) pdlaset_("U", &nm1, &nm1, &zero_d, &zero_d, l.data(), &one, &two, m.desc, 1);
    std::vector<double> r(m.size());
    fill_spd(m, seed, r);
    std::vector<double> work(4 * (static_cast<std::size_t>(m.rows) + m.cols + 2 * m.nb) + 64);
    const double norm_a = pdlansy_("F", "L", &m.n, r.data(), &one, &one, m.desc, work.data(), 1, 1);
    // r <- A - L L^T (lower triangle only, which is all pdlansy reads).
    pdsyrk_("L", "N", &m.n, &m.n, &minus_one, l.data(), &one, &one, m.desc, &one_d, r.data(), &one,
            &one, m.desc, 1, 1);
    const double norm_r = pdlansy_("F", "L", &m.n, r.data(), &one, &one, m.desc, work.data(), 1, 1);
    return norm_r / norm_a;
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv, kNb | kGrid);
    MPI_Init(&argc, &argv);
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (!resolve_grid(o, ranks, rank, "scalapack_cholesky")) {
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
        if (rank == 0)
            std::fprintf(stderr, "scalapack_cholesky: error: descinit info %d\n", m.info);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0)
        std::printf(
            "scalapack_cholesky: n %d, nb %d, grid %dx%d, %d rank(s) x 1 thread, %d run(s)\n", o.n,
            o.nb, P, Q, ranks, o.repeat);

    std::vector<double> a(m.size());
    std::vector<double> runs;
    int failed = 0;
    for (int r = 0; r < o.repeat; ++r) {
        fill_spd(m, o.seed, a);
        const int one = 1;
        int info = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now_seconds();
        pdpotrf_("L", &o.n, a.data(), &one, &one, m.desc, &info, 1);
        MPI_Barrier(MPI_COMM_WORLD);
        const double t = now_seconds() - t0;
        if (info != 0) {
            if (rank == 0)
                std::fprintf(stderr, "scalapack_cholesky: error: pdpotrf info %d (%s)\n", info,
                             info > 0 ? "matrix not positive definite" : "bad argument");
            failed = 1;
            break;
        }
        runs.push_back(t);
        if (rank == 0) {
            std::printf("run %d: %.4f s, %.1f GFlop/s\n", r, t, cholesky_gflop(o.n) / t);
            std::fflush(stdout);
        }
    }

    double res = -1;
    if (!failed && o.check) {
        res = residual(m, o.seed, a);
        if (rank == 0 && !report_check(res)) failed = 1;
    }
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!failed && rank == 0)
        print_result("cholesky", "scalapack", o.n, o.nb, ranks, 1, o, runs, cholesky_gflop(o.n),
                     res);

    Cblacs_gridexit(ctxt);
    Cblacs_exit(1);
    MPI_Finalize();
    return failed ? 1 : 0;
}
