// The TaskTorrent paper's dependency benchmark (section III-A2), distributed: 32 rows x C
// columns of tasks; task (i, j) waits for ((i + k) mod 32, j - 1), k < E, and spins for
// `spin` us (a calibrated loop of plain iterations, no clock calls inside). Rows are split
// in contiguous blocks between ranks (2 ranks: rows 0-15 on rank 0, 16-31 on rank 1); every
// rank runs --threads workers (task (i, j) on worker i % threads). An edge that crosses
// ranks is one active message carrying the key of the task it fulfills.
//
//   efficiency = (32 C spin) / (wall * ranks * threads)
// wall: from an MPI_Barrier to the end of tp.join(), the maximum over ranks (column 0 is
// seeded inside the timed region). spin: the loop's speed is re-measured around every
// repeat on every rank (thread CPU clock) and averaged; efficiency_nominal uses the nominal
// spin. cpu_efficiency divides the spin work by the CPU time of all ranks (time lost to
// other processes does not count; the communication thread's polling does).
//
// efficiency_runs: every repeat's efficiency, in order. At E=4 and 1 us on 2 cores they
// spread from about 0.4 to 0.9, bunched at both ends (how the kernel shares the cores; within
// one job too), so compare builds by ranking the runs of alternating jobs, not by the ratio
// of two medians.
//
// comm_thread_*: the main thread (it seeds column 0, then drives MPI inside tp.join()), mean
// over ranks: CPU time / wall, voluntary switches (naps that slept) and involuntary ones per ms.
//
// Progress variants: join (the joining thread drives MPI and naps when idle, the default)
// and busy (diagnostic: the main thread calls comm.poll(tp) in a tight loop until done).
#include <atomic>
#include <thread>
#include <tuple>
#include <vector>

#include "cascade/cascade.hpp"
#include "common.hpp"

using namespace commbench;

int main(int argc, char** argv) {
    return guarded_main(argc, argv, "comm_deps", [](Args& a) {
        const std::vector<long> spins = a.list("spins", {1, 10, 100});
        const std::vector<long> deps = a.list("deps", {1, 4});
        const auto progress_modes = a.words("progress", "join");
        const auto busy_deps = a.list("busy-deps", {4});  // E values the busy mode runs for
        const double ideal_s = a.real("ideal-ms", 300) * 1e-3;
        const int repeats = static_cast<int>(a.num("repeats", 5));
        const int threads = static_cast<int>(a.num("threads", 1));
        const long max_cols = a.num("max-cols", 20000);
        a.check();

        constexpr int R = 32;
        cascade::Communicator comm;
        const int me = comm.rank(), n = comm.ranks();
        if (R % n != 0) throw std::runtime_error("the number of ranks must divide 32");
        const int rows_per_rank = R / n;
        auto owner = [rows_per_rank](int row) { return row / rows_per_rank; };
        cascade::Threadpool tp(threads, &comm, 0, "deps", false);

        using K = std::tuple<int, int>;
        cascade::Taskflow<K>* cur = nullptr;
        auto* edge = comm.make_active_msg(
            [&](int& i, int& j) {
                cur->fulfill_promise(K{i, j});
            },
            "deps_edge");

        // Spin speed (iterations per us, this rank), measured with all ranks measuring at
        // once: the run keeps every core busy, and a lone measurement runs a few percent
        // faster here (the host's clock boosts when the other core idles).
        auto rate_now = [](double ms, int trials) {
            MPI_Barrier(MPI_COMM_WORLD);
            return spin_rate(ms, trials);
        };
        const double rate0 = rate_now(2.0, 21);

        struct Rep {
            double wall, rate, cpu;
            ThreadUsage comm;  // the main thread: seeds column 0, then drives MPI in join()
        };
        auto once = [&](long spin_us, int E, long C, const std::string& mode, long& ams) {
            const auto iters =
                static_cast<std::uint64_t>(rate0 * static_cast<double>(spin_us) + 0.5);
            std::atomic<long> sent{0};
            cascade::Taskflow<K> tf(&tp, "deps");
            cur = &tf;
            tf.set_task([iters](K) { spin(iters); })
                .set_fulfill([&, E, C](K k) {
                    const auto [i, j] = k;
                    if (j + 1 >= C) return;
                    for (int d = 0; d < E; ++d) {
                        const int r = (i - d + R) % R;
                        if (owner(r) == me) {
                            tf.fulfill_promise(K{r, j + 1});
                        } else {
                            sent.fetch_add(1, std::memory_order_relaxed);
                            edge->send(owner(r), r, j + 1);
                        }
                    }
                })
                .set_indegree([E](K k) { return std::get<1>(k) == 0 ? 1 : E; })
                .set_mapping([threads](K k) { return std::get<0>(k) % threads; })
                .set_binding([](K) { return true; });
            const double rate_before = rate_now(1.0, 7);
            tp.start();
            std::this_thread::sleep_for(std::chrono::milliseconds(2));  // workers asleep
            MPI_Barrier(MPI_COMM_WORLD);
            const double c0 = process_cpu_s();
            const ThreadUsage u0 = ThreadUsage::now();
            const double t0 = now_s();
            for (int i = me * rows_per_rank; i < (me + 1) * rows_per_rank; ++i)
                tf.fulfill_promise(K{i, 0});
            if (mode == "busy")
                while (comm.poll(tp) != cascade::PollResult::done) {
                }
            tp.join();
            const double wall = now_s() - t0;
            const double cpu = process_cpu_s() - c0;
            const ThreadUsage du = ThreadUsage::now() - u0;
            cur = nullptr;
            const double rate_after = rate_now(1.0, 7);
            ams = sent.load();
            return Rep{wall, 0.5 * (rate_before + rate_after), cpu, du};
        };

        for (long E : deps)
            for (long spin_us : spins)
                for (const auto& mode : progress_modes) {
                    if (mode == "busy" &&
                        std::find(busy_deps.begin(), busy_deps.end(), E) == busy_deps.end())
                        continue;
                    if (mode != "join" && mode != "busy")
                        throw std::runtime_error("unknown progress " + mode);
                    const long C = std::clamp(
                        static_cast<long>(ideal_s * 1e6 * threads / (rows_per_rank * spin_us)), 4L,
                        max_cols);
                    const double tasks = static_cast<double>(R) * static_cast<double>(C);
                    const auto iters = static_cast<double>(
                        static_cast<std::uint64_t>(rate0 * static_cast<double>(spin_us) + 0.5));
                    long ams = 0;
                    once(spin_us, static_cast<int>(E), std::min(C, 16L), mode, ams);  // warm-up
                    std::vector<double> effs, effs_nom, cpu_effs, walls, spin_act, comm_cpu,
                        comm_sleeps, comm_preempt;
                    long total_ams = 0;
                    for (int r = 0; r < repeats; ++r) {
                        const Rep x = once(spin_us, static_cast<int>(E), C, mode, ams);
                        const double wall = allreduce(x.wall, MPI_MAX);
                        const double cpu = allreduce(x.cpu, MPI_SUM);
                        // Spin time of one task on this rank, then the mean over ranks.
                        const double s_act = allreduce(iters / x.rate, MPI_SUM) / n;  // us
                        total_ams = static_cast<long>(allreduce(static_cast<double>(ams), MPI_SUM));
                        const double work = tasks * s_act * 1e-6;
                        walls.push_back(wall);
                        spin_act.push_back(s_act);
                        effs.push_back(work / (wall * n * threads));
                        effs_nom.push_back(tasks * static_cast<double>(spin_us) * 1e-6 /
                                           (wall * n * threads));
                        cpu_effs.push_back(work / cpu);
                        // Communication thread, mean over ranks: CPU share of the wall time,
                        // sleeps (naps) and involuntary switches per millisecond.
                        comm_cpu.push_back(allreduce(x.comm.cpu / x.wall, MPI_SUM) / n);
                        comm_sleeps.push_back(
                            allreduce(static_cast<double>(x.comm.nvcsw) / (x.wall * 1e3), MPI_SUM) /
                            n);
                        comm_preempt.push_back(
                            allreduce(static_cast<double>(x.comm.nivcsw) / (x.wall * 1e3),
                                      MPI_SUM) /
                            n);
                    }
                    if (me == 0)
                        Record()
                            .add("bench", "deps")
                            .add("system", "cascade")
                            .add("progress", mode)
                            .add("bytes", 8L)
                            .add("ranks", n)
                            .add("threads", threads)
                            .add("deps", E)
                            .add("spin_us", spin_us)
                            .add("rows", static_cast<long>(R))
                            .add("cols", C)
                            .add("n_tasks", static_cast<long>(tasks))
                            .add("cross_rank_ams", total_ams)
                            .add("efficiency", median(effs))
                            .add("efficiency_best", vmax(effs))
                            .add("efficiency_worst", vmin(effs))
                            .add("efficiency_runs", effs)
                            .add("efficiency_nominal", median(effs_nom))
                            .add("cpu_efficiency", median(cpu_effs))
                            .add("seconds", median(walls))
                            .add("spin_us_actual", median(spin_act))
                            .add("comm_thread_cpu_share", median(comm_cpu))
                            .add("comm_thread_sleeps_per_ms", median(comm_sleeps))
                            .add("comm_thread_preempted_per_ms", median(comm_preempt))
                            .add("repeats", static_cast<long>(repeats))
                            .print();
                }
        return 0;
    });
}
