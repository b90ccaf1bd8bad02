// The task graph of right-looking tiled Cholesky (TaskTorrent paper, Algorithm 1 and Fig. 8)
// as three Cascade taskflows, distributed over the ranks of a 2D block-cyclic grid:
//   potrf(k)        L_kk = chol(A_kk)
//   trsm(i,k)       L_ik = A_ik L_kk^-T                       k < i
//   update(i,j,k)   A_ij = A_ij - L_ik L_jk^T  (syrk if i==j)  k < j <= i
// Every task runs on the rank owning the tile it writes ("owner computes"), on the worker
// BlockCyclic::thread_of assigns (idle workers may steal it). The updates of one tile are
// chained in k (update(i,j,k) waits for update(i,j,k-1)), so every task is the only one
// touching the tile it writes and no tile needs a lock.
// In-degrees: potrf(k) 1 (update(k,k,k-1), or the driver for k = 0); trsm(i,k) potrf(k) +
// update(i,k,k-1); update(i,j,k) trsm(i,k) + trsm(j,k) (one trsm when i == j) + update(i,j,k-1).
//
// Communication: when a factor tile is final (L_kk after potrf(k), L_ik after trsm(i,k)), its
// owner sends it once to every other rank that runs a task reading it, in one large active
// message straight into that rank's preallocated copy of the tile; the handler there
// fulfills the promises of all its tasks that read the tile. The sends to the readers are a
// loop in the task: the Communicator's broadcast detection turns it into one tree (unless
// detection is off). So a tile crosses to a rank at
// most once, whatever the number of tasks there that use it. Priorities follow the critical
// path (priorities.hpp) and are a function of the key, so every rank computes its own.
#pragma once

#include <atomic>
#include <string>
#include <tuple>
#include <vector>

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

    // Registers the graph's active messages on `comm` (every rank must build its graph in
    // the same order) and allocates the copies of the remote tiles this rank will read.
    // fake_gflops > 0: kernels sleep flops / fake_gflops instead of computing (the factor is
    // then meaningless), so that many ranks on few cores stand for one core each.
    CholeskyGraph(Threadpool& tp, Communicator& comm, TileMatrix& a, const BlockCyclic& dist,
                  KernelClock& clock, PriorityKind priorities, double fake_gflops = 0);

    // Releases the first task (on the owner of tile (0,0)); the factorization is done on
    // every rank when tp.join() returns.
    void start() {
        if (dist_.rank_of(0, 0) == me_) potrf_.fulfill_promise(0);
    }

    // Tasks in the graph for nt tiles: nt potrf, nt(nt-1)/2 trsm, (nt-1)nt(nt+1)/6 updates.
    static long long task_count(int nt) {
        const long long t = nt;
        return t + t * (t - 1) / 2 + (t - 1) * t * (t + 1) / 6;
    }
    // Tasks this rank runs: one per update of each of its tiles, plus its potrf or trsm.
    long long local_task_count() const;
    // Tiles this rank sent to other ranks (each at most once per destination).
    long long tiles_sent() const { return tiles_sent_; }
    // Of those, the ones that went to a tile read by two ranks or more: the sends the
    // Communicator's broadcast detection can merge into trees.
    long long multi_reader_sends() const { return multi_reader_sends_; }

  private:
    // What the owner of a final factor tile does: send it to the ranks that read it, then
    // release the local tasks that read it. The message handlers do the second half only.
    void potrf_done(int k);
    void trsm_done(int i, int k);
    void release_trsm(int k);            // trsm(i,k) of local tiles (i,k), i > k
    void release_updates(int i, int k);  // local updates reading L_ik
    template <class F>
    void kernel(Kernel k, double flops, F&& f);

    // The ranks whose tasks read L_ik (i >= k), from the layout alone.
    std::vector<int> readers(int i, int k) const;
    std::size_t index(int i, int k) const { return static_cast<std::size_t>(i) * (i + 1) / 2 + k; }
    bool local(int i, int j) const { return dist_.rank_of(i, j) == me_; }
    int thread_of(int i, int j) const { return dist_.thread_of(i, j) % tp_.workers(); }
    std::size_t tile_size(int i, int j) const {
        return static_cast<std::size_t>(a_.layout().rows(i)) * a_.layout().rows(j);
    }

    Threadpool& tp_;
    TileMatrix& a_;
    const BlockCyclic& dist_;
    KernelClock& clock_;
    const int me_;
    std::vector<std::vector<int>> readers_;  // per local final tile (i,k): remote readers
    std::atomic<long long> tiles_sent_{0};
    std::atomic<long long> multi_reader_sends_{0};
    double fake_gflops_ = 0;
    Taskflow<int> potrf_;
    Taskflow<Key2> trsm_;
    Taskflow<Key3> update_;
    LargeActiveMsg<double, int>* send_diag_ = nullptr;        // L_kk, k
    LargeActiveMsg<double, int, int>* send_panel_ = nullptr;  // L_ik, i, k
};

}  // namespace cascade::apps
