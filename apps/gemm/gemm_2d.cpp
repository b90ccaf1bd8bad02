#include "gemm_2d.hpp"

#include <algorithm>
#include <string>

#include "kernels.hpp"

namespace cascade::apps::gemm {

Gemm2D::Gemm2D(cascade::Communicator& comm, const Tiling& t, Grid2D grid, std::uint64_t seed,
               int send_window, bool trees)
    : t_(t),
      grid_(grid),
      me_(comm.rank()),
      p_(grid.row_of(me_)),
      q_(grid.col_of(me_)),
      a_own_(t),
      b_own_(t),
      c_(t),
      a_in_(t),
      b_in_(t),
      a_(static_cast<std::size_t>(t.nt) * t.nt, nullptr),
      b_(static_cast<std::size_t>(t.nt) * t.nt, nullptr),
      window_(comm.ranks(), send_window),
      trees_(trees) {
    if (grid.ranks() != comm.ranks())
        throw cascade::UsageError("gemm 2d: grid " + grid.describe() + " has " +
                                  std::to_string(grid.ranks()) + " ranks, the job has " +
                                  std::to_string(comm.ranks()));
    const int nt = t.nt, P = grid.P(), Q = grid.Q();
    for (int i = p_; i < nt; i += P)
        rows_.push_back(i);
    for (int j = q_; j < nt; j += Q)
        cols_.push_back(j);
    for (int q = 0; q < std::min(Q, nt); ++q)
        if (q != q_) row_peers_.push_back(grid.rank(p_, q));
    for (int p = 0; p < std::min(P, nt); ++p)
        if (p != p_) col_peers_.push_back(grid.rank(p, q_));

    // Owned tiles: A, B and C share the layout, so (rows_ x cols_) for all three.
    for (int j : cols_)
        for (int i : rows_) {
            fill_tile(t, seed, Operand::A, i, j, a_own_.allocate(i, j));
            fill_tile(t, seed, Operand::B, i, j, b_own_.allocate(i, j));
            c_.allocate(i, j);
        }
    // Operands of the local tasks: row panel i of A, column panel j of B.
    if (!cols_.empty())
        for (int i : rows_)
            for (int k = 0; k < nt; ++k)
                a_[at(i, k)] = k % Q == q_ ? a_own_.get(i, k) : a_in_.allocate(i, k);
    if (!rows_.empty())
        for (int j : cols_)
            for (int k = 0; k < nt; ++k)
                b_[at(k, j)] = k % P == p_ ? b_own_.get(k, j) : b_in_.allocate(k, j);

    a_am_ = comm.make_large_active_msg([this](int& i, int& k, int&) { a_ready(i, k); },
                                       [this](int& i, int& k, int&) { return a_in_.find(i, k); },
                                       [this](int&, int&, int& dest) { window_.sent(dest); },
                                       "gemm2d_tile_a");
    b_am_ = comm.make_large_active_msg([this](int& k, int& j, int&) { b_ready(k, j); },
                                       [this](int& k, int& j, int&) { return b_in_.find(k, j); },
                                       [this](int&, int&, int& dest) { window_.sent(dest); },
                                       "gemm2d_tile_b");
}

std::string Gemm2D::describe() const {
    return "2d, grid " + grid_.describe();
}

void Gemm2D::begin_run(cascade::Threadpool& tp, BlasClock& clock) {
    tp_ = &tp;
    clock_ = &clock;
    const int nt = t_.nt, P = grid_.P(), Q = grid_.Q();
    const int local_rows = static_cast<int>(rows_.size());
    gemm_ = std::make_unique<cascade::Taskflow<Key>>(&tp, "gemm");
    gemm_->set_task([this](Key ijk) { run_gemm(ijk); })
        .set_indegree([](Key ijk) { return ijk[2] == 0 ? 2 : 3; })  // A_ik, B_kj, gemm(i,j,k-1)
        .set_mapping([P, Q, local_rows, threads = tp.workers()](Key ijk) {
            return thread_of(ijk[0] / P, ijk[1] / Q, local_rows, threads);
        })
        // k-major, as the tiles arrive (they are sent in k order); within one k, column by
        // column, so consecutive products on a worker share their B tile.
        .set_priority([nt](Key ijk) {
            const double n = nt;
            return -((ijk[2] * n + ijk[1]) * n + ijk[0]) / (n * n * n);
        })
        .set_name([](Key ijk) {
            return "gemm(" + std::to_string(ijk[0]) + "," + std::to_string(ijk[1]) + "," +
                   std::to_string(ijk[2]) + ")";
        });
}

void Gemm2D::start() {
    // In k order, so the tiles of the first products leave first.
    for (int k = 0; k < t_.nt; ++k) {
        if (k % grid_.Q() == q_)
            for (int i : rows_) {
                double* a = a_own_.get(i, k);
                if (trees_ && row_peers_.size() >= 2)  // one tree; its window slot is ours
                    window_.push(me_, [this, a, i, k] {
                        a_am_->send_large(row_peers_, cascade::view<double>(a, t_.elements(i, k)),
                                          i, k, me_);
                    });
                else
                    for (int dest : row_peers_)
                        window_.push(dest, [this, a, i, k, dest] {
                            a_am_->send_large(dest, cascade::view<double>(a, t_.elements(i, k)), i,
                                              k, dest);
                        });
                a_ready(i, k);
            }
        if (k % grid_.P() == p_)
            for (int j : cols_) {
                double* b = b_own_.get(k, j);
                if (trees_ && col_peers_.size() >= 2)
                    window_.push(me_, [this, b, k, j] {
                        b_am_->send_large(col_peers_, cascade::view<double>(b, t_.elements(k, j)),
                                          k, j, me_);
                    });
                else
                    for (int dest : col_peers_)
                        window_.push(dest, [this, b, k, j, dest] {
                            b_am_->send_large(dest, cascade::view<double>(b, t_.elements(k, j)), k,
                                              j, dest);
                        });
                b_ready(k, j);
            }
    }
}

void Gemm2D::end_run() {
    gemm_.reset();
    tp_ = nullptr;
    clock_ = nullptr;
}

std::uint64_t Gemm2D::local_tasks() const {
    return static_cast<std::uint64_t>(rows_.size()) * cols_.size() * static_cast<unsigned>(t_.nt);
}

void Gemm2D::run_gemm(const Key& ijk) {
    const auto [i, j, k] = ijk;
    gemm_tile(*clock_, tp_->current_thread(), t_.size(i), t_.size(j), t_.size(k), a_[at(i, k)],
              b_[at(k, j)], k == 0 ? 0.0 : 1.0, c_.get(i, j));
    if (k + 1 < t_.nt) gemm_->fulfill_promise({i, j, k + 1});
}

void Gemm2D::a_ready(int i, int k) {
    for (int j : cols_)
        gemm_->fulfill_promise({i, j, k});
}

void Gemm2D::b_ready(int k, int j) {
    for (int i : rows_)
        gemm_->fulfill_promise({i, j, k});
}

}  // namespace cascade::apps::gemm
