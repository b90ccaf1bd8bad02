// Which rank owns which tile, for the two GEMM variants.
//   Grid2D: 2D block-cyclic over a P x Q process grid: tile (i,j) on rank (i % P, j % Q),
//           rank number p * Q + q. A, B and C use the same layout (ScaLAPACK's).
//   Cube:   P x P x P ranks for DNS: rank (p,q,r) = p + P*q + P*P*r. A, B and C tiles (i,j)
//           start on the r = 0 plane at (i % P, j % P, 0); product A_ik B_kj is computed on
//           (i % P, j % P, k % P), and C_ij is reduced back onto the plane.
// Within a rank, tasks writing local C tile (li,lj) (li = i / P, lj = j / Q or / P) run on
// worker (li + lj * local_rows) % threads: every worker owns a spread of the C tiles.
#pragma once

#include <optional>
#include <string>

namespace cascade::apps::gemm {

class Grid2D {
  public:
    Grid2D(int p, int q) : P_(p), Q_(q) {}
    // The most square grid P x Q = ranks with P <= Q.
    static Grid2D square(int ranks) {
        int p = 1;
        for (int d = 1; d * d <= ranks; ++d)
            if (ranks % d == 0) p = d;
        return Grid2D(p, ranks / p);
    }
    // "PxQ" (e.g. "2x3"); nullopt when malformed.
    static std::optional<Grid2D> parse(const std::string& s) {
        const auto x = s.find_first_of("xX");
        if (x == std::string::npos || x == 0 || x + 1 == s.size()) return std::nullopt;
        const std::string a = s.substr(0, x), b = s.substr(x + 1);
        if (a.find_first_not_of("0123456789") != std::string::npos ||
            b.find_first_not_of("0123456789") != std::string::npos || a.size() > 6 || b.size() > 6)
            return std::nullopt;
        const int p = std::stoi(a), q = std::stoi(b);
        if (p < 1 || q < 1) return std::nullopt;
        return Grid2D(p, q);
    }

    int P() const noexcept { return P_; }
    int Q() const noexcept { return Q_; }
    int ranks() const noexcept { return P_ * Q_; }
    int rank(int p, int q) const noexcept { return p * Q_ + q; }
    int owner(int i, int j) const noexcept { return rank(i % P_, j % Q_); }
    int row_of(int rank) const noexcept { return rank / Q_; }
    int col_of(int rank) const noexcept { return rank % Q_; }
    std::string describe() const { return std::to_string(P_) + "x" + std::to_string(Q_); }

  private:
    int P_, Q_;
};

class Cube {
  public:
    explicit Cube(int p) : P_(p) {}
    // The cube P x P x P = ranks, or nullopt when ranks is not a cube.
    static std::optional<Cube> of(int ranks) {
        for (int p = 1; p * p * p <= ranks; ++p)
            if (p * p * p == ranks) return Cube(p);
        return std::nullopt;
    }

    int P() const noexcept { return P_; }
    int ranks() const noexcept { return P_ * P_ * P_; }
    int rank(int p, int q, int r) const noexcept { return p + P_ * (q + P_ * r); }
    int p_of(int rank) const noexcept { return rank % P_; }
    int q_of(int rank) const noexcept { return (rank / P_) % P_; }
    int r_of(int rank) const noexcept { return rank / (P_ * P_); }
    // Owner of A, B and C tile (i,j) (on the r = 0 plane).
    int owner(int i, int j) const noexcept { return rank(i % P_, j % P_, 0); }
    std::string describe() const {
        const std::string p = std::to_string(P_);
        return p + "x" + p + "x" + p;
    }

  private:
    int P_;
};

// Worker thread for the task writing local C tile (li, lj) of a rank with `local_rows` rows.
inline int thread_of(int li, int lj, int local_rows, int threads) noexcept {
    return (li + lj * local_rows) % threads;
}

}  // namespace cascade::apps::gemm
