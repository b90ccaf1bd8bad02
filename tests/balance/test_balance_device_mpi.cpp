// Device work in the load (<cascade/balance/device.hpp>), at 1-4 ranks: rank 0 has a simulated
// device that runs the step kernel 10x faster than the cpu device of the other ranks. Objects
// created on the last rank (no device) run chains of steps; each step's handler submits the
// kernel and returns, the kernel's completion invokes the next step. Counted through a
// DeviceLoad, the kernels' time is the objects' load: the objects move toward rank 0, which
// ends up running most of the steps, under diffusion and master-worker. Without it (the same
// kernels submitted to the Devices directly) every rank looks idle and nothing moves: rank 0
// runs none of the steps.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <cascade/balance/device.hpp>
#include <cascade/cascade.hpp>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "common.hpp"

using namespace cascade;
using namespace balance_test;

namespace {

constexpr double kStepS = 0.002;  // one step's kernel on the cpu device (a sleep)
constexpr double kSpeedup = 10;   // the sim device runs it this much faster
constexpr int kObjectsPerRank = 4;

// The step: sleeps its seconds on the cpu device; a sim device sleeps the modelled time,
// kSpeedup less (the launch's x extent carries the nanoseconds).
Kernel& step_kernel() {
    static Kernel k("step_work");
    static const bool ready = [] {
        k.cpu([](KernelArgs& a) {
            std::this_thread::sleep_for(std::chrono::duration<double>(a.scalar<double>(0)));
        });
        k.model([](const Threads& t) { return double(t.global[0]) * 1e-9 / kSpeedup; });
        return true;
    }();
    (void)ready;
    return k;
}

struct Result {
    std::vector<double> steps;  // per rank: steps whose handler ran there
    long done = 0, migrations = 0;
    double seconds = 0;
};

Result run(const char* policy, bool counted, int steps) {
    Communicator comm;
    Threadpool tp(1, &comm);
    Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    DevicesOptions dopts;
    if (me == 0) {
        dopts.sim = 1;
        dopts.sim_options.run_kernels = false;  // sleeps Kernel::model's time
    }
    Devices devs(tp, dopts);
    Balancer bal(objs, make_policy(policy));
    DeviceLoad load(objs, devs);
    const int count = kObjectsPerRank * n;
    const int home = n - 1;  // no device there (but at 1 rank)
    std::vector<mobile_ptr<Work>> all;
    for (int i = 1; i <= count; ++i)
        all.push_back(mobile_ptr<Work>(ObjectKey{home, 0, std::uint64_t(i)}));
    Kernel& kernel = step_kernel();
    const Launch launch{.threads = {Dims(static_cast<long>(kStepS * 1e9))}};
    std::atomic<long> ran{0};
    Handler<Work, void, mobile_ptr<Work>, int>* step = nullptr;
    step = objs.make_handler<Work>(
        [&](Work& w, mobile_ptr<Work>& self, int& left) {
            ++w.done;
            ran.fetch_add(1, std::memory_order_relaxed);
            DeviceTask t = counted ? load.submit(self, kernel, kStepS, launch)
                                   : devs.submit(kernel, kStepS, launch);
            if (left > 1) t.then([step, self, left] { step->invoke(self, self, left - 1); });
        },
        {.name = "step"});
    if (me == home)
        for (int i = 0; i < count; ++i)
            objs.create<Work>();
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    if (me == home)
        tp.insert([&] {
            for (auto& p : all)
                step->invoke(p, p, steps);
        });
    tp.join();
    Result r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.steps = allgather(double(ran.load()));
    long done = 0;
    for (auto& p : all)
        if (Work* w = objs.local(p)) done += w->done;
    r.done = allreduce_sum(done);
    r.migrations = allreduce_sum(long(objs.stats().migrations_out));
    return r;
}

// The share of the steps rank 0 ran, over up to three runs (a loaded machine slows ranks for
// real; the same decision on every rank).
void expect_toward_device(const char* policy) {
    const int n = world_size();
    const int steps = 30;
    Result r;
    double share = 0;
    for (int attempt = 1; attempt <= 3; ++attempt) {
        r = run(policy, true, steps);
        EXPECT_EQ(r.done, long(kObjectsPerRank) * n * steps) << policy;  // exactly once
        if (n < 2) return;
        double total = 0;
        for (double s : r.steps)
            total += s;
        share = r.steps[0] / total;
        if (world_rank() == 0)
            std::printf(
                "%s, %d ranks: %.3f s, rank 0 (device) ran %.0f %% of the steps, %ld "
                "migrations (attempt %d)\n",
                policy, n, r.seconds, 100 * share, r.migrations, attempt);
        if (share > 0.4) break;
    }
    // Ideal: 10 / (10 + n - 1) of the steps (91 % at 2 ranks, 77 % at 4).
    EXPECT_GT(share, 0.4) << policy;
    EXPECT_GT(r.migrations, 0) << policy;
    // No ping-pong: objects do not keep moving back and forth (a few hops each at most).
    EXPECT_LT(r.migrations, 4L * kObjectsPerRank * n) << policy;
}

}  // namespace

TEST(BalanceDevice, DiffusionMovesDeviceWorkTowardTheDevice) {
    expect_toward_device("diffusion");
}

TEST(BalanceDevice, MasterWorkerMovesDeviceWorkTowardTheDevice) {
    expect_toward_device("master_worker");
}
