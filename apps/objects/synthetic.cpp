// PREMA's synthetic load-balancing benchmark (thesis §3.3.3): 10 mobile objects per worker,
// 20 % of them heavy (2.5x the work of a light one), each running a fixed number of handlers.
// Shapes of work: "upfront" (every handler of every object queued at the start), "chain" (one
// request per object at a time: each handler invokes its own object for the next step),
// "fanout" (each handler invokes another object, mostly on another rank: the work flows from
// object to object) and "irregular" (handler times from 0.2x to 1.8x at random, even objects
// chained and odd ones queued up front: a mixture).
// Placements: "concentrated" (the heavy objects piled on the first quarter of the ranks, at
// least one, which carry 1.6x the mean work: twice the others' where 4 divides the ranks, like
// the thesis's MPI run with static max/min busy ~ 2, and four times the other's at 2 ranks) and
// "round_robin" (every rank gets the same mix: already balanced). Work is a calibrated spin
// (one rate for all ranks, measured on rank 0 while the others wait: the same iterations for
// a handler wherever it runs), or with --fake-work a sleep, so that each rank stands for one core
// however many ranks share this machine's cores. Prints the time, the ideal (total work / workers),
// the busy time of the most and least loaded rank, when the last handler ended (the rest of the
// time is completion), and checks that every handler ran once (a checksum per object that does not
// depend on where it ran).
//
//   mpiexec -n 8 --oversubscribe objects_synthetic --fake-work --policy diffusion
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cascade/balance/balancer.hpp>
#include <cascade/cascade.hpp>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "common/record.hpp"
#include "common/spin_shared.hpp"

namespace {

struct Unit {
    std::uint32_t index = 0;  // global object number
    std::uint32_t done = 0;   // handlers run
    std::uint64_t sum = 0;    // checksum of the handlers run, in order
    template <class Archive>
    void serialize(Archive& ar) {
        ar(index, done, sum);
    }
};

std::uint64_t mix(std::uint64_t s, std::uint64_t v) {
    return (s ^ v) * 0x100000001b3ULL + (v << 7);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"PREMA's synthetic benchmark: light and heavy mobile objects, balanced or not"};
    int per_worker = 10, handlers = 20, threads = 1;
    double heavy_fraction = 0.2, heavy_factor = 2.5, light_ms = 2.0, period_ms = 2.0;
    double balanced_ratio = cascade::BalanceOptions{}.balanced_ratio;
    double sustained_ratio = cascade::BalanceOptions{}.sustained_ratio;
    double sustain_ms = cascade::BalanceOptions{}.sustain_s * 1e3;
    double spin_rate = 0;
    bool print_spin_rate = false;
    std::string placement = "concentrated", policy = "diffusion", shape = "upfront";
    bool fake = false, detail = false;
    app.add_option("--objects-per-worker", per_worker, "mobile objects per worker thread");
    app.add_option("--handlers", handlers, "handlers run on each object");
    app.add_option("--light-ms", light_ms, "work of one handler on a light object (ms)");
    app.add_option("--heavy-fraction", heavy_fraction, "fraction of heavy objects");
    app.add_option("--heavy-factor", heavy_factor, "work of a heavy object / a light one");
    app.add_option("--threads", threads, "worker threads per rank");
    app.add_option("--placement", placement, "concentrated | round_robin")
        ->check(CLI::IsMember({"concentrated", "round_robin"}));
    app.add_option("--policy", policy, "static | diffusion | master_worker | rotate")
        ->check(CLI::IsMember({"static", "diffusion", "master_worker", "rotate"}));
    app.add_option("--shape", shape, "upfront | chain | fanout | irregular")
        ->check(CLI::IsMember({"upfront", "chain", "fanout", "irregular"}));
    app.add_option("--period-ms", period_ms, "balancing period (ms)");
    app.add_option("--balanced-ratio", balanced_ratio,
                   "loads within this ratio are balanced (BalanceOptions::balanced_ratio)");
    app.add_option("--sustained-ratio", sustained_ratio,
                   "an imbalance over this ratio that lasts is moved "
                   "(BalanceOptions::sustained_ratio; 0: off)");
    app.add_option("--sustain-ms", sustain_ms,
                   "how long it must last (BalanceOptions::sustain_s, in ms)");
    app.add_flag("--fake-work", fake, "sleep instead of spinning (each rank stands for a core)");
    app.add_option("--spin-rate", spin_rate,
                   "spin iterations per second (default: measured on rank 0 at the start)")
        ->check(CLI::NonNegativeNumber);
    app.add_flag("--print-spin-rate", print_spin_rate,
                 "measure the spin rate, print it (\"spin_rate R\") and exit");
    app.add_flag("--detail", detail,
                 "one more line per rank: busy time, handlers run, migrations, when its last "
                 "handler ended");
    CLI11_PARSE(app, argc, argv);

    cascade::Communicator comm;
    cascade::Threadpool tp(threads, &comm, 0, "synthetic");
    cascade::Objects objs(tp, comm);
    cascade::Balancer bal(objs, cascade::make_policy(policy == "static" ? "none" : policy),
                          {.period_s = period_ms * 1e-3,
                           .balanced_ratio = balanced_ratio,
                           .sustained_ratio = sustained_ratio,
                           .sustain_s = sustain_ms * 1e-3});
    const int me = comm.rank(), n = comm.ranks();
    const int workers = n * threads;
    const int n_objects = per_worker * workers;
    const int n_heavy = static_cast<int>(heavy_fraction * n_objects + 0.5);
    auto weight = [&](int i) { return i < n_heavy ? heavy_factor : 1.0; };
    // Work of handler number `k` (from 1) of object i, in light handlers.
    const bool irregular = shape == "irregular";
    auto cost = [&](int i, std::uint32_t k) {
        if (!irregular) return weight(i);
        const std::uint64_t h = mix(std::uint64_t(i) * 7919 + 17, k) * 0x9e3779b97f4a7c15ULL;
        return weight(i) * (0.2 + 1.6 * double(h >> 11) / double(1ULL << 53));
    };
    // Chained objects: the others have every handler queued up front.
    auto chained = [&](int i) {
        return shape == "chain" || shape == "fanout" || (irregular && i % 2 == 0);
    };

    // Placement: rank of each object (same computation on every rank).
    std::vector<int> where(n_objects);
    if (placement == "round_robin") {  // heavy ones first, dealt like cards: the same mix each
        for (int i = 0; i < n_objects; ++i)
            where[i] = i % n;
    } else {  // greedy by weight toward targets a (first quarter of the ranks) : 1 (the rest)
        // a such that the first quarter carries 1.6x the mean: a = 2 where 4 divides the
        // ranks, a = 4 at 2 ranks (a 2 : 1 split of two ranks would be only 1.33x the mean).
        const int k = std::max(1, n / 4);
        const double a = n > k ? 1.6 * (n - k) / (n - 1.6 * k) : 1.0;
        std::vector<double> load(n, 0.0);
        for (int i = 0; i < n_objects; ++i) {
            int best = 0;
            for (int r = 1; r < n; ++r)
                if (load[r] / (r < k ? a : 1.0) < load[best] / (best < k ? a : 1.0)) best = r;
            where[i] = best;
            load[best] += weight(i);
        }
    }

    // One rate for every rank (measured on rank 0 while the others wait): each handler is
    // the same work wherever it runs.
    // A runner comparing configurations measures it once and passes it to each (--spin-rate):
    // then every run of a comparison does the same work.
    const double iters_per_s =
        fake ? 0
             : (spin_rate > 0 ? spin_rate
                              : cascade_bench::spin_iters_per_second_shared(MPI_COMM_WORLD));
    if (print_spin_rate) {
        if (me == 0) std::printf("spin_rate %.6g\n", iters_per_s);
        return 0;
    }
    // Every object's global name (each rank numbers its objects from 1 in creation order).
    std::vector<cascade::mobile_ptr<Unit>> all(n_objects);
    {
        std::vector<std::uint64_t> next_id(n, 0);
        for (int i = 0; i < n_objects; ++i)
            all[i] =
                cascade::mobile_ptr<Unit>(cascade::ObjectKey{where[i], 0, ++next_id[where[i]]});
    }
    std::atomic<double> busy{0}, last_end{0};  // last_end: when the last handler here ended
    std::atomic<long> ran{0};                  // handlers run here
    cascade::Handler<Unit, void, int>* run = nullptr;
    run = objs.make_handler<Unit>(
        [&](Unit& u, int& left) {
            const double t0 = cascade_bench::now_seconds();
            const double s = light_ms * 1e-3 * cost(int(u.index), u.done + 1);
            if (fake)
                std::this_thread::sleep_for(std::chrono::duration<double>(s));
            else
                cascade_bench::spin(static_cast<std::uint64_t>(s * iters_per_s));
            ++u.done;
            u.sum = mix(u.sum, u.index * 1000003ULL + u.done);
            if (left > 1) {  // the next step: this object's (chain) or the next one's (fanout)
                const int next = shape == "fanout" ? (int(u.index) + n_objects / 2 + 1) % n_objects
                                                   : int(u.index);
                run->invoke(all[next], left - 1);
            }
            const double t1 = cascade_bench::now_seconds();
            busy.fetch_add(t1 - t0, std::memory_order_relaxed);
            ran.fetch_add(1, std::memory_order_relaxed);
            double seen = last_end.load(std::memory_order_relaxed);
            while (seen < t1 && !last_end.compare_exchange_weak(seen, t1)) {
            }
        },
        {.name = "unit"});

    std::vector<int> mine;
    for (int i = 0; i < n_objects; ++i)
        if (where[i] == me) {
            objs.create<Unit>(Unit{std::uint32_t(i), 0, 0});
            mine.push_back(i);
        }
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = cascade_bench::now_seconds();
    tp.insert([&] {  // up front: every handler of every local object, interleaved; chained:
                     // the first step of each (a fan-out's token starts at its object)
        for (int h = 0; h < handlers; ++h)
            for (int i : mine)
                if (!chained(i))
                    run->invoke(all[i], 0);
                else if (h == 0)
                    run->invoke(all[i], handlers);
    });
    tp.join();
    const double mine_s = cascade_bench::now_seconds() - t0;
    const double drained_s = last_end.load() > 0 ? last_end.load() - t0 : 0.0;

    // Check: every object ran its handlers once each, in order (the checksum says so).
    long bad = 0, done = 0;
    for (int r = 0; r < n; ++r) {
        std::uint64_t id = 0;
        for (int i = 0; i < n_objects; ++i) {
            if (where[i] != r) continue;
            ++id;
            if (Unit* u = objs.local(cascade::mobile_ptr<Unit>(cascade::ObjectKey{r, 0, id}))) {
                std::uint64_t want = 0;
                for (std::uint32_t h = 1; h <= std::uint32_t(handlers); ++h)
                    want = mix(want, std::uint32_t(i) * 1000003ULL + h);
                done += u->done;
                bad += u->index != std::uint32_t(i) || u->sum != want;
            }
        }
    }
    long all_done = 0, all_bad = 0, migrations = long(bal.migrations());
    long all_migrations = 0;
    double seconds = 0, b = busy.load(), max_busy = 0, min_busy = 0, drained = 0;
    MPI_Allreduce(&done, &all_done, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&migrations, &all_migrations, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&mine_s, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&drained_s, &drained, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&b, &max_busy, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&b, &min_busy, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    double total_work = 0;
    for (int i = 0; i < n_objects; ++i)
        for (int k = 1; k <= handlers; ++k)
            total_work += light_ms * 1e-3 * cost(i, std::uint32_t(k));
    const double ideal = total_work / workers;
    const bool ok = all_done == long(n_objects) * handlers && all_bad == 0;
    if (detail) {  // rank, busy s, handlers, migrations started, in, out, last end s, steps
        const auto st = objs.stats();
        const double row[8] = {double(me),
                               b,
                               double(ran.load()),
                               double(migrations),
                               double(st.migrations_in),
                               double(st.migrations_out),
                               drained_s,
                               double(bal.steps())};
        std::vector<double> rows(me == 0 ? 8 * std::size_t(n) : 0);
        MPI_Gather(row, 8, MPI_DOUBLE, rows.data(), 8, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (me == 0)
            for (int r = 0; r < n; ++r) {
                const double* x = &rows[8 * std::size_t(r)];
                std::printf(
                    "rank %2d: busy %.3f s, %4.0f handlers, %3.0f migrations started, %3.0f in, "
                    "%3.0f out, last handler ended at %.3f s, %5.0f balancing steps\n",
                    int(x[0]), x[1], x[2], x[3], x[4], x[5], x[6], x[7]);
            }
    }
    if (me == 0) {
        std::printf(
            "synthetic: %d ranks x %d threads, %d objects (%d heavy), %s, %s placement, %s, %s "
            "work: %.3f s (ideal %.3f s, %.2fx; last handler ended at %.3f s), busy max %.3f s "
            "min %.3f s, %ld migrations: %s\n",
            n, threads, n_objects, n_heavy, shape.c_str(), placement.c_str(), policy.c_str(),
            fake ? "sleep" : "spin", seconds, ideal, seconds / ideal, drained, max_busy, min_busy,
            all_migrations, ok ? "OK" : "WRONG");
        cascade_bench::Record()
            .add("bench", "synthetic")
            .add("shape", shape)
            .add("placement", placement)
            .add("policy", policy)
            .add("ranks", n)
            .add("threads", threads)
            .add("work", fake ? "sleep" : "spin")
            .add("seconds", seconds)
            .add("drained_seconds", drained)
            .add("ideal_seconds", ideal)
            .add("busy_max", max_busy)
            .add("busy_min", min_busy)
            .add("migrations", all_migrations)
            .add("objects", n_objects)
            .add("handlers", handlers)
            .add("light_ms", light_ms)
            .add("ok", ok)
            .print_result();
    }
    return ok ? 0 : 1;
}
