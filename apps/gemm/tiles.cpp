#include "tiles.hpp"

#include <cstdlib>
#include <new>

#include "common/matrix.hpp"

namespace cascade::apps::gemm {

void TileSet::Free::operator()(double* p) const noexcept {
    std::free(p);
}

double* TileSet::allocate(int i, int j) {
    auto& slot = tiles_[index(i, j)];
    if (!slot) {
        // 64-byte aligned (a cache line, an AVX-512 vector); aligned_alloc wants a multiple.
        const std::size_t bytes = (t_.elements(i, j) * sizeof(double) + 63) & ~std::size_t(63);
        auto* p = static_cast<double*>(std::aligned_alloc(64, bytes));
        if (!p) throw std::bad_alloc();
        slot.reset(p);
        ++count_;
    }
    return slot.get();
}

double random_entry(std::uint64_t seed, Operand m, int row, int col) noexcept {
    return m == Operand::A ? cascade_bench::gemm_a(seed, row, col)
                           : cascade_bench::gemm_b(seed, row, col);
}

void fill_tile(const Tiling& t, std::uint64_t seed, Operand m, int i, int j, double* tile) {
    const int rows = t.size(i), cols = t.size(j);
    const int r0 = t.first(i), c0 = t.first(j);
    for (int c = 0; c < cols; ++c)
        for (int r = 0; r < rows; ++r)
            tile[static_cast<std::size_t>(r) + static_cast<std::size_t>(c) * rows] =
                random_entry(seed, m, r0 + r, c0 + c);
}

}  // namespace cascade::apps::gemm
