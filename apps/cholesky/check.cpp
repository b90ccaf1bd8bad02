#include "check.hpp"

#include <cmath>
#include <cstring>
#include <vector>

#include "../common/blas.hpp"

namespace cascade::apps {

namespace {

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

}  // namespace

double distributed_residual(const TileMatrix& l, const BlockCyclic& dist, std::uint64_t seed,
                            MPI_Comm comm, int blas_threads) {
    int me = 0;
    MPI_Comm_rank(comm, &me);
    const TileLayout& layout = l.layout();
    const BlockCyclic one(1, 1, 1);

    // Every tile goes to rank 0 in one global order, so plain blocking sends match.
    TileMatrix whole(me == 0 ? layout : TileLayout(1, 1), one, me == 0 ? 0 : 1);
    for (int j = 0; j < layout.nt; ++j) {
        for (int i = j; i < layout.nt; ++i) {
            const int owner = dist.rank_of(i, j);
            const int count = layout.rows(i) * layout.rows(j);
            if (me == 0 && owner == 0) {
                std::memcpy(whole.tile(i, j), l.tile(i, j), sizeof(double) * count);
            } else if (me == 0) {
                MPI_Recv(whole.tile(i, j), count, MPI_DOUBLE, owner, 0, comm, MPI_STATUS_IGNORE);
            } else if (me == owner) {
                MPI_Send(l.tile(i, j), count, MPI_DOUBLE, 0, 0, comm);
            }
        }
    }
    if (me != 0) return -1;

    std::vector<double> factor = whole.to_dense_lower();
    whole.fill_random_spd(seed);  // the input, regenerated
    std::vector<double> a = whole.to_dense_lower();
    const int n = layout.n;
    const double norm_a = frobenius_sym_lower(a, n);
    blas_set_threads(blas_threads);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, n, n, -1.0, factor.data(), n, 1.0,
                a.data(), n);
    blas_set_threads(1);
    return frobenius_sym_lower(a, n) / norm_a;
}

}  // namespace cascade::apps
