// Parallel quicksort with futures (the thesis's second example): partition, sort one part
// with an async placed round robin over the ranks (the part travels by value, as in the
// thesis) and the other here, concatenate; below the cut-off std::sort. Checks the answer.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cascade/cascade.hpp>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "common/record.hpp"
#include "common/stats.hpp"

int main(int argc, char** argv) {
    CLI::App app{"Quicksort with cascade futures"};
    long n = 1000000, cutoff = 50000;
    int threads = 2, repeat = 1;
    unsigned seed = 1;
    app.add_option("--n", n, "number of doubles")->check(CLI::Range(1L, 1L << 31));
    app.add_option("--cutoff", cutoff, "below this, std::sort")->check(CLI::Range(1L, 1L << 31));
    app.add_option("--threads", threads, "workers per rank")->check(CLI::Range(1, 256));
    app.add_option("--repeat", repeat, "runs (median reported)")->check(CLI::Range(1, 100));
    app.add_option("--seed", seed, "random seed");
    CLI11_PARSE(app, argc, argv);

    cascade::Communicator comm;
    cascade::Threadpool tp(threads, &comm);
    cascade::Futures fx(tp, &comm);
    cascade::AsyncFn<std::vector<double>(std::vector<double>)> qs;
    qs = fx.make_async(
        [&](std::vector<double>& v) -> std::vector<double> {
            if (static_cast<long>(v.size()) <= cutoff) {
                std::sort(v.begin(), v.end());
                return std::move(v);
            }
            // median of three as the pivot; elements equal to it stay in the middle
            const double a = v.front(), b = v[v.size() / 2], c = v.back();
            const double pivot = std::max(std::min(a, b), std::min(std::max(a, b), c));
            auto lt = std::partition(v.begin(), v.end(), [&](double x) { return x < pivot; });
            auto gt = std::partition(lt, v.end(), [&](double x) { return x <= pivot; });
            auto left = cascade::async(cascade::any, qs, std::vector<double>(v.begin(), lt));
            auto right = cascade::async(cascade::here, qs, std::vector<double>(gt, v.end()));
            std::vector<double> out = left.get();
            out.insert(out.end(), lt, gt);
            const auto r = right.get();
            out.insert(out.end(), r.begin(), r.end());
            return out;
        },
        "qsort");

    int failed = 0;
    std::vector<double> runs;
    if (comm.rank() == 0) {
        std::mt19937_64 gen(seed);
        std::uniform_real_distribution<double> dist(-1.0, 1.0);
        std::vector<double> input(static_cast<std::size_t>(n));
        for (auto& x : input)
            x = dist(gen);
        std::vector<double> expect = input;
        std::sort(expect.begin(), expect.end());
        for (int r = 0; r < repeat; ++r) {
            std::vector<double> copy = input;
            const auto t0 = std::chrono::steady_clock::now();
            const auto sorted = cascade::async(cascade::here, qs, std::move(copy)).get();
            runs.push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            if (sorted != expect) {
                std::fprintf(stderr, "qsort: FAILED: result is not the sorted input\n");
                failed = 1;
            }
        }
    }
    tp.join();
    if (comm.rank() == 0) {
        std::printf("qsort of %ld doubles, cut-off %ld, %d rank(s) x %d thread(s): %.4f s, %s\n", n,
                    cutoff, comm.ranks(), threads, cascade_bench::median(runs),
                    failed ? "FAILED" : "ok");
        cascade_bench::Record()
            .add("app", "qsort")
            .add("system", "cascade")
            .add("n", static_cast<long long>(n))
            .add("cutoff", static_cast<long long>(cutoff))
            .add("ranks", comm.ranks())
            .add("threads", threads)
            .add("seconds", cascade_bench::median(runs))
            .add("runs", runs)
            .add("ok", failed ? "no" : "yes")
            .print_result();
    }
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any_failed;
}
