// starpu_cholesky: the StarPU-MPI 1.3 baseline for the Cholesky benchmark. Tiled right-looking
// Cholesky (lower, double precision) written in StarPU's sequential-task-flow style: every rank
// inserts every task with starpu_mpi_task_insert, StarPU-MPI runs each on the owner of the tile
// it writes (2D block-cyclic over P x Q) and moves tiles between ranks. Kernels are
// single-threaded LAPACKE_dpotrf / cblas_dtrsm / cblas_dsyrk / cblas_dgemm; priorities follow
// the critical path (as in StarPU's own mpi_cholesky example). Workers per rank: STARPU_NCPU;
// scheduler: STARPU_SCHED (prio, dmdas, ...).
//
//   mpiexec -n 2 starpu_cholesky --n 4096 --nb 256 [--grid 2x1] [--repeat 3] [--check]
//
// --check computes ||A - L L^T||_F / ||A||_F with a second task graph (syrk/gemm on the
// distributed factor into a copy of A), so it is correct for any layout and size.

#include <cblas.h>
#include <lapacke.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common.hpp"
#include "starpu_tiles.hpp"

using namespace baselines;

namespace {

std::atomic<int> failed_potrf{0};

double* tile(void* buffer) {
    return reinterpret_cast<double*>(STARPU_MATRIX_GET_PTR(buffer));
}
int rows(void* buffer) {
    return static_cast<int>(STARPU_MATRIX_GET_NX(buffer));
}
int cols(void* buffer) {
    return static_cast<int>(STARPU_MATRIX_GET_NY(buffer));
}
int ld(void* buffer) {
    return static_cast<int>(STARPU_MATRIX_GET_LD(buffer));
}

// A_kk = L_kk L_kk^T
void potrf_cpu(void* buffers[], void*) {
    const int info =
        LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', rows(buffers[0]), tile(buffers[0]), ld(buffers[0]));
    if (info != 0) failed_potrf.store(info, std::memory_order_relaxed);
}
// A_ik <- A_ik L_kk^{-T}   (buffers: L_kk, A_ik)
void trsm_cpu(void* buffers[], void*) {
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, rows(buffers[1]),
                cols(buffers[1]), 1.0, tile(buffers[0]), ld(buffers[0]), tile(buffers[1]),
                ld(buffers[1]));
}
// A_ii <- A_ii - A_ik A_ik^T   (buffers: A_ik, A_ii)
void syrk_cpu(void* buffers[], void*) {
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, rows(buffers[1]), cols(buffers[0]), -1.0,
                tile(buffers[0]), ld(buffers[0]), 1.0, tile(buffers[1]), ld(buffers[1]));
}
// A_ij <- A_ij - A_ik A_jk^T   (buffers: A_ik, A_jk, A_ij)
void gemm_cpu(void* buffers[], void*) {
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, rows(buffers[2]), cols(buffers[2]),
                cols(buffers[0]), -1.0, tile(buffers[0]), ld(buffers[0]), tile(buffers[1]),
                ld(buffers[1]), 1.0, tile(buffers[2]), ld(buffers[2]));
}
// Zeroes the strictly upper triangle of a diagonal tile (for the residual check).
void zero_upper_cpu(void* buffers[], void*) {
    double* t = tile(buffers[0]);
    const int n = cols(buffers[0]), l = ld(buffers[0]);
    for (int c = 1; c < n; ++c)
        for (int r = 0; r < c; ++r)
            t[r + static_cast<std::size_t>(c) * l] = 0.0;
}

starpu_perfmodel potrf_model = history_model("cascade_baseline_dpotrf");
starpu_perfmodel trsm_model = history_model("cascade_baseline_dtrsm");
starpu_perfmodel syrk_model = history_model("cascade_baseline_dsyrk");
starpu_perfmodel gemm_model = history_model("cascade_baseline_dgemm_nt");
starpu_codelet potrf_cl = make_codelet("potrf", potrf_cpu, {STARPU_RW}, &potrf_model);
starpu_codelet trsm_cl = make_codelet("trsm", trsm_cpu, {STARPU_R, STARPU_RW}, &trsm_model);
starpu_codelet syrk_cl = make_codelet("syrk", syrk_cpu, {STARPU_R, STARPU_RW}, &syrk_model);
starpu_codelet gemm_cl =
    make_codelet("gemm", gemm_cpu, {STARPU_R, STARPU_R, STARPU_RW}, &gemm_model);
starpu_codelet zero_upper_cl = make_codelet("zero_upper", zero_upper_cpu, {STARPU_RW}, nullptr);

void insert_or_die(int ret) {
    if (ret != 0) {
        std::fprintf(stderr, "starpu_cholesky: error: starpu_mpi_task_insert returned %d\n", ret);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

// The factorization's task flow. Priorities: distance to the end along the critical path
// (potrf(k) > trsm(i, k) > updates of column k + 1 > later columns).
void insert_cholesky(const TiledMatrix& a) {
    const int nt = a.nt();
    const MPI_Comm comm = MPI_COMM_WORLD;
    for (int k = 0; k < nt; ++k) {
        insert_or_die(starpu_mpi_task_insert(comm, &potrf_cl, STARPU_RW, a(k, k), STARPU_PRIORITY,
                                             2 * nt - 2 * k, 0));
        for (int i = k + 1; i < nt; ++i)
            insert_or_die(starpu_mpi_task_insert(comm, &trsm_cl, STARPU_R, a(k, k), STARPU_RW,
                                                 a(i, k), STARPU_PRIORITY, 2 * nt - 2 * k - i, 0));
        starpu_mpi_cache_flush(comm, a(k, k));
        for (int i = k + 1; i < nt; ++i) {
            for (int j = k + 1; j < i; ++j)
                insert_or_die(starpu_mpi_task_insert(comm, &gemm_cl, STARPU_R, a(i, k), STARPU_R,
                                                     a(j, k), STARPU_RW, a(i, j), STARPU_PRIORITY,
                                                     2 * nt - 2 * k - i - j, 0));
            insert_or_die(starpu_mpi_task_insert(comm, &syrk_cl, STARPU_R, a(i, k), STARPU_RW,
                                                 a(i, i), STARPU_PRIORITY, 2 * nt - 2 * k - 2 * i,
                                                 0));
        }
        // Copies of column k received from other ranks are no longer needed.
        for (int i = k + 1; i < nt; ++i)
            starpu_mpi_cache_flush(comm, a(i, k));
    }
}

// ||A - L L^T||_F / ||A||_F for the factor in `l`.
double residual(const Options& o, int rank, TiledMatrix& l) {
    const MPI_Comm comm = MPI_COMM_WORLD;
    const int nt = l.nt();
    for (int k = 0; k < nt; ++k)
        insert_or_die(starpu_mpi_task_insert(comm, &zero_upper_cl, STARPU_RW, l(k, k), 0));
    TiledMatrix r(o.n, o.nb, o.P, o.Q, rank, true, static_cast<starpu_mpi_tag_t>(nt) * nt);
    const std::uint64_t seed = o.seed;
    const int n = o.n;
    r.fill([&](int i, int j) { return spd_entry(seed, n, i, j); });
    // R_ij -= sum_{k <= j} L_ik L_jk^T (syrk on the diagonal).
    for (int j = 0; j < nt; ++j) {
        for (int i = j; i < nt; ++i) {
            for (int k = 0; k <= j; ++k) {
                if (i == j)
                    insert_or_die(starpu_mpi_task_insert(comm, &syrk_cl, STARPU_R, l(i, k),
                                                         STARPU_RW, r(i, i), 0));
                else
                    insert_or_die(starpu_mpi_task_insert(comm, &gemm_cl, STARPU_R, l(i, k),
                                                         STARPU_R, l(j, k), STARPU_RW, r(i, j), 0));
            }
        }
    }
    starpu_mpi_wait_for_all(comm);
    double sums[2] = {0, 0};  // ||R||^2, ||A||^2 over the lower triangle, off-diagonal twice
    r.for_each_mine([&](int i, int j, double* t, int ldt) {
        for (int c = 0; c < r.rows(j); ++c) {
            for (int rr = (i == j ? c : 0); rr < r.rows(i); ++rr) {
                const int gi = i * o.nb + rr, gj = j * o.nb + c;
                const double w = gi == gj ? 1.0 : 2.0;
                const double v = t[rr + static_cast<std::size_t>(c) * ldt];
                const double av = spd_entry(seed, n, gi, gj);
                sums[0] += w * v * v;
                sums[1] += w * av * av;
            }
        }
    });
    MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, comm);
    return std::sqrt(sums[0] / sums[1]);
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv, kNb | kGrid);
    StarpuSession session(&argc, &argv, "starpu_cholesky");
    const int rank = session.rank, ranks = session.ranks;
    if (!resolve_grid(o, ranks, rank, "starpu_cholesky")) return 2;
    const int workers = session.workers();
    if (rank == 0)
        std::printf(
            "starpu_cholesky: n %d, nb %d, grid %dx%d, %d rank(s) x %d worker(s), %d run(s)\n", o.n,
            o.nb, o.P, o.Q, ranks, workers, o.repeat);

    int failed = 0;
    std::vector<double> runs;
    double res = -1;
    {
        TiledMatrix a(o.n, o.nb, o.P, o.Q, rank, true, 0);
        const std::uint64_t seed = o.seed;
        const int n = o.n;
        for (int r = 0; r < o.repeat && !failed; ++r) {
            a.fill([&](int i, int j) { return spd_entry(seed, n, i, j); });
            starpu_mpi_cache_flush_all_data(MPI_COMM_WORLD);
            starpu_mpi_barrier(MPI_COMM_WORLD);
            const double t0 = now_seconds();
            insert_cholesky(a);
            starpu_mpi_wait_for_all(MPI_COMM_WORLD);
            starpu_mpi_barrier(MPI_COMM_WORLD);
            const double t = now_seconds() - t0;
            int bad = failed_potrf.load();
            MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (bad != 0) {
                if (rank == 0)
                    std::fprintf(stderr,
                                 "starpu_cholesky: error: a potrf task failed (LAPACK info %d: "
                                 "matrix not positive definite)\n",
                                 bad);
                failed = 1;
                break;
            }
            runs.push_back(t);
            if (rank == 0) {
                std::printf("run %d: %.4f s, %.1f GFlop/s\n", r, t, cholesky_gflop(o.n) / t);
                std::fflush(stdout);
            }
        }
        if (!failed && o.check) {
            res = residual(o, rank, a);
            if (rank == 0 && !report_check(res)) failed = 1;
            MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
        }
        starpu_mpi_wait_for_all(MPI_COMM_WORLD);
    }
    if (!failed && rank == 0)
        print_result("cholesky", "starpu", o.n, o.nb, ranks, workers, o, runs, cholesky_gflop(o.n),
                     res);
    return failed ? 1 : 0;
}
