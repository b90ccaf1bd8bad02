#include "cholesky_graph.hpp"

#include "priorities.hpp"

namespace cascade::apps {

namespace prio = cholesky_priority;

CholeskyGraph::CholeskyGraph(Threadpool& tp, TileMatrix& a, const BlockCyclic& dist,
                             KernelClock& clock, PriorityKind priorities)
    : tp_(tp),
      a_(a),
      dist_(dist),
      clock_(clock),
      potrf_(&tp, "potrf"),
      trsm_(&tp, "trsm"),
      update_(&tp, "update") {
    const TileLayout& L = a_.layout();
    const int nt = L.nt;
    const bool use_prio = priorities == PriorityKind::critical_path;

    // ---- potrf(k): factor the diagonal tile, then release the panel's trsm(i,k) ----
    potrf_
        .set_task([this, &L](int k) {
            clock_.time(tp_.current_thread(), Kernel::potrf,
                        [&] { potrf_tile(L.rows(k), a_.tile(k, k), a_.ld(k)); });
        })
        .set_fulfill([this, nt](int k) {
            for (int i = k + 1; i < nt; ++i)
                notify_trsm(i, k);
        })
        .set_indegree([](int) { return 1; })
        .set_mapping([this](int k) { return thread_of(k, k); })
        .set_priority([nt, use_prio](int k) { return use_prio ? prio::potrf(nt, k) : 0.0; })
        .set_name([](int k) { return "potrf(" + std::to_string(k) + ")"; });

    // ---- trsm(i,k): L_ik = A_ik L_kk^-T, then release the updates that read L_ik ----
    trsm_
        .set_task([this, &L](Key2 key) {
            const auto [i, k] = key;
            clock_.time(tp_.current_thread(), Kernel::trsm, [&] {
                trsm_tile(L.rows(i), L.rows(k), a_.tile(k, k), a_.ld(k), a_.tile(i, k), a_.ld(i));
            });
        })
        .set_fulfill([this, nt](Key2 key) {
            const auto [i, k] = key;
            for (int j = k + 1; j <= i; ++j)
                notify_update(i, j, k);  // L_ik as left factor
            for (int r = i + 1; r < nt; ++r)
                notify_update(r, i, k);  // L_ik as right factor
        })
        .set_indegree([](Key2 key) { return std::get<1>(key) == 0 ? 1 : 2; })
        .set_mapping([this](Key2 key) { return thread_of(std::get<0>(key), std::get<1>(key)); })
        .set_priority([nt, use_prio](Key2 key) {
            const auto [i, k] = key;
            return use_prio ? prio::trsm(nt, i, k) + prio::tie_break(nt, i, k) : 0.0;
        })
        .set_name([](Key2 key) {
            return "trsm(" + std::to_string(std::get<0>(key)) + "," +
                   std::to_string(std::get<1>(key)) + ")";
        });

    // ---- update(i,j,k): A_ij -= L_ik L_jk^T, then the next update of A_ij, or its panel ----
    update_
        .set_task([this, &L](Key3 key) {
            const auto [i, j, k] = key;
            if (i == j) {
                clock_.time(tp_.current_thread(), Kernel::syrk, [&] {
                    syrk_tile(L.rows(i), L.rows(k), a_.tile(i, k), a_.ld(i), a_.tile(i, i),
                              a_.ld(i));
                });
            } else {
                clock_.time(tp_.current_thread(), Kernel::gemm, [&] {
                    gemm_tile(L.rows(i), L.rows(j), L.rows(k), a_.tile(i, k), a_.ld(i),
                              a_.tile(j, k), a_.ld(j), a_.tile(i, j), a_.ld(i));
                });
            }
        })
        .set_fulfill([this](Key3 key) {
            const auto [i, j, k] = key;
            if (k + 1 < j)
                notify_update(i, j, k + 1);
            else if (i == j)
                notify_potrf(j);
            else
                notify_trsm(i, j);
        })
        .set_indegree([](Key3 key) {
            const auto [i, j, k] = key;
            return (i == j ? 1 : 2) + (k > 0 ? 1 : 0);
        })
        .set_mapping([this](Key3 key) { return thread_of(std::get<0>(key), std::get<1>(key)); })
        .set_priority([nt, use_prio](Key3 key) {
            const auto [i, j, k] = key;
            return use_prio ? prio::update(nt, i, j, k) + prio::tie_break(nt, i, j) : 0.0;
        })
        .set_name([](Key3 key) {
            const auto [i, j, k] = key;
            return std::string(i == j ? "syrk(" : "gemm(") + std::to_string(i) + "," +
                   std::to_string(j) + "," + std::to_string(k) + ")";
        });
}

}  // namespace cascade::apps
