// 3D GEMM, the DNS algorithm (TaskTorrent §III-B) on a P x P x P cube of ranks (p,q,r).
// A, B and C tiles (i,j) live on the r = 0 plane at (i % P, j % P, 0). The owner of A_ik
// sends it to the P ranks (i % P, *, k % P), the owner of B_kj to the P ranks
// (*, j % P, k % P) (large active messages; a copy to itself is a local fulfill). Rank
// (p,q,r) computes the partial product C_ij^(r) = sum over k % P == r of A_ik B_kj, one chain
// of tasks gemm(i,j,k) per tile (k = r, r + P, ...), into C_ij itself on the plane r = 0 and
// into a partial tile elsewhere. Partial tiles are then reduced along r: each is sent to the
// owner of C_ij, where the task accumulate(i,j) adds them once all have arrived.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "distribution.hpp"
#include "gemm_algorithm.hpp"
#include "send_window.hpp"

namespace cascade::apps::gemm {

class GemmDNS final : public GemmAlgorithm {
  public:
    // Allocates and fills this rank's tiles of A and B (r = 0 plane only), the buffers for
    // received operands and partial products, and registers the active messages (collective).
    // At most `send_window` tiles are in flight to one peer (0: no limit; see SendWindow).
    GemmDNS(cascade::Communicator& comm, const Tiling& t, Cube cube, std::uint64_t seed,
            int send_window);

    std::string describe() const override;
    void begin_run(cascade::Threadpool& tp, BlasClock& clock) override;
    void start() override;
    void end_run() override;
    std::uint64_t local_tasks() const override;
    CTile c_tile(int i, int j) const override { return {c_.get(i, j), t_.size(i)}; }

  private:
    using GemmKey = std::array<int, 3>;                                // (i, j, k)
    using TileKey = std::array<int, 2>;                                // (i, j)
    using TileAm = cascade::LargeActiveMsg<double, int, int, int>;     // (i, j, destination)
    using PartialAm = cascade::LargeActiveMsg<double, int, int, int>;  // (i, j, layer r)

    void run_gemm(const GemmKey& ijk);
    void run_accumulate(const TileKey& ij);
    void a_ready(int i, int k);
    void b_ready(int k, int j);
    double* partial_buffer(int i, int j, int r) const noexcept;
    std::size_t at(int i, int j) const noexcept {
        return static_cast<std::size_t>(i) + static_cast<std::size_t>(j) * t_.nt;
    }

    Tiling t_;
    Cube cube_;
    int me_, p_, q_, r_;
    int layers_;                         // ranks along r with products: min(P, nt)
    std::vector<int> rows_, cols_, ks_;  // i % P == p, j % P == q, k % P == r
    TileSet a_own_, b_own_, c_;          // owned tiles (r = 0 plane)
    TileSet a_in_, b_in_;                // received operands
    TileSet partial_;                    // r > 0: this rank's partial C tiles
    std::vector<TileSet> reduce_in_;     // r = 0: partial tiles from layer r (index r - 1)
    std::vector<const double*> a_, b_;   // operands A_ik at(i,k), B_kj at(k,j)
    TileAm* a_am_ = nullptr;
    TileAm* b_am_ = nullptr;
    PartialAm* partial_am_ = nullptr;
    SendWindow window_;

    // This run's graph.
    cascade::Threadpool* tp_ = nullptr;
    BlasClock* clock_ = nullptr;
    std::unique_ptr<cascade::Taskflow<GemmKey>> gemm_;
    std::unique_ptr<cascade::Taskflow<TileKey>> accumulate_;
};

}  // namespace cascade::apps::gemm
