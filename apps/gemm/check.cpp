#include "check.hpp"

#include <cmath>
#include <map>
#include <vector>

#include "../common/blas.hpp"

namespace cascade::apps::gemm {

double relative_error(MPI_Comm comm, const Tiling& t, std::uint64_t seed, const GemmAlgorithm& alg,
                      int blas_threads) {
    const std::size_t n = static_cast<std::size_t>(t.n);
    // Row panels of A (size(i) x n) and column panels of B (n x size(j)) for the local tiles.
    std::map<int, std::vector<double>> a_rows, b_cols;
    for (int j = 0; j < t.nt; ++j)
        for (int i = 0; i < t.nt; ++i) {
            if (!alg.c_tile(i, j).data) continue;
            if (!a_rows.count(i)) {
                const std::size_t m = static_cast<std::size_t>(t.size(i));
                std::vector<double>& a = a_rows[i];
                a.resize(m * n);
                for (std::size_t c = 0; c < n; ++c)
                    for (std::size_t r = 0; r < m; ++r)
                        a[r + c * m] =
                            random_entry(seed, Operand::A, t.first(i) + static_cast<int>(r),
                                         static_cast<int>(c));
            }
            if (!b_cols.count(j)) {
                const std::size_t w = static_cast<std::size_t>(t.size(j));
                std::vector<double>& b = b_cols[j];
                b.resize(n * w);
                for (std::size_t c = 0; c < w; ++c)
                    for (std::size_t r = 0; r < n; ++r)
                        b[r + c * n] = random_entry(seed, Operand::B, static_cast<int>(r),
                                                    t.first(j) + static_cast<int>(c));
            }
        }

    blas_set_threads(blas_threads);
    double sums[2] = {0, 0};  // ||C - C_ref||^2, ||C_ref||^2
    std::vector<double> ref;
    for (int j = 0; j < t.nt; ++j)
        for (int i = 0; i < t.nt; ++i) {
            const auto [c, ld] = alg.c_tile(i, j);
            if (!c) continue;
            const int m = t.size(i), w = t.size(j);
            ref.assign(t.elements(i, j), 0.0);
            cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, w, t.n, 1.0, a_rows[i].data(),
                        m, b_cols[j].data(), t.n, 0.0, ref.data(), m);
            for (int col = 0; col < w; ++col)
                for (int row = 0; row < m; ++row) {
                    const std::size_t e = static_cast<std::size_t>(row) +
                                          static_cast<std::size_t>(col) * static_cast<unsigned>(m);
                    const double d = c[row + static_cast<std::size_t>(col) * ld] - ref[e];
                    sums[0] += d * d;
                    sums[1] += ref[e] * ref[e];
                }
        }
    blas_set_threads(1);

    double total[2] = {0, 0};
    MPI_Allreduce(sums, total, 2, MPI_DOUBLE, MPI_SUM, comm);
    return total[1] > 0 ? std::sqrt(total[0] / total[1]) : std::sqrt(total[0]);
}

}  // namespace cascade::apps::gemm
