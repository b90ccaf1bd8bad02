// The task graph of right-looking tiled Cholesky (TaskTorrent paper, Algorithm 1 and Fig. 8)
// as three Cascade taskflows:
//   potrf(k)        L_kk = chol(A_kk)
//   trsm(i,k)       L_ik = A_ik L_kk^-T                       k < i
//   update(i,j,k)   A_ij = A_ij - L_ik L_jk^T  (syrk if i==j)  k < j <= i
// The updates of one tile are chained in k (update(i,j,k) waits for update(i,j,k-1)), so
// every task is the only one touching the tile it writes and no tile needs a lock.
// In-degrees: potrf(k) 1 (update(k,k,k-1), or the driver for k = 0); trsm(i,k) potrf(k) +
// update(i,k,k-1); update(i,j,k) trsm(i,k) + trsm(j,k) (one trsm when i == j) + update(i,j,k-1).
// Each task runs on the worker owning the tile it writes (BlockCyclic::thread_of) and may be
// stolen by idle workers; priorities follow the critical path (priorities.hpp).
//
// Going distributed: every out-edge goes through the notify_* functions below. Today they
// fulfill local promises; with several ranks, a successor owned by another rank gets the
// tile (L_kk or L_ik) in one large active message whose handler fulfills the promise there.
#pragma once

#include <string>
#include <tuple>

#include "cascade/cascade.hpp"
#include "distribution.hpp"
#include "kernels.hpp"
#include "tile_matrix.hpp"

namespace cascade::apps {

enum class PriorityKind { critical_path, none };

class CholeskyGraph {
  public:
    using Key2 = std::tuple<int, int>;       // trsm (i, k)
    using Key3 = std::tuple<int, int, int>;  // update (i, j, k)

    CholeskyGraph(Threadpool& tp, TileMatrix& a, const BlockCyclic& dist, KernelClock& clock,
                  PriorityKind priorities);

    // Releases the first task; the factorization is done when tp.join() returns.
    void start() { potrf_.fulfill_promise(0); }

    // Tasks in the graph for nt tiles: nt potrf, nt(nt-1)/2 trsm, (nt-1)nt(nt+1)/6 updates.
    static long long task_count(int nt) {
        const long long t = nt;
        return t + t * (t - 1) / 2 + (t - 1) * t * (t + 1) / 6;
    }

  private:
    void notify_trsm(int i, int k) { trsm_.fulfill_promise({i, k}); }
    void notify_update(int i, int j, int k) { update_.fulfill_promise({i, j, k}); }
    void notify_potrf(int k) { potrf_.fulfill_promise(k); }

    int thread_of(int i, int j) const { return dist_.thread_of(i, j) % tp_.size(); }

    Threadpool& tp_;
    TileMatrix& a_;
    const BlockCyclic& dist_;
    KernelClock& clock_;
    Taskflow<int> potrf_;
    Taskflow<Key2> trsm_;
    Taskflow<Key3> update_;
};

}  // namespace cascade::apps
