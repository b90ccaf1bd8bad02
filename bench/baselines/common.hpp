// Shared pieces of the baseline programs (ScaLAPACK, StarPU-MPI, OpenBLAS): command-line
// options, the grid, the RESULT line and the GEMM check; the matrix generator, statistics and
// record writer are the ones of apps/common, shared with Cascade's apps. Header-only so each
// baseline stays one small program.
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/matrix.hpp"
#include "common/record.hpp"
#include "common/stats.hpp"

extern "C" void openblas_set_num_threads(int num_threads);

namespace baselines {

// ---- options --------------------------------------------------------------------------------

struct Options {
    int n = 2048;
    int nb = 256;
    int P = 0, Q = 0;  // process grid; 0 x 0: as square as possible
    int repeat = 1;
    bool check = false;
    int threads = 1;  // openblas only
    std::string op;   // openblas only: potrf | gemm
    std::uint64_t seed = 2024;
};

// Which options a program accepts (the others are rejected).
enum Accept : unsigned { kNb = 1, kGrid = 2, kThreads = 4, kOp = 8 };

// Rank of this process from the launcher's environment, before MPI is initialized, so that
// option errors are printed once, not by every rank.
inline int launcher_rank() {
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
        if (const char* s = std::getenv(v)) return std::atoi(s);
    }
    return 0;
}

[[noreturn]] inline void usage_error(const char* prog, const std::string& msg, unsigned accept) {
    if (launcher_rank() == 0) {
        std::fprintf(stderr, "%s: error: %s\nusage: %s --n N", prog, msg.c_str(), prog);
        if (accept & kOp) std::fprintf(stderr, " --op potrf|gemm");
        if (accept & kNb) std::fprintf(stderr, " [--nb NB]");
        if (accept & kGrid) std::fprintf(stderr, " [--grid PxQ]");
        if (accept & kThreads) std::fprintf(stderr, " [--threads T]");
        std::fprintf(stderr, " [--repeat R] [--check] [--seed S]\n");
    }
    std::exit(2);
}

inline bool parse_int(std::string_view s, long long lo, long long hi, long long& out) {
    long long v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return false;
    out = v;
    return true;
}

inline Options parse_options(int argc, char** argv, unsigned accept) {
    const char* prog = argc > 0 ? argv[0] : "baseline";
    if (const char* slash = std::strrchr(prog, '/')) prog = slash + 1;
    Options o;
    bool have_n = false;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i], value;
        bool has_value = false;
        if (const auto eq = arg.find('='); arg.starts_with("--") && eq != arg.npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_value = true;
        }
        const std::string name(arg);
        if (name == "--check") {
            if (has_value) usage_error(prog, "--check takes no value", accept);
            o.check = true;
            continue;
        }
        if (name == "-h" || name == "--help") usage_error(prog, "help requested", accept);
        if (!has_value) {
            if (i + 1 >= argc) usage_error(prog, "option " + name + " needs a value", accept);
            value = argv[++i];
        }
        long long v = 0;
        auto int_opt = [&](long long lo, long long hi) {
            if (!parse_int(value, lo, hi, v))
                usage_error(prog,
                            name + ": '" + std::string(value) + "' is not an integer in [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "]",
                            accept);
            return static_cast<int>(v);
        };
        if (name == "--n") {
            o.n = int_opt(1, 1 << 17);
            have_n = true;
        } else if (name == "--nb" && (accept & kNb)) {
            o.nb = int_opt(1, 1 << 14);
        } else if (name == "--repeat") {
            o.repeat = int_opt(1, 1000);
        } else if (name == "--seed") {
            if (!parse_int(value, 0, (1LL << 62), v))
                usage_error(prog, "--seed: bad value", accept);
            o.seed = static_cast<std::uint64_t>(v);
        } else if (name == "--threads" && (accept & kThreads)) {
            o.threads = int_opt(1, 1024);
        } else if (name == "--op" && (accept & kOp)) {
            o.op = std::string(value);
            if (o.op != "potrf" && o.op != "gemm")
                usage_error(prog, "--op must be potrf or gemm, not '" + o.op + "'", accept);
        } else if (name == "--grid" && (accept & kGrid)) {
            const auto x = value.find_first_of("xX");
            long long p = 0, q = 0;
            if (x == value.npos || !parse_int(value.substr(0, x), 1, 1 << 16, p) ||
                !parse_int(value.substr(x + 1), 1, 1 << 16, q))
                usage_error(prog,
                            "--grid: expected PxQ (e.g. 2x1), got '" + std::string(value) + "'",
                            accept);
            o.P = static_cast<int>(p);
            o.Q = static_cast<int>(q);
        } else {
            usage_error(prog, "unknown option '" + name + "'", accept);
        }
    }
    if (!have_n) usage_error(prog, "--n is required", accept);
    if ((accept & kOp) && o.op.empty()) usage_error(prog, "--op is required", accept);
    return o;
}

// P x Q = ranks; the grid given with --grid must match, else the most square one (P >= Q).
// Returns false (with a message from rank 0) when --grid does not fit the job.
inline bool resolve_grid(Options& o, int ranks, int rank, const char* prog) {
    if (o.P == 0) {
        int q = static_cast<int>(std::sqrt(static_cast<double>(ranks)));
        while (q > 1 && ranks % q != 0)
            --q;
        o.Q = std::max(q, 1);
        o.P = ranks / o.Q;
        return true;
    }
    if (o.P * o.Q != ranks) {
        if (rank == 0)
            std::fprintf(stderr, "%s: error: --grid %dx%d needs %d ranks, the job has %d\n", prog,
                         o.P, o.Q, o.P * o.Q, ranks);
        return false;
    }
    return true;
}

// ---- matrices (the generator shared with Cascade's apps) ------------------------------------

using cascade_bench::check_x;
using cascade_bench::gemm_a;
using cascade_bench::gemm_b;
using cascade_bench::spd_entry;

// GEMM check, independent of any BLAS: compare y = C x (C gathered as partial products from
// its owners) with A (B x) evaluated from the generator. The relative residual
// ||C x - A (B x)||_2 / (||A||_F ||B||_F ||x||_2) is ~1e-16 for a correct product; a wrong or
// missing tile moves it to ~1e-3 or more (x is random, so errors cannot cancel by accident).
inline double gemm_check_residual(std::uint64_t seed, int n, const std::vector<double>& cx) {
    std::vector<double> x(n), bx(n, 0.0);
    double xx = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; ++i) {
        x[i] = check_x(seed, i);
        xx += x[i] * x[i];
    }
    for (int i = 0; i < n; ++i) {
        double s = 0;
        for (int j = 0; j < n; ++j) {
            const double b = gemm_b(seed, i, j);
            bb += b * b;
            s += b * x[j];
        }
        bx[i] = s;
    }
    double err = 0;
    for (int i = 0; i < n; ++i) {
        double s = 0;
        for (int j = 0; j < n; ++j) {
            const double a = gemm_a(seed, i, j);
            aa += a * a;
            s += a * bx[j];
        }
        err += (cx[i] - s) * (cx[i] - s);
    }
    return std::sqrt(err) / (std::sqrt(aa) * std::sqrt(bb) * std::sqrt(xx));
}

// ---- timing and results ---------------------------------------------------------------------

using cascade_bench::median;
using cascade_bench::now_seconds;

inline double cholesky_gflop(int n) {
    return static_cast<double>(n) * n * n / 3.0 * 1e-9;
}
inline double gemm_gflop(int n) {
    return 2.0 * n * n * n * 1e-9;
}

constexpr double kResidualTolerance = 1e-12;

// The machine-readable last line, printed by rank 0. nb < 0: null (whole-matrix OpenBLAS);
// residual < 0: null (not checked).
inline void print_result(const char* app, const char* system, int n, int nb, int ranks, int threads,
                         const Options& o, const std::vector<double>& runs, double gflop,
                         double residual) {
    const double sec = median(runs);
    cascade_bench::Record r;
    r.add("app", app).add("system", system).add("n", n);
    if (nb < 0)
        r.add_null("nb");
    else
        r.add("nb", nb);
    r.add("ranks", ranks).add("threads", threads);
    if (o.P > 0) r.add("grid", std::to_string(o.P) + "x" + std::to_string(o.Q));
    r.add("seconds", sec).add("gflops", sec > 0 ? gflop / sec : 0.0).add("runs", runs);
    if (residual < 0)
        r.add_null("residual");
    else
        r.add("residual", residual, "%.3e");
    r.print_result();
}

// Human-readable check verdict; returns whether it passed.
inline bool report_check(double residual) {
    const bool ok = std::isfinite(residual) && residual < kResidualTolerance;
    std::printf("check: relative residual %.3e (%s, tolerance %.0e)\n", residual,
                ok ? "ok" : "FAILED", kResidualTolerance);
    std::fflush(stdout);
    return ok;
}

}  // namespace baselines
