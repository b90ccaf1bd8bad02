// OpenMP-tasks baseline of the overhead micro-benchmarks (TaskTorrent paper, section III-A),
// same work and same arguments as overhead_cascade. Insertion is always timed: one thread
// (omp single) creates the tasks while the others run them.
//
//   nodeps: n independent "omp task"s spinning s us.
//   deps:   32 x C tasks; task (i,j) has depend(in:) on x[(i+k) % 32][j-1], k < E, and
//           depend(out:) on x[i][j]. E = 1, 4 and 8 are written out (any other E is refused).
#include <omp.h>

#include <vector>

#include "common.hpp"

namespace {

using bench::Config;

bench::Timed run_nodeps(const Config& c) {
    const std::uint64_t iters = bench::spin_iters(c);
    const long n = c.n;
    const bench::Stopwatch sw;
#pragma omp parallel num_threads(c.threads)
#pragma omp single
    {
        for (long k = 0; k < n; ++k) {
#pragma omp task firstprivate(iters)
            bench::spin(iters);
        }
    }
    return sw.stop();
}

bench::Timed run_deps(const Config& c) {
    const std::uint64_t iters = bench::spin_iters(c);
    const int E = c.deps, C = static_cast<int>(c.n), R = bench::kRows;
    // One dependence object per task, so the only edges are the ones we ask for.
    std::vector<char> x(static_cast<std::size_t>(R) * static_cast<std::size_t>(C));
    char* base = x.data();
    const bench::Stopwatch sw;
#pragma omp parallel num_threads(c.threads)
#pragma omp single
    {
        for (int j = 0; j < C; ++j) {
            for (int i = 0; i < R; ++i) {
                char* out = base + static_cast<std::size_t>(j) * R + i;
                (void)out;  // GCC 12 does not count a use in a depend clause
                if (j == 0) {
#pragma omp task firstprivate(iters) depend(out : out[0])
                    bench::spin(iters);
                    continue;
                }
                const char* p[8];
                for (int k = 0; k < E; ++k)
                    p[k] = base + static_cast<std::size_t>(j - 1) * R + (i + k) % R;
                // clang-format off
                switch (E) {
                    case 1:
#pragma omp task firstprivate(iters) depend(in: p[0][0]) depend(out: out[0])
                        bench::spin(iters);
                        break;
                    case 4:
#pragma omp task firstprivate(iters) depend(in: p[0][0], p[1][0], p[2][0], p[3][0]) \
    depend(out: out[0])
                        bench::spin(iters);
                        break;
                    case 8:
#pragma omp task firstprivate(iters) \
    depend(in: p[0][0], p[1][0], p[2][0], p[3][0], p[4][0], p[5][0], p[6][0], p[7][0]) \
    depend(out: out[0])
                        bench::spin(iters);
                        break;
                    default:
                        break;
                }
                // clang-format on
            }
        }
    }
    return sw.stop();
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Config c = bench::parse_args(argc, argv);
        if (c.calibrate_only) {
            bench::print_calibration(c);
            return 0;
        }
        if (c.bench != "nodeps" && c.bench != "deps")
            throw std::runtime_error("overhead_openmp runs only nodeps and deps");
        if (c.bench == "deps" && c.deps != 1 && c.deps != 4 && c.deps != 8)
            throw std::runtime_error("overhead_openmp: --deps must be 1, 4 or 8");
        c.insertion = "timed";
        omp_set_num_threads(c.threads);
        const bench::Samples s =
            bench::measure(c, [&c] { return c.bench == "nodeps" ? run_nodeps(c) : run_deps(c); });
        bench::result_record("openmp", c, s).print();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "overhead_openmp: %s\n", e.what());
        return 1;
    }
    return 0;
}
