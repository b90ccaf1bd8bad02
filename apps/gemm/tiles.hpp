// Tiles of an n x n matrix: Tiling (sizes, ragged last tile), TileSet (the tiles a rank
// stores: one aligned, contiguous column-major buffer per tile, so a tile is one BLAS operand
// and one active-message body) and the deterministic random entries of A and B.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace cascade::apps::gemm {

struct Tiling {
    int n = 0;   // matrix order
    int nb = 0;  // tile size; the last tile row/column is smaller when nb does not divide n
    int nt = 0;  // tiles per row/column

    Tiling(int n_, int nb_) : n(n_), nb(nb_), nt((n_ + nb_ - 1) / nb_) {}
    int size(int i) const noexcept { return i == nt - 1 ? n - (nt - 1) * nb : nb; }
    int first(int i) const noexcept { return i * nb; }
    // Elements of tile (i,j): size(i) rows x size(j) columns, leading dimension size(i).
    std::size_t elements(int i, int j) const noexcept {
        return static_cast<std::size_t>(size(i)) * static_cast<std::size_t>(size(j));
    }
};

// Tiles (i,j) of an nt x nt tiling that one rank stores; the others are null.
class TileSet {
  public:
    explicit TileSet(const Tiling& t) : t_(t), tiles_(static_cast<std::size_t>(t.nt) * t.nt) {}

    // Allocates tile (i,j) (once; a second call returns the same buffer).
    double* allocate(int i, int j);
    double* get(int i, int j) const noexcept { return tiles_[index(i, j)].get(); }
    // Tile (i,j), or null when it is not allocated or (i,j) is outside the tiling (for
    // indices that arrive in messages).
    double* find(int i, int j) const noexcept {
        return i >= 0 && j >= 0 && i < t_.nt && j < t_.nt ? get(i, j) : nullptr;
    }
    std::size_t count() const noexcept { return count_; }

  private:
    struct Free {
        void operator()(double* p) const noexcept;
    };
    std::size_t index(int i, int j) const noexcept {
        return static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * t_.nt;
    }

    Tiling t_;
    std::vector<std::unique_ptr<double[], Free>> tiles_;
    std::size_t count_ = 0;
};

enum class Operand : std::uint64_t { A = 1, B = 2 };

// Entry (row, col) of A or B: uniform in [-1, 1), a function of (seed, operand, row, col)
// only, so any rank can generate any tile (and the check can regenerate whole panels). The
// generator of apps/common/matrix.hpp: the baselines multiply the same matrices.
double random_entry(std::uint64_t seed, Operand m, int row, int col) noexcept;

// Fills tile (i,j) of operand m (column-major, leading dimension t.size(i)).
void fill_tile(const Tiling& t, std::uint64_t seed, Operand m, int i, int j, double* tile);

}  // namespace cascade::apps::gemm
