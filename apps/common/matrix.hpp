// The seeded test matrices, one generator for Cascade's apps and for the ScaLAPACK, StarPU
// and OpenBLAS baselines, so that every system factors and multiplies the same numbers.
// Each entry is a pure function of (seed, row, column): any rank generates its own tiles, and
// a check regenerates the input instead of keeping a copy.
#pragma once

#include <algorithm>
#include <cstdint>

namespace cascade_bench {

inline std::uint64_t splitmix64(std::uint64_t x) noexcept {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Uniform in [-1, 1) (53 random bits), a pure function of (seed, row, col).
inline double uniform_entry(std::uint64_t seed, std::uint64_t row, std::uint64_t col) noexcept {
    const std::uint64_t h = splitmix64(splitmix64(seed) ^ (row << 32 | col));
    return static_cast<double>(h >> 11) * 0x1.0p-52 - 1.0;
}

// The SPD test matrix of order n: a_ij = a_ji uniform in [-1, 1), a_ii = n + uniform
// (diagonally dominant, so positive definite).
inline double spd_entry(std::uint64_t seed, int n, int i, int j) noexcept {
    const int hi = std::max(i, j), lo = std::min(i, j);
    const double v =
        uniform_entry(seed, static_cast<std::uint64_t>(hi), static_cast<std::uint64_t>(lo));
    return i == j ? v + n : v;
}

// GEMM operands A and B (independent uniform entries) and the random vector x of checks.
constexpr std::uint64_t kSeedB = 0x5bd1e995, kSeedX = 0x27d4eb2f;
inline double gemm_a(std::uint64_t seed, int i, int j) noexcept {
    return uniform_entry(seed, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(j));
}
inline double gemm_b(std::uint64_t seed, int i, int j) noexcept {
    return uniform_entry(seed ^ kSeedB, static_cast<std::uint64_t>(i),
                         static_cast<std::uint64_t>(j));
}
inline double check_x(std::uint64_t seed, int i) noexcept {
    return uniform_entry(seed ^ kSeedX, static_cast<std::uint64_t>(i), 0);
}

}  // namespace cascade_bench
