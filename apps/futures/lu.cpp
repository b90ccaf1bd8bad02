// Tiled LU with futures (the thesis's third example), as dataflow: every tile is a
// shared_future of its latest version; each kernel is an async whose tile arguments are
// futures, so it runs (on the rank chosen for that tile) once its inputs exist, and no
// thread ever blocks waiting for a tile. The matrix is made diagonally dominant so that LU
// without pivoting is stable (getrf's partial pivoting is checked to pick no row swap).
// Checks ||A x - L (U x)|| / (||A|| ||x||).
#include <CLI/CLI.hpp>
#include <cascade/cascade.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <vector>

#include "../common/blas.hpp"
#include "common/record.hpp"
#include "common/stats.hpp"

using Tile = std::vector<double>;  // nb x nb, column major

int main(int argc, char** argv) {
    CLI::App app{"Tiled LU with cascade futures"};
    int n = 2000, nb = 200, threads = 2, repeat = 1;
    app.add_option("--n", n, "matrix size (a multiple of --nb)")->check(CLI::Range(1, 1 << 16));
    app.add_option("--nb", nb, "tile size")->check(CLI::Range(1, 1 << 14));
    app.add_option("--threads", threads, "workers per rank")->check(CLI::Range(1, 256));
    app.add_option("--repeat", repeat, "runs (median reported)")->check(CLI::Range(1, 100));
    bool keep = true;
    app.add_flag("--keep,!--no-keep", keep,
                 "tiles stay on the rank that computed them until needed (keep_result; "
                 "default) or travel back to rank 0 after each kernel");
    CLI11_PARSE(app, argc, argv);
    if (n % nb != 0) {
        std::fprintf(stderr, "lu: --n (%d) must be a multiple of --nb (%d)\n", n, nb);
        return 2;
    }
    const int nt = n / nb;
    cascade::apps::blas_set_threads(1);

    cascade::Communicator comm;
    cascade::Threadpool tp(threads, &comm);
    cascade::Futures fx(tp, &comm);
    const int ranks = comm.ranks();

    const cascade::AsyncOptions opts{.keep_result = keep};
    // Kernels. Tiles arrive by value (owned by the call) and the updated tile is returned.
    auto getrf = fx.make_async(
        [nb](Tile& a) {
            std::vector<lapack_int> ipiv(static_cast<std::size_t>(nb));
            const lapack_int info =
                LAPACKE_dgetrf(LAPACK_COL_MAJOR, nb, nb, a.data(), nb, ipiv.data());
            if (info != 0) throw std::runtime_error("getrf: singular tile");
            for (int i = 0; i < nb; ++i)
                if (ipiv[static_cast<std::size_t>(i)] != i + 1)
                    throw std::runtime_error("getrf: pivoting needed (matrix not dominant)");
            return std::move(a);
        },
        "getrf", opts);
    auto trsm_row = fx.make_async(  // A[k][j] = L[k][k]^-1 A[k][j]
        [nb](const Tile& d, Tile& a) {
            cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, nb, nb, 1.0,
                        d.data(), nb, a.data(), nb);
            return std::move(a);
        },
        "trsm_row", opts);
    auto trsm_col = fx.make_async(  // A[i][k] = A[i][k] U[k][k]^-1
        [nb](const Tile& d, Tile& a) {
            cblas_dtrsm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, nb, nb,
                        1.0, d.data(), nb, a.data(), nb);
            return std::move(a);
        },
        "trsm_col", opts);
    auto gemm = fx.make_async(  // A[i][j] -= A[i][k] A[k][j]
        [nb](const Tile& l, const Tile& u, Tile& c) {
            cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, nb, nb, nb, -1.0, l.data(), nb,
                        u.data(), nb, 1.0, c.data(), nb);
            return std::move(c);
        },
        "gemm", opts);

    int failed = 0;
    std::vector<double> runs;
    double residual = 0;
    if (comm.rank() == 0) {
        // A random, diagonally dominant matrix, as tiles.
        std::mt19937_64 gen(7);
        std::uniform_real_distribution<double> dist(-1.0, 1.0);
        std::vector<double> A(static_cast<std::size_t>(n) * n);  // column major
        for (auto& x : A)
            x = dist(gen);
        for (int i = 0; i < n; ++i)
            A[static_cast<std::size_t>(i) * n + i] += 2.0 * n;
        auto tile_of = [&](int ti, int tj) {
            Tile t(static_cast<std::size_t>(nb) * nb);
            for (int c = 0; c < nb; ++c)
                for (int r = 0; r < nb; ++r)
                    t[static_cast<std::size_t>(c) * nb + r] =
                        A[static_cast<std::size_t>(tj * nb + c) * n + ti * nb + r];
            return t;
        };
        auto place = [&](int i, int j) { return (i + j) % ranks; };

        std::vector<cascade::shared_future<Tile>> T;
        for (int r = 0; r < repeat; ++r) {
            T.clear();
            for (int j = 0; j < nt; ++j)  // T[i + j * nt]
                for (int i = 0; i < nt; ++i)
                    T.push_back(cascade::make_ready_future(tile_of(i, j)).share());
            auto at = [&](int i, int j) -> cascade::shared_future<Tile>& {
                return T[static_cast<std::size_t>(i + j * nt)];
            };
            const auto t0 = std::chrono::steady_clock::now();
            for (int k = 0; k < nt; ++k) {
                at(k, k) = cascade::async(place(k, k), getrf, at(k, k)).share();
                for (int j = k + 1; j < nt; ++j)
                    at(k, j) = cascade::async(place(k, j), trsm_row, at(k, k), at(k, j)).share();
                for (int i = k + 1; i < nt; ++i)
                    at(i, k) = cascade::async(place(i, k), trsm_col, at(k, k), at(i, k)).share();
                for (int i = k + 1; i < nt; ++i)
                    for (int j = k + 1; j < nt; ++j)
                        at(i, j) =
                            cascade::async(place(i, j), gemm, at(i, k), at(k, j), at(i, j)).share();
            }
            try {
                cascade::when_all(T).wait();
                for (auto& t : T)
                    (void)t.get();
            } catch (const std::exception& e) {
                std::fprintf(stderr, "lu: FAILED: %s\n", e.what());
                failed = 1;
                break;
            }
            runs.push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        if (!failed) {
            // residual of A x = L (U x) for a random x
            std::vector<double> x(static_cast<std::size_t>(n)), ax(x.size(), 0.0),
                ux(x.size(), 0.0), lux(x.size(), 0.0);
            for (auto& v : x)
                v = dist(gen);
            cblas_dgemv(CblasColMajor, CblasNoTrans, n, n, 1.0, A.data(), n, x.data(), 1, 0.0,
                        ax.data(), 1);
            auto lu_at = [&](int r, int c) {
                const Tile& t = T[static_cast<std::size_t>(r / nb + (c / nb) * nt)].get();
                return t[static_cast<std::size_t>(c % nb) * nb + r % nb];
            };
            for (int r = 0; r < n; ++r) {
                double s = 0;
                for (int c = r; c < n; ++c)
                    s += lu_at(r, c) * x[static_cast<std::size_t>(c)];
                ux[static_cast<std::size_t>(r)] = s;
            }
            for (int r = 0; r < n; ++r) {
                double s = ux[static_cast<std::size_t>(r)];
                for (int c = 0; c < r; ++c)
                    s += lu_at(r, c) * ux[static_cast<std::size_t>(c)];
                lux[static_cast<std::size_t>(r)] = s;
            }
            double num = 0, anorm = 0, xnorm = 0;
            for (int i = 0; i < n; ++i) {
                num +=
                    std::pow(ax[static_cast<std::size_t>(i)] - lux[static_cast<std::size_t>(i)], 2);
                xnorm += std::pow(x[static_cast<std::size_t>(i)], 2);
            }
            for (double v : A)
                anorm += v * v;
            residual = std::sqrt(num) / (std::sqrt(anorm) * std::sqrt(xnorm));
            if (!(residual < 1e-13)) {
                std::fprintf(stderr, "lu: FAILED: residual %.3e\n", residual);
                failed = 1;
            }
        }
        T.clear();
    }
    tp.join();
    if (comm.rank() == 0) {
        const double t = cascade_bench::median(runs);
        std::printf(
            "LU %d x %d, tiles of %d, %d rank(s) x %d thread(s): %.4f s (%.2f GF/s), "
            "residual %.2e, %s\n",
            n, n, nb, ranks, threads, t, 2.0 / 3.0 * n * double(n) * n / t * 1e-9, residual,
            failed ? "FAILED" : "ok");
        cascade_bench::Record()
            .add("app", "lu")
            .add("system", "cascade")
            .add("n", n)
            .add("nb", nb)
            .add("ranks", ranks)
            .add("threads", threads)
            .add("keep", keep ? "yes" : "no")
            .add("seconds", t)
            .add("runs", runs)
            .add("residual", residual)
            .add("ok", failed ? "no" : "yes")
            .print_result();
    }
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any_failed;
}
