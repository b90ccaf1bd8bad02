#include "gemm_dns.hpp"

#include <algorithm>
#include <string>

#include "kernels.hpp"

namespace cascade::apps::gemm {

GemmDNS::GemmDNS(cascade::Communicator& comm, const Tiling& t, Cube cube, std::uint64_t seed,
                 int send_window)
    : t_(t),
      cube_(cube),
      me_(comm.rank()),
      p_(cube.p_of(me_)),
      q_(cube.q_of(me_)),
      r_(cube.r_of(me_)),
      layers_(std::min(cube.P(), t.nt)),
      a_own_(t),
      b_own_(t),
      c_(t),
      a_in_(t),
      b_in_(t),
      partial_(t),
      a_(static_cast<std::size_t>(t.nt) * t.nt, nullptr),
      b_(static_cast<std::size_t>(t.nt) * t.nt, nullptr),
      window_(comm.ranks(), send_window) {
    if (cube.ranks() != comm.ranks())
        throw cascade::UsageError("gemm 3d: cube " + cube.describe() + " has " +
                                  std::to_string(cube.ranks()) + " ranks, the job has " +
                                  std::to_string(comm.ranks()));
    const int nt = t.nt, P = cube.P();
    for (int i = p_; i < nt; i += P)
        rows_.push_back(i);
    for (int j = q_; j < nt; j += P)
        cols_.push_back(j);
    for (int k = r_; k < nt; k += P)
        ks_.push_back(k);

    if (r_ == 0) {
        for (int j : cols_)
            for (int i : rows_) {
                fill_tile(t, seed, Operand::A, i, j, a_own_.allocate(i, j));
                fill_tile(t, seed, Operand::B, i, j, b_own_.allocate(i, j));
                c_.allocate(i, j);
            }
        for (int r = 1; r < layers_; ++r) {
            reduce_in_.emplace_back(t);
            for (int j : cols_)
                for (int i : rows_)
                    reduce_in_.back().allocate(i, j);
        }
    } else {
        for (int j : cols_)
            for (int i : rows_)
                if (!ks_.empty()) partial_.allocate(i, j);
    }
    // Operands: A_ik comes from (p, r, 0), B_kj from (r, q, 0).
    const bool a_local = q_ == 0 && r_ == 0, b_local = p_ == 0 && r_ == 0;
    if (!cols_.empty())
        for (int i : rows_)
            for (int k : ks_)
                a_[at(i, k)] = a_local ? a_own_.get(i, k) : a_in_.allocate(i, k);
    if (!rows_.empty())
        for (int j : cols_)
            for (int k : ks_)
                b_[at(k, j)] = b_local ? b_own_.get(k, j) : b_in_.allocate(k, j);

    a_am_ = comm.make_large_active_msg([this](int& i, int& k, int&) { a_ready(i, k); },
                                       [this](int& i, int& k, int&) { return a_in_.find(i, k); },
                                       [this](int&, int&, int& dest) { window_.sent(dest); },
                                       "gemm3d_tile_a");
    b_am_ = comm.make_large_active_msg([this](int& k, int& j, int&) { b_ready(k, j); },
                                       [this](int& k, int& j, int&) { return b_in_.find(k, j); },
                                       [this](int&, int&, int& dest) { window_.sent(dest); },
                                       "gemm3d_tile_b");
    partial_am_ = comm.make_large_active_msg(
        [this](int& i, int& j, int&) {
            accumulate_->fulfill_promise({i, j});
        },
        [this](int& i, int& j, int& r) { return partial_buffer(i, j, r); },
        [this](int& i, int& j, int&) { window_.sent(cube_.owner(i, j)); }, "gemm3d_partial_c");
}

std::string GemmDNS::describe() const {
    return "3d (DNS), cube " + cube_.describe();
}

double* GemmDNS::partial_buffer(int i, int j, int r) const noexcept {
    if (r < 1 || r >= layers_) return nullptr;
    return reduce_in_[static_cast<std::size_t>(r - 1)].find(i, j);
}

void GemmDNS::begin_run(cascade::Threadpool& tp, BlasClock& clock) {
    tp_ = &tp;
    clock_ = &clock;
    const int nt = t_.nt, P = cube_.P(), r = r_;
    const int local_rows = static_cast<int>(rows_.size());
    auto name = [](const char* what, auto key) {
        std::string s = what;
        s.push_back('(');
        for (std::size_t x = 0; x < key.size(); ++x) {
            if (x) s.push_back(',');
            s.append(std::to_string(key[x]));
        }
        s.push_back(')');
        return s;
    };
    gemm_ = std::make_unique<cascade::Taskflow<GemmKey>>(&tp, "gemm");
    gemm_->set_task([this](GemmKey ijk) { run_gemm(ijk); })
        .set_indegree([r](GemmKey ijk) { return ijk[2] == r ? 2 : 3; })  // A, B, previous
        .set_mapping([P, local_rows, threads = tp.workers()](GemmKey ijk) {
            return thread_of(ijk[0] / P, ijk[1] / P, local_rows, threads);
        })
        // k-major, as the operands arrive (they are sent in k order); within one k, column by
        // column, so consecutive products on a worker share their B tile.
        .set_priority([nt](GemmKey ijk) {
            const double n = nt;
            return -((ijk[2] * n + ijk[1]) * n + ijk[0]) / (n * n * n);
        })
        .set_name([name](GemmKey ijk) { return name("gemm", ijk); });
    accumulate_ = std::make_unique<cascade::Taskflow<TileKey>>(&tp, "accumulate");
    accumulate_->set_task([this](TileKey ij) { run_accumulate(ij); })
        .set_indegree([layers = layers_](TileKey) { return layers; })  // own chain + partials
        .set_mapping([P, local_rows, threads = tp.workers()](TileKey ij) {
            return thread_of(ij[0] / P, ij[1] / P, local_rows, threads);
        })
        .set_priority([](TileKey) { return 2.0; })
        .set_name([name](TileKey ij) { return name("accumulate", ij); });
}

void GemmDNS::start() {
    // Only the r = 0 plane owns tiles. In k order, so the first products' operands leave
    // first. A_ik (k % P == q) goes to (p, *, q); B_kj (k % P == p) to (*, q, p).
    if (r_ != 0) return;
    const int P = cube_.P();
    for (int k = 0; k < t_.nt; ++k) {
        if (k % P == q_)
            for (int i : rows_) {
                double* a = a_own_.get(i, k);
                for (int qq = 0; qq < layers_; ++qq) {
                    const int dest = cube_.rank(p_, qq, q_);
                    if (dest == me_)
                        a_ready(i, k);
                    else
                        window_.push(dest, [this, a, i, k, dest] {
                            a_am_->send_large(dest, cascade::view<double>(a, t_.elements(i, k)), i,
                                              k, dest);
                        });
                }
            }
        if (k % P == p_)
            for (int j : cols_) {
                double* b = b_own_.get(k, j);
                for (int pp = 0; pp < layers_; ++pp) {
                    const int dest = cube_.rank(pp, q_, p_);
                    if (dest == me_)
                        b_ready(k, j);
                    else
                        window_.push(dest, [this, b, k, j, dest] {
                            b_am_->send_large(dest, cascade::view<double>(b, t_.elements(k, j)), k,
                                              j, dest);
                        });
                }
            }
    }
}

void GemmDNS::end_run() {
    gemm_.reset();
    accumulate_.reset();
    tp_ = nullptr;
    clock_ = nullptr;
}

std::uint64_t GemmDNS::local_tasks() const {
    const std::uint64_t tiles = static_cast<std::uint64_t>(rows_.size()) * cols_.size();
    return tiles * ks_.size() + (r_ == 0 && layers_ > 1 ? tiles : 0);
}

void GemmDNS::run_gemm(const GemmKey& ijk) {
    const auto [i, j, k] = ijk;
    double* c = r_ == 0 ? c_.get(i, j) : partial_.get(i, j);
    gemm_tile(*clock_, tp_->current_thread(), t_.size(i), t_.size(j), t_.size(k), a_[at(i, k)],
              b_[at(k, j)], k == r_ ? 0.0 : 1.0, c);
    const int P = cube_.P();
    if (k + P < t_.nt) {
        gemm_->fulfill_promise({i, j, k + P});
    } else if (r_ != 0) {  // partial C_ij^(r) done: to the owner of C_ij
        window_.push(cube_.owner(i, j), [this, c, i, j] {
            partial_am_->send_large(cube_.owner(i, j), cascade::view<double>(c, t_.elements(i, j)),
                                    i, j, r_);
        });
    } else if (layers_ > 1) {
        accumulate_->fulfill_promise({i, j});
    }
}

void GemmDNS::run_accumulate(const TileKey& ij) {
    const auto [i, j] = ij;
    const int thread = tp_->current_thread();
    for (int r = 1; r < layers_; ++r)
        add_tile(*clock_, thread, t_.elements(i, j), partial_buffer(i, j, r), c_.get(i, j));
}

void GemmDNS::a_ready(int i, int k) {
    for (int j : cols_)
        gemm_->fulfill_promise({i, j, k});
}

void GemmDNS::b_ready(int k, int j) {
    for (int i : rows_)
        gemm_->fulfill_promise({i, j, k});
}

}  // namespace cascade::apps::gemm
