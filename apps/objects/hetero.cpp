// PREMA's synthetic benchmark on heterogeneous ranks: the first --device-ranks ranks have a
// simulated device that runs the step kernel --speedup times faster than the cpu device every
// rank has. 10 mobile objects per rank, 20 % of them heavy (2.5x the work of a light one),
// each runs a chain of --steps steps: a step's handler submits the kernel (through a
// DeviceLoad, so the policies count it) and returns; the kernel's completion invokes the
// object's next step, wherever the object lives then. On a rank with a device the scheduler
// puts each kernel where it finishes first (the device, or the cpu device when the device's
// queue is long); elsewhere it runs on the cpu device (the pool's worker, slower). Kernels are
// sleeps (a sim device sleeps the modelled time; the cpu variant sleeps the cpu time), so
// each rank stands for one core and one device however many ranks share this machine.
//
// Placements: "round_robin" (every rank the same mix: static placement leaves the ranks
// without a device last), "hostless" (every object on the ranks without a device), "devices"
// (every object on the ranks with one: the others may take a little) and "proportional" (each
// rank work in proportion to its speed: already balanced).
// --uncounted submits the kernels to the Devices directly: the policies then see handlers
// that only submit kernels, and every rank looks idle. Prints the time, the ideal (the total
// work over the ranks' summed speed: a device rank counts --speedup + 1, its device and its
// cpu device; another rank 1), the share of the steps the device ranks ran, and checks that
// every object ran its steps once each, in order.
//
//   mpiexec -n 4 --oversubscribe objects_hetero --policy diffusion
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cascade/balance/device.hpp>
#include <cascade/cascade.hpp>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "common/record.hpp"
#include "common/spin.hpp"

namespace {

struct Unit {
    std::uint32_t index = 0;  // global object number
    std::uint32_t done = 0;   // steps run
    std::uint64_t sum = 0;    // checksum of the steps run, in order
    template <class Archive>
    void serialize(Archive& ar) {
        ar(index, done, sum);
    }
};

std::uint64_t mix(std::uint64_t s, std::uint64_t v) {
    return (s ^ v) * 0x100000001b3ULL + (v << 7);
}

double g_speedup = 8;  // set once from --speedup, before any kernel runs

// One step: sleeps its cpu time (scalar argument 0) on the cpu device; a sim device sleeps
// the modelled time instead, g_speedup less (the launch's x extent carries the nanoseconds).
cascade::Kernel& step_kernel() {
    static cascade::Kernel k("hetero_step");
    static const bool ready = [] {
        k.cpu([](cascade::KernelArgs& a) {
            std::this_thread::sleep_for(std::chrono::duration<double>(a.scalar<double>(0)));
        });
        k.model([](const cascade::Threads& t) { return double(t.global[0]) * 1e-9 / g_speedup; });
        return true;
    }();
    (void)ready;
    return k;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"PREMA's synthetic benchmark on ranks with and without a (simulated) device"};
    int per_rank = 10, steps = 20, device_ranks = -1;
    double heavy_fraction = 0.2, heavy_factor = 2.5, light_ms = 2.0, period_ms = 2.0;
    std::string placement = "round_robin", policy = "diffusion";
    bool uncounted = false;
    app.add_option("--objects-per-rank", per_rank, "mobile objects per rank");
    app.add_option("--steps", steps, "steps (kernels) run by each object");
    app.add_option("--light-ms", light_ms, "cpu time of one step of a light object (ms)");
    app.add_option("--heavy-fraction", heavy_fraction, "fraction of heavy objects");
    app.add_option("--heavy-factor", heavy_factor, "work of a heavy object / a light one");
    app.add_option("--speedup", g_speedup, "the sim device runs a step this much faster");
    app.add_option("--device-ranks", device_ranks,
                   "ranks with a sim device, the first ones (default: half, at least 1)");
    app.add_option("--placement", placement, "round_robin | hostless | devices | proportional")
        ->check(CLI::IsMember({"round_robin", "hostless", "devices", "proportional"}));
    app.add_option("--policy", policy, "static | diffusion | master_worker")
        ->check(CLI::IsMember({"static", "diffusion", "master_worker"}));
    app.add_option("--period-ms", period_ms, "balancing period (ms)");
    app.add_flag("--uncounted", uncounted,
                 "submit the kernels directly, not through a DeviceLoad (the policies do not "
                 "see them)");
    CLI11_PARSE(app, argc, argv);

    cascade::Communicator comm;
    cascade::Threadpool tp(1, &comm, 0, "hetero");
    cascade::Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    if (device_ranks < 0) device_ranks = std::max(1, n / 2);
    device_ranks = std::min(device_ranks, n);
    cascade::DevicesOptions dopts;
    if (me < device_ranks) {
        dopts.sim = 1;
        dopts.sim_options.run_kernels = false;  // sleeps Kernel::model's time
    }
    cascade::Devices devs(tp, dopts);
    cascade::Balancer bal(objs, cascade::make_policy(policy == "static" ? "none" : policy),
                          {.period_s = period_ms * 1e-3});
    cascade::DeviceLoad load(objs, devs);
    const int n_objects = per_rank * n;
    const int n_heavy = static_cast<int>(heavy_fraction * n_objects + 0.5);
    auto weight = [&](int i) { return i < n_heavy ? heavy_factor : 1.0; };

    // Placement: rank of each object (the same computation on every rank).
    std::vector<int> where(n_objects);
    const int hosts = n - device_ranks;  // ranks without a device
    std::vector<double> placed(n, 0.0);  // proportional: work placed on each rank so far
    auto speed_of = [&](int r) { return r < device_ranks ? g_speedup + 1 : 1.0; };
    for (int i = 0; i < n_objects; ++i) {
        if (placement == "proportional") {  // greedy: where it ends first
            int best = 0;
            for (int r = 1; r < n; ++r)
                if ((placed[r] + weight(i)) / speed_of(r) <
                    (placed[best] + weight(i)) / speed_of(best))
                    best = r;
            where[i] = best;
            placed[best] += weight(i);
        } else {
            where[i] = placement == "hostless" && hosts > 0 ? device_ranks + i % hosts
                       : placement == "devices"             ? i % device_ranks
                                                            : i % n;
        }
    }
    std::vector<cascade::mobile_ptr<Unit>> all(n_objects);
    {
        std::vector<std::uint64_t> next_id(n, 0);
        for (int i = 0; i < n_objects; ++i)
            all[i] =
                cascade::mobile_ptr<Unit>(cascade::ObjectKey{where[i], 0, ++next_id[where[i]]});
    }

    cascade::Kernel& kernel = step_kernel();
    std::atomic<long> ran{0};  // steps whose handler ran here
    cascade::Handler<Unit, void, int>* step = nullptr;
    step = objs.make_handler<Unit>(
        [&](Unit& u, int& left) {
            ++u.done;
            u.sum = mix(u.sum, u.index * 1000003ULL + u.done);
            ran.fetch_add(1, std::memory_order_relaxed);
            const double s = light_ms * 1e-3 * weight(int(u.index));
            const cascade::Launch launch{.threads = {cascade::Dims(static_cast<long>(s * 1e9))}};
            auto self = all[u.index];
            cascade::DeviceTask t =
                uncounted ? devs.submit(kernel, s, launch) : load.submit(self, kernel, s, launch);
            if (left > 1) t.then([step, self, left] { step->invoke(self, left - 1); });
        },
        {.name = "step"});

    std::vector<int> mine;
    for (int i = 0; i < n_objects; ++i)
        if (where[i] == me) {
            objs.create<Unit>(Unit{std::uint32_t(i), 0, 0});
            mine.push_back(i);
        }
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = cascade_bench::now_seconds();
    tp.insert([&] {
        for (int i : mine)
            step->invoke(all[i], steps);
    });
    tp.join();
    const double mine_s = cascade_bench::now_seconds() - t0;

    // Check: every object ran its steps once each, in order (the checksum says so).
    long bad = 0, done = 0;
    for (int i = 0; i < n_objects; ++i)
        if (Unit* u = objs.local(all[i])) {
            std::uint64_t want = 0;
            for (std::uint32_t h = 1; h <= std::uint32_t(steps); ++h)
                want = mix(want, std::uint32_t(i) * 1000003ULL + h);
            done += u->done;
            bad += u->index != std::uint32_t(i) || u->sum != want;
        }
    long all_done = 0, all_bad = 0, migrations = long(bal.migrations()), all_migrations = 0;
    long on_device_ranks = me < device_ranks ? ran.load() : 0, all_on_device = 0;
    double seconds = 0;
    MPI_Allreduce(&done, &all_done, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&migrations, &all_migrations, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&on_device_ranks, &all_on_device, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&mine_s, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double total_work = 0;  // cpu seconds
    for (int i = 0; i < n_objects; ++i)
        total_work += steps * light_ms * 1e-3 * weight(i);
    const double speed = device_ranks * (g_speedup + 1) + (n - device_ranks);
    const double ideal = total_work / speed;
    const long total_steps = long(n_objects) * steps;
    const bool ok = all_done == total_steps && all_bad == 0;
    const double share = double(all_on_device) / double(total_steps);
    if (me == 0) {
        std::printf(
            "hetero: %d ranks (%d with a sim device %.0fx faster), %d objects (%d heavy), %s "
            "placement, %s%s: %.3f s (ideal %.3f s, %.2fx), device ranks ran %.0f %% of the "
            "steps, %ld migrations: %s\n",
            n, device_ranks, g_speedup, n_objects, n_heavy, placement.c_str(), policy.c_str(),
            uncounted ? " (device work uncounted)" : "", seconds, ideal, seconds / ideal,
            100 * share, all_migrations, ok ? "OK" : "WRONG");
        cascade_bench::Record()
            .add("bench", "hetero_balance")
            .add("system", "cascade")
            .add("policy", policy)
            .add("counted", !uncounted)
            .add("placement", placement)
            .add("ranks", n)
            .add("devices", device_ranks)
            .add("device", "sim")
            .add("speedup", g_speedup)
            .add("network", "shm")
            .add("seconds", seconds)
            .add("ideal_seconds", ideal)
            .add("device_share", share)
            .add("migrations", all_migrations)
            .add("objects", n_objects)
            .add("steps", steps)
            .add("light_ms", light_ms)
            .add("ok", ok)
            .print_result();
    }
    return ok ? 0 : 1;
}
