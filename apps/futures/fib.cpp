// Fibonacci with futures (the thesis's first example): fib(n) = fib(n-1) + fib(n-2), each
// call above the cut-off an async placed round robin over the ranks, below it plain
// recursion. Waiting callers keep running other calls. Checks the answer.
#include <CLI/CLI.hpp>
#include <cascade/cascade.hpp>
#include <chrono>
#include <cstdio>
#include <vector>

#include "common/record.hpp"
#include "common/stats.hpp"

namespace {
long fib_seq(int n) {
    return n < 2 ? n : fib_seq(n - 1) + fib_seq(n - 2);
}
long fib_exact(int n) {
    long a = 0, b = 1;
    for (int i = 0; i < n; ++i) {
        const long c = a + b;
        a = b;
        b = c;
    }
    return a;
}
}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Fibonacci with cascade futures"};
    int n = 35, cutoff = 25, threads = 2, repeat = 1;
    app.add_option("--n", n, "compute fib(n)")->check(CLI::Range(0, 90));
    app.add_option("--cutoff", cutoff, "below this, plain recursion")->check(CLI::Range(2, 90));
    app.add_option("--threads", threads, "workers per rank")->check(CLI::Range(1, 256));
    app.add_option("--repeat", repeat, "runs (median reported)")->check(CLI::Range(1, 100));
    CLI11_PARSE(app, argc, argv);

    cascade::Communicator comm;
    cascade::Threadpool tp(threads, &comm);
    cascade::Futures fx(tp, &comm);
    cascade::AsyncFn<long(int)> fib;
    fib = fx.make_async(
        [&](int& k) -> long {
            if (k < cutoff) return fib_seq(k);
            auto a = cascade::async(cascade::any, fib, k - 1);
            auto b = cascade::async(cascade::here, fib, k - 2);
            return a.get() + b.get();
        },
        "fib");

    int failed = 0;
    std::vector<double> runs;
    if (comm.rank() == 0) {
        for (int r = 0; r < repeat; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            const long got = cascade::async(cascade::here, fib, n).get();
            runs.push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            if (got != fib_exact(n)) {
                std::fprintf(stderr, "fib: FAILED: fib(%d) = %ld, expected %ld\n", n, got,
                             fib_exact(n));
                failed = 1;
            }
        }
    }
    tp.join();
    if (comm.rank() == 0) {
        std::printf("fib(%d) = %ld, cut-off %d, %d rank(s) x %d thread(s): %.4f s, %s\n", n,
                    fib_exact(n), cutoff, comm.ranks(), threads, cascade_bench::median(runs),
                    failed ? "FAILED" : "ok");
        cascade_bench::Record()
            .add("app", "fib")
            .add("system", "cascade")
            .add("n", n)
            .add("cutoff", cutoff)
            .add("ranks", comm.ranks())
            .add("threads", threads)
            .add("seconds", cascade_bench::median(runs))
            .add("runs", runs)
            .add("remote_calls", static_cast<long long>(fx.remote_calls()))
            .add("ok", failed ? "no" : "yes")
            .print_result();
    }
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any_failed;
}
