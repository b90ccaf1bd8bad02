#include "gemm_2d.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>

#include "kernels.hpp"

namespace cascade::apps::gemm {

namespace {
// Edge of an automatic block, in elements: OpenBLAS's single-threaded dgemm here runs a
// 2048 x 2048 x 512 update at the rate of its whole-matrix call (53-54 GFlop/s a core against
// 48-50 for one 512-tile product, measured in CPU time on the 2-core EPYC), and a block that
// size still gives the first task of a rank its operands after a few tiles.
constexpr std::size_t kAutoBlockEdge = 2048;
}  // namespace

void Gemm2D::Free::operator()(double* p) const noexcept {
    std::free(p);
}

Gemm2D::Buffer Gemm2D::allocate(std::size_t elements) {
    // 64-byte aligned (a cache line, an AVX-512 vector); aligned_alloc wants a multiple.
    const std::size_t bytes =
        (std::max<std::size_t>(elements, 1) * sizeof(double) + 63) & ~std::size_t(63);
    auto* p = static_cast<double*>(std::aligned_alloc(64, bytes));
    if (!p) throw std::bad_alloc();
    return Buffer(p);
}

Gemm2D::Gemm2D(cascade::Communicator& comm, const Tiling& t, Grid2D grid, std::uint64_t seed,
               int send_window, bool trees, BlockShape block, int threads)
    : t_(t),
      grid_(grid),
      me_(comm.rank()),
      p_(grid.row_of(me_)),
      q_(grid.col_of(me_)),
      window_(comm.ranks(), send_window),
      trees_(trees) {
    if (grid.ranks() != comm.ranks())
        throw cascade::UsageError("gemm 2d: grid " + grid.describe() + " has " +
                                  std::to_string(grid.ranks()) + " ranks, the job has " +
                                  std::to_string(comm.ranks()));
    const int nt = t.nt, P = grid.P(), Q = grid.Q();
    for (int i = p_; i < nt; i += P) {
        rows_.push_back(i);
        row_off_.push_back(local_m_);
        local_m_ += static_cast<std::size_t>(t.size(i));
    }
    for (int j = q_; j < nt; j += Q) {
        cols_.push_back(j);
        col_off_.push_back(local_n_);
        local_n_ += static_cast<std::size_t>(t.size(j));
    }
    for (int q = 0; q < std::min(Q, nt); ++q)
        if (q != q_) row_peers_.push_back(grid.rank(p_, q));
    for (int p = 0; p < std::min(P, nt); ++p)
        if (p != p_) col_peers_.push_back(grid.rank(p, q_));

    // The blocks of the local C matrix, one chain of tasks each.
    const int nrows = static_cast<int>(rows_.size()), ncols = static_cast<int>(cols_.size());
    if (nrows > 0 && ncols > 0) {
        if (block.automatic()) {
            // Blocks of about kAutoBlockEdge x kAutoBlockEdge elements, and at least one per
            // worker where there are tiles enough (more parts along the longer side).
            auto parts = [](std::size_t elements) {
                return std::max<std::size_t>(1, (elements + kAutoBlockEdge / 2) / kAutoBlockEdge);
            };
            int row_parts = static_cast<int>(std::min<std::size_t>(nrows, parts(local_m_)));
            int col_parts = static_cast<int>(std::min<std::size_t>(ncols, parts(local_n_)));
            while (row_parts * col_parts < threads && (row_parts < nrows || col_parts < ncols)) {
                const bool more_cols =
                    col_parts < ncols &&
                    (row_parts >= nrows || local_n_ * static_cast<unsigned>(row_parts) >=
                                               local_m_ * static_cast<unsigned>(col_parts));
                (more_cols ? col_parts : row_parts) += 1;
            }
            block_rows_ = (nrows + row_parts - 1) / row_parts;
            block_cols_ = (ncols + col_parts - 1) / col_parts;
        } else {
            block_rows_ = std::min(block.rows, nrows);
            block_cols_ = std::min(block.cols, ncols);
        }
        row_blocks_ = (nrows + block_rows_ - 1) / block_rows_;
        col_blocks_ = (ncols + block_cols_ - 1) / block_cols_;

        // A leading dimension of a multiple of 4 KiB puts the columns of a C block on the same
        // cache sets; one cache line more breaks that (dgemm 512^3 into a 2048-row matrix: 47.7
        // against 49.2 GFlop/s per CPU-second with 2056).
        ldc_ = local_m_ % 512 == 0 ? local_m_ + 8 : local_m_;
        c_ = allocate(ldc_ * local_n_);
        // Panels: A^T of the local rows and B of the local columns, for every k. The tiles
        // this rank owns (k % Q == q for A, k % P == p for B) live in them too.
        for (int k = 0; k < nt; ++k) {
            const std::size_t kk = static_cast<std::size_t>(t.size(k));
            a_panel_.push_back(allocate(kk * local_m_));
            b_panel_.push_back(allocate(kk * local_n_));
        }
        for (int i : rows_)
            for (int k = q_; k < nt; k += Q) {  // A_ik, stored transposed
                double* at = a_tile(i, k);
                const int m = t.size(i), kk = t.size(k);
                for (int r = 0; r < m; ++r)
                    for (int c = 0; c < kk; ++c)
                        at[static_cast<std::size_t>(c) + static_cast<std::size_t>(r) * kk] =
                            random_entry(seed, Operand::A, t.first(i) + r, t.first(k) + c);
            }
        for (int j : cols_)
            for (int k = p_; k < nt; k += P)
                fill_tile(t, seed, Operand::B, k, j, b_tile(k, j));
    }

    a_am_ = comm.make_large_active_msg([this](int& i, int& k, int&) { a_ready(i, k); },
                                       [this](int& i, int& k, int&) { return a_tile(i, k); },
                                       [this](int&, int&, int& dest) { window_.sent(dest); },
                                       "gemm2d_tile_a");
    b_am_ = comm.make_large_active_msg([this](int& k, int& j, int&) { b_ready(k, j); },
                                       [this](int& k, int& j, int&) { return b_tile(k, j); },
                                       [this](int&, int&, int& dest) { window_.sent(dest); },
                                       "gemm2d_tile_b");
}

double* Gemm2D::a_tile(int i, int k) const noexcept {
    const int nt = t_.nt, P = grid_.P();
    if (a_panel_.empty() || i < 0 || k < 0 || i >= nt || k >= nt || i % P != p_) return nullptr;
    return a_panel_[static_cast<std::size_t>(k)].get() +
           static_cast<std::size_t>(t_.size(k)) * row_off_[static_cast<std::size_t>(i / P)];
}

double* Gemm2D::b_tile(int k, int j) const noexcept {
    const int nt = t_.nt, Q = grid_.Q();
    if (b_panel_.empty() || j < 0 || k < 0 || j >= nt || k >= nt || j % Q != q_) return nullptr;
    return b_panel_[static_cast<std::size_t>(k)].get() +
           static_cast<std::size_t>(t_.size(k)) * col_off_[static_cast<std::size_t>(j / Q)];
}

GemmAlgorithm::CTile Gemm2D::c_tile(int i, int j) const {
    const int P = grid_.P(), Q = grid_.Q();
    if (!c_ || i % P != p_ || j % Q != q_) return {};
    return {c_.get() + row_off_[static_cast<std::size_t>(i / P)] +
                col_off_[static_cast<std::size_t>(j / Q)] * ldc_,
            static_cast<int>(ldc_)};
}

std::string Gemm2D::describe() const {
    return "2d, grid " + grid_.describe() + ", " + std::to_string(block_rows_) + "x" +
           std::to_string(block_cols_) + " C tiles per task";
}

void Gemm2D::begin_run(cascade::Threadpool& tp, BlasClock& clock) {
    tp_ = &tp;
    clock_ = &clock;
    const int nt = t_.nt, rb_count = row_blocks_, cb_count = col_blocks_;
    const int nrows = static_cast<int>(rows_.size()), ncols = static_cast<int>(cols_.size());
    const int br = block_rows_, bc = block_cols_;
    gemm_ = std::make_unique<cascade::Taskflow<Key>>(&tp, "gemm");
    gemm_
        ->set_task([this](Key key) { run_gemm(key); })
        // The block's A and B tiles of this k, and the previous task of its chain.
        .set_indegree([nrows, ncols, br, bc](Key key) {
            const int r = std::min(br, nrows - key[0] * br), c = std::min(bc, ncols - key[1] * bc);
            return r + c + (key[2] == 0 ? 0 : 1);
        })
        .set_mapping([rb_count, threads = tp.workers()](Key key) {
            return (key[0] + key[1] * rb_count) % threads;
        })
        // k-major, as the tiles arrive (they are sent in k order).
        .set_priority([nt, rb_count, cb_count](Key key) {
            const double blocks = static_cast<double>(rb_count) * cb_count;
            return -((key[2] * static_cast<double>(cb_count) + key[1]) * rb_count + key[0]) /
                   (nt * blocks);
        })
        .set_name([](Key key) {
            return "gemm(" + std::to_string(key[0]) + "," + std::to_string(key[1]) + "," +
                   std::to_string(key[2]) + ")";
        });
}

void Gemm2D::start() {
    // In k order, so the tiles of the first products leave first.
    for (int k = 0; k < t_.nt; ++k) {
        if (k % grid_.Q() == q_ && !cols_.empty())
            for (int i : rows_) {
                double* a = a_tile(i, k);
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
        if (k % grid_.P() == p_ && !rows_.empty())
            for (int j : cols_) {
                double* b = b_tile(k, j);
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
    return static_cast<std::uint64_t>(row_blocks_) * static_cast<unsigned>(col_blocks_) *
           static_cast<unsigned>(t_.nt);
}

void Gemm2D::run_gemm(const Key& key) {
    const auto [rb, cb, k] = key;
    const std::size_t r0 = static_cast<std::size_t>(rb) * block_rows_;
    const std::size_t c0 = static_cast<std::size_t>(cb) * block_cols_;
    const std::size_t r1 = std::min(rows_.size(), r0 + block_rows_);
    const std::size_t c1 = std::min(cols_.size(), c0 + block_cols_);
    const std::size_t m_begin = row_off_[r0], n_begin = col_off_[c0];
    const std::size_t m_end = r1 < rows_.size() ? row_off_[r1] : local_m_;
    const std::size_t n_end = c1 < cols_.size() ? col_off_[c1] : local_n_;
    const int kk = t_.size(k);
    gemm_tn(*clock_, tp_->current_thread(), static_cast<int>(m_end - m_begin),
            static_cast<int>(n_end - n_begin), kk, a_tile(rows_[r0], k), kk, b_tile(k, cols_[c0]),
            kk, k == 0 ? 0.0 : 1.0, c_.get() + m_begin + n_begin * ldc_, static_cast<int>(ldc_));
    if (k + 1 < t_.nt) gemm_->fulfill_promise({rb, cb, k + 1});
}

void Gemm2D::a_ready(int i, int k) {
    const int rb = i / grid_.P() / block_rows_;
    for (int cb = 0; cb < col_blocks_; ++cb)
        gemm_->fulfill_promise({rb, cb, k});
}

void Gemm2D::b_ready(int k, int j) {
    const int cb = j / grid_.Q() / block_cols_;
    for (int rb = 0; rb < row_blocks_; ++rb)
        gemm_->fulfill_promise({rb, cb, k});
}

}  // namespace cascade::apps::gemm
