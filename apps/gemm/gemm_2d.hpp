// 2D GEMM (SUMMA-like, TaskTorrent §III-B): A, B and C in 2D block-cyclic layout over a
// P x Q grid. Task gemm(i,j,k), C_ij (+)= A_ik B_kj, runs on the owner of C_ij; the tasks of
// one C tile form a chain in k (gemm(i,j,k) fulfills gemm(i,j,k+1)), so no tile needs a
// lock. The owner of A_ik sends it once to each rank of its grid row that owns C tiles in
// row i, the owner of B_kj once to each rank of its grid column owning C tiles in column j
// (large active messages, straight into buffers allocated once per job); on arrival, the
// receiver fulfills the promises of all its gemm tasks that read the tile. Tiles are sent in
// k order through a SendWindow and tasks run k-major, so each rank consumes tiles in the
// order they arrive.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "distribution.hpp"
#include "gemm_algorithm.hpp"
#include "send_window.hpp"

namespace cascade::apps::gemm {

class Gemm2D final : public GemmAlgorithm {
  public:
    // Allocates and fills this rank's tiles of A and B (from `seed`), the buffers for the
    // tiles it will receive, and registers the active messages (collective: every rank).
    // At most `send_window` tiles are in flight to one peer (0: no limit; see SendWindow).
    // trees: a tile goes to its row (A) or column (B) of the grid as one broadcast tree, at
    // most `send_window` trees in flight from this rank; otherwise once to each peer.
    Gemm2D(cascade::Communicator& comm, const Tiling& t, Grid2D grid, std::uint64_t seed,
           int send_window, bool trees = true);

    std::string describe() const override;
    void begin_run(cascade::Threadpool& tp, BlasClock& clock) override;
    void start() override;
    void end_run() override;
    std::uint64_t local_tasks() const override;
    const double* c_tile(int i, int j) const override { return c_.get(i, j); }

  private:
    using Key = std::array<int, 3>;                                 // (i, j, k)
    using TileAm = cascade::LargeActiveMsg<double, int, int, int>;  // tile (i,j), destination

    void run_gemm(const Key& ijk);
    // Tile A_ik / B_kj is here (received or local): fulfill the local gemm tasks reading it.
    void a_ready(int i, int k);
    void b_ready(int k, int j);
    std::size_t at(int i, int j) const noexcept {
        return static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * t_.nt;
    }

    Tiling t_;
    Grid2D grid_;
    int me_, p_, q_;
    std::vector<int> rows_, cols_;  // tile rows i with i % P == p, columns j with j % Q == q
    // Ranks of this grid row / column that own C tiles (they need our A / B tiles).
    std::vector<int> row_peers_, col_peers_;
    TileSet a_own_, b_own_, c_;         // tiles this rank owns
    TileSet a_in_, b_in_;               // tiles it receives (allocated once, reused by every run)
    std::vector<const double*> a_, b_;  // A_ik / B_kj for local rows / columns, at(i,k) / at(k,j)
    TileAm* a_am_ = nullptr;
    TileAm* b_am_ = nullptr;
    SendWindow window_;
    bool trees_ = true;

    // This run's graph.
    cascade::Threadpool* tp_ = nullptr;
    BlasClock* clock_ = nullptr;
    std::unique_ptr<cascade::Taskflow<Key>> gemm_;
};

}  // namespace cascade::apps::gemm
