// A program on one process using Cascade's core alone (no MPI): a task graph on a pool of 2
// threads, traced. Usage: app_core [trace.json]; with a path, the Chrome trace of the run is
// written there at exit. Returns 0 when the result is right, 1 otherwise.
#include <cascade/core.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#ifdef MPI_VERSION
#error "<cascade/core.hpp> must not include <mpi.h>"
#endif

int main(int argc, char** argv) {
    try {
        if (argc > 1) cascade::trace::configure({.trace_path = argv[1]});
        cascade::Threadpool tp(2);

        // Prefix sums in a diamond: task (i, j) adds its two parents (i-1, j-1) and (i-1, j),
        // a Pascal triangle of depth D; row D then holds the binomial coefficients of D.
        constexpr int D = 20;
        std::vector<std::vector<long>> row(D + 1);
        for (int i = 0; i <= D; ++i)
            row[i].assign(i + 1, 0);
        cascade::Taskflow<std::pair<int, int>> pascal(&tp, "pascal");
        pascal
            .set_indegree([](std::pair<int, int> k) {
                auto [i, j] = k;
                return i == 0 || j == 0 || j == i ? 1 : 2;
            })
            .set_mapping([&](std::pair<int, int> k) { return k.second % tp.workers(); })
            .set_task([&](std::pair<int, int> k) {
                auto [i, j] = k;
                row[i][j] = i == 0 || j == 0 || j == i ? 1 : row[i - 1][j - 1] + row[i - 1][j];
            })
            .set_fulfill([&](std::pair<int, int> k) {
                auto [i, j] = k;
                if (i == D) return;
                pascal.fulfill_promise({i + 1, j});
                pascal.fulfill_promise({i + 1, j + 1});
            })
            .set_name([](std::pair<int, int> k) {
                return "pascal " + std::to_string(k.first) + "," + std::to_string(k.second);
            });
        pascal.fulfill_promise({0, 0});
        tp.join();

        long sum = 0;
        for (long v : row[D])
            sum += v;
        const bool ok = sum == (1L << D) && row[D][D / 2] == 184756;
        std::printf("Cascade %s core: row %d sums to %ld (expected %ld) -> %s\n",
                    cascade::version_string, D, sum, 1L << D, ok ? "OK" : "WRONG");
        return ok ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
