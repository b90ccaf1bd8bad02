// Where tile (i,j) of a tiled matrix lives.
//   rank:   2D block-cyclic over a pr x pc process grid (ScaLAPACK layout), so every rank
//           owns a share of each panel and of the trailing matrix;
//   thread: within its rank, 2D cyclic over a tr x tc grid of worker threads, on the
//           rank-local tile coordinates, so each worker owns a spread of the rank's tiles.
// Tasks run where the tile they write lives ("owner computes"). On one process pr = pc = 1
// and only the thread part matters.
#pragma once

#include <string>

namespace cascade::apps {

class BlockCyclic {
  public:
    // Near-square grids: pr x pc = n_ranks, tr x tc = n_threads, with pr <= pc, tr >= tc.
    BlockCyclic(int n_ranks, int n_threads) {
        split(n_ranks, pr_, pc_);
        split(n_threads, tc_, tr_);
    }
    // An explicit pr x pc process grid.
    BlockCyclic(int pr, int pc, int n_threads) : pr_(pr), pc_(pc) { split(n_threads, tc_, tr_); }

    int grid_rows() const noexcept { return pr_; }
    int grid_cols() const noexcept { return pc_; }

    int ranks() const noexcept { return pr_ * pc_; }
    int threads() const noexcept { return tr_ * tc_; }

    int rank_of(int i, int j) const noexcept { return (i % pr_) + pr_ * (j % pc_); }
    int thread_of(int i, int j) const noexcept {
        const int li = i / pr_, lj = j / pc_;  // rank-local tile coordinates
        return (li % tr_) * tc_ + (lj % tc_);
    }

    std::string describe() const {
        return "ranks " + std::to_string(pr_) + "x" + std::to_string(pc_) + ", threads " +
               std::to_string(tr_) + "x" + std::to_string(tc_);
    }

  private:
    // n = a * b with a <= b and a as large as possible.
    static void split(int n, int& a, int& b) {
        a = 1;
        for (int d = 1; d * d <= n; ++d)
            if (n % d == 0) a = d;
        b = n / a;
    }

    int pr_ = 1, pc_ = 1, tr_ = 1, tc_ = 1;
};

}  // namespace cascade::apps
