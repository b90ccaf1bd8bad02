// starpu_gemm: the StarPU-MPI 1.3 baseline for the GEMM benchmark. C = A B on n x n matrices
// of nb x nb tiles, all three 2D block-cyclic over P x Q, written as a sequential task flow:
// every rank inserts the tasks C_ij += A_ik B_kj (k outermost) with starpu_mpi_task_insert,
// StarPU-MPI runs each on the owner of C_ij and sends it the A and B tiles it needs. Kernels
// are single-threaded cblas_dgemm. Workers per rank: STARPU_NCPU; scheduler: STARPU_SCHED.
//
//   mpiexec -n 2 starpu_gemm --n 4096 --nb 256 [--grid 2x1] [--repeat 3] [--check]
//
// --check compares C x with A (B x) evaluated from the generator on rank 0.

#include <cblas.h>

#include <cstdio>
#include <vector>

#include "common.hpp"
#include "starpu_tiles.hpp"

using namespace baselines;

namespace {

// C_ij += A_ik B_kj   (buffers: A_ik, B_kj, C_ij)
void gemm_cpu(void* buffers[], void*) {
    auto ptr = [&](int b) { return reinterpret_cast<double*>(STARPU_MATRIX_GET_PTR(buffers[b])); };
    auto ld = [&](int b) { return static_cast<int>(STARPU_MATRIX_GET_LD(buffers[b])); };
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans,
                static_cast<int>(STARPU_MATRIX_GET_NX(buffers[2])),
                static_cast<int>(STARPU_MATRIX_GET_NY(buffers[2])),
                static_cast<int>(STARPU_MATRIX_GET_NY(buffers[0])), 1.0, ptr(0), ld(0), ptr(1),
                ld(1), 1.0, ptr(2), ld(2));
}

starpu_perfmodel gemm_model = history_model("cascade_baseline_dgemm_nn");
starpu_codelet gemm_cl =
    make_codelet("gemm", gemm_cpu, {STARPU_R, STARPU_R, STARPU_RW}, &gemm_model);

void insert_gemm(const TiledMatrix& a, const TiledMatrix& b, const TiledMatrix& c) {
    const int nt = c.nt();
    const MPI_Comm comm = MPI_COMM_WORLD;
    for (int k = 0; k < nt; ++k) {
        for (int i = 0; i < nt; ++i) {
            for (int j = 0; j < nt; ++j) {
                const int ret =
                    starpu_mpi_task_insert(comm, &gemm_cl, STARPU_R, a(i, k), STARPU_R, b(k, j),
                                           STARPU_RW, c(i, j), STARPU_PRIORITY, nt - k, 0);
                if (ret != 0) {
                    std::fprintf(stderr, "starpu_gemm: error: starpu_mpi_task_insert returned %d\n",
                                 ret);
                    MPI_Abort(comm, 1);
                }
            }
        }
        // Received copies of A(:, k) and B(k, :) are not needed after step k.
        for (int i = 0; i < nt; ++i) {
            starpu_mpi_cache_flush(comm, a(i, k));
            starpu_mpi_cache_flush(comm, b(k, i));
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse_options(argc, argv, kNb | kGrid);
    StarpuSession session(&argc, &argv, "starpu_gemm");
    const int rank = session.rank, ranks = session.ranks;
    if (!resolve_grid(o, ranks, rank, "starpu_gemm")) return 2;
    const int workers = session.workers();
    if (rank == 0)
        std::printf("starpu_gemm: n %d, nb %d, grid %dx%d, %d rank(s) x %d worker(s), %d run(s)\n",
                    o.n, o.nb, o.P, o.Q, ranks, workers, o.repeat);

    int failed = 0;
    std::vector<double> runs;
    double res = -1;
    {
        const int nt = (o.n + o.nb - 1) / o.nb;
        const auto tags = static_cast<starpu_mpi_tag_t>(nt) * nt;
        TiledMatrix a(o.n, o.nb, o.P, o.Q, rank, false, 0);
        TiledMatrix b(o.n, o.nb, o.P, o.Q, rank, false, tags);
        TiledMatrix c(o.n, o.nb, o.P, o.Q, rank, false, 2 * tags);
        const std::uint64_t seed = o.seed;
        a.fill([seed](int i, int j) { return gemm_a(seed, i, j); });
        b.fill([seed](int i, int j) { return gemm_b(seed, i, j); });
        for (int r = 0; r < o.repeat; ++r) {
            c.fill([](int, int) { return 0.0; });
            starpu_mpi_cache_flush_all_data(MPI_COMM_WORLD);
            starpu_mpi_barrier(MPI_COMM_WORLD);
            const double t0 = now_seconds();
            insert_gemm(a, b, c);
            starpu_mpi_wait_for_all(MPI_COMM_WORLD);
            starpu_mpi_barrier(MPI_COMM_WORLD);
            const double t = now_seconds() - t0;
            runs.push_back(t);
            if (rank == 0) {
                std::printf("run %d: %.4f s, %.1f GFlop/s\n", r, t, gemm_gflop(o.n) / t);
                std::fflush(stdout);
            }
        }
        if (o.check) {
            std::vector<double> cx(o.n, 0.0), total(rank == 0 ? o.n : 0);
            c.for_each_mine([&](int i, int j, double* t, int ld) {
                for (int col = 0; col < c.rows(j); ++col) {
                    const double xj = check_x(seed, j * o.nb + col);
                    for (int row = 0; row < c.rows(i); ++row)
                        cx[i * o.nb + row] += t[row + static_cast<std::size_t>(col) * ld] * xj;
                }
            });
            MPI_Reduce(cx.data(), total.data(), o.n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                res = gemm_check_residual(seed, o.n, total);
                failed = report_check(res) ? 0 : 1;
            }
            MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
        }
    }
    if (!failed && rank == 0)
        print_result("gemm", "starpu", o.n, o.nb, ranks, workers, o, runs, gemm_gflop(o.n), res);
    return failed ? 1 : 0;
}
