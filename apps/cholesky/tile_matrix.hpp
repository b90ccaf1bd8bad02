// Tiled storage of the lower triangle of a symmetric n x n matrix.
// Tile (i,j), i >= j, is one contiguous column-major buffer of rows(i) x rows(j) doubles with
// leading dimension rows(i): a kernel gets it as a plain pointer, and the distributed version
// can ship it to another rank as one message body. Only tiles owned by `rank` are allocated,
// plus, on demand, one read-only copy of each remote tile this rank's tasks read (a factor
// tile received from its owner). The last tile row/column is ragged when nb does not divide n.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "distribution.hpp"

namespace cascade::apps {

struct TileLayout {
    int n = 0;   // matrix order
    int nb = 0;  // tile size (the last tile may be smaller)
    int nt = 0;  // tiles per row/column

    TileLayout(int n_, int nb_) : n(n_), nb(nb_), nt((n_ + nb_ - 1) / nb_) {}
    int rows(int i) const noexcept { return i == nt - 1 ? n - (nt - 1) * nb : nb; }
    int first_row(int i) const noexcept { return i * nb; }
};

class TileMatrix {
  public:
    TileMatrix(TileLayout layout, const BlockCyclic& dist, int rank);

    const TileLayout& layout() const noexcept { return layout_; }
    bool is_local(int i, int j) const noexcept { return tile(i, j) != nullptr; }
    // Tile (i,j), i >= j, or nullptr when another rank owns it.
    double* tile(int i, int j) noexcept { return tiles_[index(i, j)].get(); }
    const double* tile(int i, int j) const noexcept { return tiles_[index(i, j)].get(); }
    int ld(int i) const noexcept { return layout_.rows(i); }

    // Storage for a copy of remote tile (i,j), allocated (and touched) now, so that a
    // received tile lands in warm memory and nothing is allocated while factoring.
    double* allocate_copy(int i, int j);
    double* copy(int i, int j) noexcept { return copies_[index(i, j)].get(); }
    // Tile (i,j) to read: the local tile, else the received copy (nullptr if neither).
    const double* read(int i, int j) const noexcept {
        const double* t = tile(i, j);
        return t ? t : copies_[index(i, j)].get();
    }
    // Bytes of local tiles and of copies.
    std::size_t local_bytes() const noexcept { return local_bytes_; }
    std::size_t copy_bytes() const noexcept { return copy_bytes_; }

    // Fills the local tiles with a random symmetric, strictly diagonally dominant (hence
    // SPD) matrix: a_ij = a_ji uniform in [-1, 1), a_ii = n + uniform. Each entry depends
    // only on (seed, i, j), so every rank can generate its own tiles independently. The
    // generator of apps/common/matrix.hpp: the baselines factor the same matrix.
    void fill_random_spd(std::uint64_t seed);

    // The local tiles as a dense n x n column-major lower triangle (upper part zero).
    // One process only: used by the residual check.
    std::vector<double> to_dense_lower() const;

  private:
    std::size_t index(int i, int j) const noexcept {
        return static_cast<std::size_t>(i) * (i + 1) / 2 + j;
    }

    struct FreeDeleter {
        void operator()(double* p) const noexcept;
    };

    using TilePtr = std::unique_ptr<double[], FreeDeleter>;
    TilePtr allocate(int i, int j, std::size_t& counter);

    TileLayout layout_;
    std::vector<TilePtr> tiles_;   // packed lower triangle: owned tiles
    std::vector<TilePtr> copies_;  // packed lower triangle: copies of remote tiles
    std::size_t local_bytes_ = 0, copy_bytes_ = 0;
};

}  // namespace cascade::apps
