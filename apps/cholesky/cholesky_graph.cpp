#include "cholesky_graph.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "priorities.hpp"

namespace cascade::apps {

namespace prio = cholesky_priority;

std::vector<int> CholeskyGraph::readers(int i, int k) const {
    const int nt = a_.layout().nt;
    std::vector<int> ranks;
    auto add = [&](int r) {
        if (std::find(ranks.begin(), ranks.end(), r) == ranks.end()) ranks.push_back(r);
    };
    if (i == k) {  // L_kk: read by trsm(r,k), r > k
        for (int r = k + 1; r < nt; ++r)
            add(dist_.rank_of(r, k));
    } else {  // L_ik: read by update(i,j,k), k < j <= i, and update(r,i,k), r > i
        for (int j = k + 1; j <= i; ++j)
            add(dist_.rank_of(i, j));
        for (int r = i + 1; r < nt; ++r)
            add(dist_.rank_of(r, i));
    }
    std::sort(ranks.begin(), ranks.end());
    return ranks;
}

CholeskyGraph::CholeskyGraph(Threadpool& tp, Communicator& comm, TileMatrix& a,
                             const BlockCyclic& dist, KernelClock& clock, PriorityKind priorities,
                             double fake_gflops)
    : tp_(tp),
      a_(a),
      dist_(dist),
      clock_(clock),
      me_(comm.rank()),
      readers_(static_cast<std::size_t>(a.layout().nt) * (a.layout().nt + 1) / 2),
      fake_gflops_(fake_gflops),
      potrf_(&tp, "potrf"),
      trsm_(&tp, "trsm"),
      update_(&tp, "update") {
    const TileLayout& L = a_.layout();
    const int nt = L.nt;
    const bool use_prio = priorities == PriorityKind::critical_path;

    // Who reads which final tile, and the copies this rank receives (allocated now, so the
    // factorization allocates nothing and receives into warm memory).
    for (int k = 0; k < nt; ++k) {
        for (int i = k; i < nt; ++i) {
            std::vector<int> who = readers(i, k);
            const auto self = std::find(who.begin(), who.end(), me_);
            if (local(i, k)) {
                if (self != who.end()) who.erase(self);
                readers_[index(i, k)] = std::move(who);
            } else if (self != who.end()) {
                a_.allocate_copy(i, k);
            }
        }
    }

    // ---- messages: a final factor tile, straight into the receiver's copy ----
    send_diag_ = comm.make_large_active_msg([this](int& k) { release_trsm(k); },
                                            [this](int& k) { return a_.copy(k, k); }, [](int&) {},
                                            "cholesky.L_kk");
    send_panel_ = comm.make_large_active_msg([this](int& i, int& k) { release_updates(i, k); },
                                             [this](int& i, int& k) { return a_.copy(i, k); },
                                             [](int&, int&) {}, "cholesky.L_ik");

    // ---- potrf(k): factor the diagonal tile, then release the panel's trsm(i,k) ----
    potrf_
        .set_task([this, &L](int k) {
            const double n = L.rows(k);
            kernel(Kernel::potrf, n * n * n / 3,
                   [&] { potrf_tile(L.rows(k), a_.tile(k, k), a_.ld(k)); });
        })
        .set_fulfill([this](int k) { potrf_done(k); })
        .set_indegree([](int) { return 1; })
        .set_mapping([this](int k) { return thread_of(k, k); })
        .set_priority([nt, use_prio](int k) { return use_prio ? prio::potrf(nt, k) : 0.0; })
        .set_name([](int k) { return "potrf(" + std::to_string(k) + ")"; });

    // ---- trsm(i,k): L_ik = A_ik L_kk^-T, then release the updates that read L_ik ----
    trsm_
        .set_task([this, &L](Key2 key) {
            const auto [i, k] = key;
            const double m = L.rows(i), n = L.rows(k);
            kernel(Kernel::trsm, m * n * n, [&] {
                trsm_tile(L.rows(i), L.rows(k), a_.read(k, k), a_.ld(k), a_.tile(i, k), a_.ld(i));
            });
        })
        .set_fulfill([this](Key2 key) { trsm_done(std::get<0>(key), std::get<1>(key)); })
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
            const double mi = L.rows(i), mj = L.rows(j), mk = L.rows(k);
            if (i == j) {
                kernel(Kernel::syrk, mi * mi * mk, [&] {
                    syrk_tile(L.rows(i), L.rows(k), a_.read(i, k), a_.ld(i), a_.tile(i, i),
                              a_.ld(i));
                });
            } else {
                kernel(Kernel::gemm, 2 * mi * mj * mk, [&] {
                    gemm_tile(L.rows(i), L.rows(j), L.rows(k), a_.read(i, k), a_.ld(i),
                              a_.read(j, k), a_.ld(j), a_.tile(i, j), a_.ld(i));
                });
            }
        })
        .set_fulfill([this](Key3 key) {  // same tile, same rank: always local
            const auto [i, j, k] = key;
            if (k + 1 < j)
                update_.fulfill_promise({i, j, k + 1});
            else if (i == j)
                potrf_.fulfill_promise(j);
            else
                trsm_.fulfill_promise({i, j});
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

template <class F>
void CholeskyGraph::kernel(Kernel k, double flops, F&& f) {
    if (fake_gflops_ > 0)
        clock_.time(tp_.current_thread(), k, [&] {
            std::this_thread::sleep_for(
                std::chrono::duration<double>(flops / (fake_gflops_ * 1e9)));
        });
    else
        clock_.time(tp_.current_thread(), k, std::forward<F>(f));
}

void CholeskyGraph::potrf_done(int k) {
    const auto& who = readers_[index(k, k)];
    for (int r : who)
        send_diag_->send_large(r, view<double>(a_.tile(k, k), tile_size(k, k)), k);
    tiles_sent_ += static_cast<long long>(who.size());
    if (who.size() >= 2) multi_reader_sends_ += static_cast<long long>(who.size());
    release_trsm(k);
}

void CholeskyGraph::trsm_done(int i, int k) {
    const auto& who = readers_[index(i, k)];
    for (int r : who)
        send_panel_->send_large(r, view<double>(a_.tile(i, k), tile_size(i, k)), i, k);
    tiles_sent_ += static_cast<long long>(who.size());
    if (who.size() >= 2) multi_reader_sends_ += static_cast<long long>(who.size());
    release_updates(i, k);
}

void CholeskyGraph::release_trsm(int k) {
    const int nt = a_.layout().nt;
    for (int i = k + 1; i < nt; ++i)
        if (local(i, k)) trsm_.fulfill_promise({i, k});
}

void CholeskyGraph::release_updates(int i, int k) {
    const int nt = a_.layout().nt;
    for (int j = k + 1; j <= i; ++j)  // L_ik as left factor (and syrk when j == i)
        if (local(i, j)) update_.fulfill_promise({i, j, k});
    for (int r = i + 1; r < nt; ++r)  // L_ik as right factor
        if (local(r, i)) update_.fulfill_promise({r, i, k});
}

long long CholeskyGraph::local_task_count() const {
    const int nt = a_.layout().nt;
    long long n = 0;
    for (int j = 0; j < nt; ++j)
        for (int i = j; i < nt; ++i)
            if (local(i, j)) n += 1 + j;  // potrf or trsm, plus j updates
    return n;
}

}  // namespace cascade::apps
