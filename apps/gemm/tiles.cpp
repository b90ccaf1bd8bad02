#include "tiles.hpp"

#include <cstdlib>
#include <new>

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

namespace {
std::uint64_t mix64(std::uint64_t x) noexcept {  // splitmix64 finalizer
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}
}  // namespace

double random_entry(std::uint64_t seed, Operand m, int row, int col) noexcept {
    const std::uint64_t key = (static_cast<std::uint64_t>(m) << 62) ^
                              (static_cast<std::uint64_t>(static_cast<std::uint32_t>(row)) << 31) ^
                              static_cast<std::uint32_t>(col);
    const std::uint64_t h = mix64(seed * 0x9e3779b97f4a7c15ULL ^ mix64(key));
    return static_cast<double>(h >> 11) * 0x1p-52 - 1.0;  // 53 random bits -> [-1, 1)
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
