// Cascade side of the overhead micro-benchmarks (TaskTorrent paper, section III-A).
//
//   nodeps: n independent tasks spinning s us, task k mapped to thread k % T. "untimed"
//           insertion fulfills all n promises before tp.start() and times start()+join();
//           "timed" times start(), the insertion loop and join(); "bulk" is timed with one
//           fulfill_promises call over the n keys instead of the loop.
//   deps:   32 rows x C columns; task (i,j), j >= 1, waits for ((i+k) % 32, j-1), k < E, so
//           each task fulfills (i-k mod 32, j+1) when done. Column 0 is seeded inside the
//           timed region.
//   raw:    the nodeps work on T plain std::threads (no runtime): the best any runtime can do.
//   idle:   CPU use of a started 2-thread pool with nothing to do, fresh and after some work.
//
// Prints one JSON object per measurement (see common.hpp for the arguments).
#include <atomic>
#include <ranges>
#include <thread>
#include <tuple>

#include "cascade/cascade.hpp"
#include "common.hpp"

namespace {

using bench::Config;

// Tasks run and stolen, summed over the repeats (diagnostics: a steal moves a task off the
// thread its mapping chose).
std::uint64_t g_tasks_run = 0, g_tasks_stolen = 0;

void count(const cascade::Threadpool& tp) {
    g_tasks_run += tp.stats().tasks_run;
    g_tasks_stolen += tp.stats().tasks_stolen;
}

cascade::ThreadpoolOptions bench_options() {
    cascade::ThreadpoolOptions o;
    o.start = false;
    o.checked = false;  // measure the production path whatever CASCADE_CHECK says
    return o;
}

// Times a run: `insert` seeds the graph, before start() (untimed insertion) or after it.
template <class Insert>
bench::Timed time_run(const Config& c, cascade::Threadpool& tp, Insert insert) {
    const bool untimed = c.insertion == "untimed";
    if (untimed) insert();
    const bench::Stopwatch sw;
    tp.start();
    if (!untimed) insert();
    tp.join();
    const bench::Timed t = sw.stop();
    count(tp);
    return t;
}

bench::Timed run_nodeps(const Config& c) {
    const std::uint64_t iters = bench::spin_iters(c);
    const int T = c.threads;
    cascade::Threadpool tp(T, bench_options());
    cascade::Taskflow<int> tf(&tp, "nodeps");
    tf.set_task([iters](int) { bench::spin(iters); })
        .set_indegree([](int) { return 1; })
        .set_mapping([T](int k) { return k % T; });
    const int n = static_cast<int>(c.n);
    if (c.insertion == "bulk")
        return time_run(c, tp, [&] { tf.fulfill_promises(std::views::iota(0, n)); });
    return time_run(c, tp, [&] {
        for (int k = 0; k < n; ++k)
            tf.fulfill_promise(k);
    });
}

bench::Timed run_deps(const Config& c) {
    using K = std::tuple<int, int>;
    const std::uint64_t iters = bench::spin_iters(c);
    const int T = c.threads, E = c.deps, C = static_cast<int>(c.n), R = bench::kRows;
    cascade::Threadpool tp(T, bench_options());
    cascade::Taskflow<K> tf(&tp, "deps");
    tf.set_task([iters](K) { bench::spin(iters); })
        .set_fulfill([&tf, E, C, R](K k) {
            const auto [i, j] = k;
            if (j + 1 >= C) return;
            for (int d = 0; d < E; ++d)
                tf.fulfill_promise(K{(i - d + R) % R, j + 1});
        })
        .set_indegree([E](K k) { return std::get<1>(k) == 0 ? 1 : E; })
        .set_mapping([T](K k) { return std::get<0>(k) % T; });
    return time_run(c, tp, [&] {
        for (int i = 0; i < R; ++i)
            tf.fulfill_promise(K{i, 0});
    });
}

bench::Timed run_raw(const Config& c) {
    const std::uint64_t iters = bench::spin_iters(c);
    const int T = c.threads;
    const long n = c.n;
    std::vector<std::thread> threads;
    const bench::Stopwatch sw;
    for (int t = 0; t < T; ++t)
        threads.emplace_back([=] {
            for (long k = t; k < n; k += T)
                bench::spin(iters);
        });
    for (auto& th : threads)
        th.join();
    return sw.stop();
}

// CPU use of the process over `seconds` of wall time, in percent of one core.
double cpu_percent_over(double seconds) {
    const bench::Stopwatch sw;
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const bench::Timed t = sw.stop();
    return 100.0 * t.cpu / t.wall;
}

void run_idle(const Config& c) {
    cascade::ThreadpoolOptions o = bench_options();
    o.start = true;
    cascade::Threadpool tp(c.threads, o);
    const double fresh = cpu_percent_over(1.0);
    // A burst of work, then idle again (a pool waiting for messages between phases).
    std::atomic<int> done{0};
    cascade::Taskflow<int> tf(&tp, "burst");
    tf.set_task([&done](int) { done.fetch_add(1); }).set_mapping([&c](int k) {
        return k % c.threads;
    });
    for (int k = 0; k < 1000; ++k)
        tf.fulfill_promise(k);
    while (done.load() < 1000)
        std::this_thread::yield();
    const double after = cpu_percent_over(1.0);
    tp.join();
    for (const auto& [phase, percent] : {std::pair{"fresh", fresh}, std::pair{"after_work", after}})
        cascade_bench::Record()
            .add("bench", "idle")
            .add("system", "cascade")
            .add("threads", c.threads)
            .add("phase", phase)
            .add("seconds", 1)
            .add("cpu_percent", percent)
            .print();
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Config c = bench::parse_args(argc, argv);
        if (c.calibrate_only) {
            bench::print_calibration(c);
            return 0;
        }
        if (c.bench == "idle") {
            run_idle(c);
            return 0;
        }
        const bench::Samples s = bench::measure(c, [&c] {
            if (c.bench == "nodeps") return run_nodeps(c);
            if (c.bench == "deps") return run_deps(c);
            return run_raw(c);
        });
        if (c.bench == "raw") {
            c.bench = "nodeps";
            c.insertion = "none";
            bench::result_record("raw", c, s).print();
        } else {
            const double stolen =
                g_tasks_run ? static_cast<double>(g_tasks_stolen) / static_cast<double>(g_tasks_run)
                            : 0.0;
            bench::result_record("cascade", c, s).add("stolen_fraction", stolen).print();
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "overhead_cascade: %s\n", e.what());
        return 1;
    }
    return 0;
}
