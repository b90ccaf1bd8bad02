#include "tile_matrix.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include "common/matrix.hpp"

namespace cascade::apps {

void TileMatrix::FreeDeleter::operator()(double* p) const noexcept {
    std::free(p);
}

TileMatrix::TileMatrix(TileLayout layout, const BlockCyclic& dist, int rank)
    : layout_(layout),
      tiles_(static_cast<std::size_t>(layout.nt) * (layout.nt + 1) / 2),
      copies_(tiles_.size()) {
    for (int j = 0; j < layout_.nt; ++j)
        for (int i = j; i < layout_.nt; ++i)
            if (dist.rank_of(i, j) == rank) tiles_[index(i, j)] = allocate(i, j, local_bytes_);
}

TileMatrix::TilePtr TileMatrix::allocate(int i, int j, std::size_t& counter) {
    // 64-byte aligned so BLAS kernels start on a cache line.
    const std::size_t bytes =
        static_cast<std::size_t>(layout_.rows(i)) * layout_.rows(j) * sizeof(double);
    const std::size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, rounded);  // touch the pages now, not during the factorization
    counter += rounded;
    return TilePtr(static_cast<double*>(p));
}

double* TileMatrix::allocate_copy(int i, int j) {
    TilePtr& c = copies_[index(i, j)];
    if (!c) c = allocate(i, j, copy_bytes_);
    return c.get();
}

void TileMatrix::fill_random_spd(std::uint64_t seed) {
    const int nt = layout_.nt;
    for (int j = 0; j < nt; ++j) {
        for (int i = j; i < nt; ++i) {
            double* t = tile(i, j);
            if (!t) continue;
            const int m = layout_.rows(i), n = layout_.rows(j), ld = this->ld(i);
            const int r0 = layout_.first_row(i), c0 = layout_.first_row(j);
            for (int c = 0; c < n; ++c) {
                for (int r = 0; r < m; ++r) {
                    t[r + static_cast<std::size_t>(c) * ld] =
                        cascade_bench::spd_entry(seed, layout_.n, r0 + r, c0 + c);
                }
            }
        }
    }
}

std::vector<double> TileMatrix::to_dense_lower() const {
    const std::size_t n = static_cast<std::size_t>(layout_.n);
    std::vector<double> dense(n * n, 0.0);
    const int nt = layout_.nt;
    for (int j = 0; j < nt; ++j) {
        for (int i = j; i < nt; ++i) {
            const double* t = tile(i, j);
            if (!t) continue;
            const int m = layout_.rows(i), w = layout_.rows(j), ld = this->ld(i);
            const std::size_t r0 = layout_.first_row(i), c0 = layout_.first_row(j);
            for (int c = 0; c < w; ++c) {
                // Diagonal tiles: keep only their lower triangle (the upper part is stale).
                const int r_begin = i == j ? c : 0;
                for (int r = r_begin; r < m; ++r)
                    dense[(r0 + r) + (c0 + c) * n] = t[r + static_cast<std::size_t>(c) * ld];
            }
        }
    }
    return dense;
}

}  // namespace cascade::apps
