// 2D GEMM (SUMMA-like, TaskTorrent §III-B): A, B and C in 2D block-cyclic layout over a
// P x Q grid. Each rank stores its C tiles as one column-major matrix (its local rows x its
// local columns) and cuts it into blocks of R x C tiles (--block; default: blocks of about
// 2048 x 2048 elements, at least one per worker where there are tiles enough). Task gemm(rb,cb,k),
// C_block (+)= A_(rows,k) B_(k,cols), runs on the owner of the block; the tasks of one block form a
// chain in k (gemm(rb,cb,k) fulfills gemm(rb,cb,k+1)), so no block needs a lock. Each task is one
// dgemm on the whole block: OpenBLAS packs its operands once per call, so a large block
// runs its kernels at the rate of a whole-matrix call, where one call per tile pays the
// packing and the C traffic again for every tile.
//
// For that one call the operands of a block must be contiguous: per k, this rank keeps an A
// panel (the A tiles of its rows, each stored transposed, side by side: A^T of its rows) and
// a B panel (the B tiles of its columns, column-major, side by side). Every tile is still one
// contiguous piece of its panel, so it travels as one large active message, straight into
// its place: the owner of A_ik sends it once to each rank of its grid row that owns C tiles
// in row i, the owner of B_kj once to each rank of its grid column owning C tiles in column
// j; on arrival, the receiver fulfills the promises of the tasks that read the tile. Tiles
// are sent in k order through a SendWindow and tasks run k-major, so each rank consumes
// tiles in the order they arrive.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "distribution.hpp"
#include "gemm_algorithm.hpp"
#include "send_window.hpp"

namespace cascade::apps::gemm {

// C tiles per task of the 2D variant: rows x cols; 0 in both: automatic (see above).
struct BlockShape {
    int rows = 0, cols = 0;
    bool automatic() const noexcept { return rows == 0 || cols == 0; }
};

class Gemm2D final : public GemmAlgorithm {
  public:
    // Allocates and fills this rank's tiles of A and B (from `seed`), the panels for the
    // tiles it will receive, and registers the active messages (collective: every rank).
    // At most `send_window` tiles are in flight to one peer (0: no limit; see SendWindow).
    // trees: a tile goes to its row (A) or column (B) of the grid as one broadcast tree, at
    // most `send_window` trees in flight from this rank; otherwise once to each peer.
    // threads: workers per rank, for the automatic block shape.
    Gemm2D(cascade::Communicator& comm, const Tiling& t, Grid2D grid, std::uint64_t seed,
           int send_window, bool trees, BlockShape block, int threads);

    std::string describe() const override;
    void begin_run(cascade::Threadpool& tp, BlasClock& clock) override;
    void start() override;
    void end_run() override;
    std::uint64_t local_tasks() const override;
    CTile c_tile(int i, int j) const override;

  private:
    using Key = std::array<int, 3>;                                 // (rb, cb, k)
    using TileAm = cascade::LargeActiveMsg<double, int, int, int>;  // tile (i,j), destination
    struct Free {
        void operator()(double* p) const noexcept;
    };
    using Buffer = std::unique_ptr<double[], Free>;
    static Buffer allocate(std::size_t elements);

    void run_gemm(const Key& key);
    // Tile A_ik / B_kj is here (received or local): fulfill the local tasks reading it.
    void a_ready(int i, int k);
    void b_ready(int k, int j);
    // A^T_ik (size(k) x size(i)) / B_kj (size(k) x size(j)) in its panel, or null when this
    // rank does not hold it (also for indices outside the tiling, from messages).
    double* a_tile(int i, int k) const noexcept;
    double* b_tile(int k, int j) const noexcept;

    Tiling t_;
    Grid2D grid_;
    int me_, p_, q_;
    std::vector<int> rows_, cols_;  // tile rows i with i % P == p, columns j with j % Q == q
    // Element offset of local row i / column j in the local C matrix (indexed by i / P, j / Q).
    std::vector<std::size_t> row_off_, col_off_;
    std::size_t local_m_ = 0, local_n_ = 0;  // local C: local_m_ x local_n_
    std::size_t ldc_ = 0;                    // its leading dimension (>= local_m_)
    int block_rows_ = 1, block_cols_ = 1;    // tiles per block
    int row_blocks_ = 0, col_blocks_ = 0;
    // Ranks of this grid row / column that own C tiles (they need our A / B tiles).
    std::vector<int> row_peers_, col_peers_;
    std::vector<Buffer> a_panel_, b_panel_;  // per k: A^T of the local rows, B of the local columns
    Buffer c_;
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
