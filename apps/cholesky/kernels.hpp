// The four tile kernels of tiled Cholesky (lower, column-major, double precision), and a
// per-thread clock that adds up the time spent inside them for the efficiency report.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace cascade::apps {

// L = chol(A), n x n, lower triangle. Throws NotPositiveDefinite if A is not SPD.
void potrf_tile(int n, double* a, int lda);
// A = A * L^-T: A is m x n, L is n x n lower triangular.
void trsm_tile(int m, int n, const double* l, int ldl, double* a, int lda);
// C = C - A * A^T on the lower triangle: C is n x n, A is n x k.
void syrk_tile(int n, int k, const double* a, int lda, double* c, int ldc);
// C = C - A * B^T: C is m x n, A is m x k, B is n x k.
void gemm_tile(int m, int n, int k, const double* a, int lda, const double* b, int ldb, double* c,
               int ldc);

class NotPositiveDefinite : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

enum class Kernel : int { potrf = 0, trsm, syrk, gemm };
constexpr int kernel_count = 4;
inline const char* kernel_name(Kernel k) {
    constexpr const char* names[kernel_count] = {"potrf", "trsm", "syrk", "gemm"};
    return names[static_cast<int>(k)];
}

// Time inside kernels, accumulated per worker thread: each worker writes only its own
// cache line, so the hot path has no shared atomics. Read the totals after join().
class KernelClock {
  public:
    // Slot n_threads collects calls made outside the pool (there should be none).
    explicit KernelClock(int n_threads) : slots_(static_cast<std::size_t>(n_threads) + 1) {}

    template <class F>
    void time(int thread, Kernel k, F&& f) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        const auto t1 = std::chrono::steady_clock::now();
        Slot& s = slots_[thread >= 0 && thread + 1 < static_cast<int>(slots_.size())
                             ? static_cast<std::size_t>(thread)
                             : slots_.size() - 1];
        s.seconds[static_cast<int>(k)] += std::chrono::duration<double>(t1 - t0).count();
        s.calls[static_cast<int>(k)] += 1;
    }

    double seconds(Kernel k) const {
        double t = 0;
        for (const Slot& s : slots_)
            t += s.seconds[static_cast<int>(k)];
        return t;
    }
    std::uint64_t calls(Kernel k) const {
        std::uint64_t c = 0;
        for (const Slot& s : slots_)
            c += s.calls[static_cast<int>(k)];
        return c;
    }
    double seconds() const {
        double t = 0;
        for (int k = 0; k < kernel_count; ++k)
            t += seconds(static_cast<Kernel>(k));
        return t;
    }
    double thread_seconds(int thread) const {
        double t = 0;
        for (double x : slots_[static_cast<std::size_t>(thread)].seconds)
            t += x;
        return t;
    }

  private:
    struct alignas(64) Slot {
        std::array<double, kernel_count> seconds{};
        std::array<std::uint64_t, kernel_count> calls{};
    };
    std::vector<Slot> slots_;
};

}  // namespace cascade::apps
