// Device work balanced across ranks: rank 0 has a simulated device that runs the step kernel
// 10x faster than the cpu device of the other ranks. 16 cells created on the last rank each
// run a chain of 20 steps: a step's handler submits the kernel and returns, and the kernel's
// completion invokes the cell's next step. Submitted through a DeviceLoad, the kernels count
// in the cells' load: with CASCADE_BALANCE=diffusion the cells move to rank 0, which runs
// most of the steps.
#include <cascade/balance/device.hpp>
#include <cascade/cascade.hpp>

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

struct Cell {
    int steps = 0;
};

int main() {
    cascade::Communicator comm;
    cascade::Threadpool tp(1, &comm);
    cascade::Objects objs(tp, comm);  // same point on every rank
    const int me = comm.rank(), n = comm.ranks();
    // One step: 2 ms on the cpu device; a sim device sleeps the modelled time, 10x less.
    cascade::Kernel work("work");
    work.cpu([](cascade::KernelArgs& a) {
        std::this_thread::sleep_for(std::chrono::duration<double>(a.scalar<double>(0)));
    });
    work.model([](const cascade::Threads&) { return 0.0002; });
    cascade::DevicesOptions dopts;
    if (me == 0) dopts.sim = 1, dopts.sim_options.run_kernels = false;  // sleeps the model
    cascade::Devices devs(tp, dopts);
    cascade::DeviceLoad load(objs, devs);  // device tasks submitted through it count
    int ran = 0;                           // steps run on this rank (one worker: no race)
    cascade::Handler<Cell, void, cascade::mobile_ptr<Cell>, int>* step = nullptr;
    step = objs.make_handler<Cell>(
        [&](Cell& c, cascade::mobile_ptr<Cell>& self, int& left) {
            ++c.steps;
            ++ran;
            auto t = load.submit(self, work, 0.002);
            if (left > 1) t.then([step, self, left] { step->invoke(self, self, left - 1); });
        },
        {.name = "step"});
    const auto t0 = std::chrono::steady_clock::now();
    if (me == n - 1)
        for (int i = 0; i < 16; ++i) {
            auto cell = objs.create<Cell>();
            step->invoke(cell, cell, 20);
        }
    tp.join();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // Rank 0 prints where the steps ran.
    std::vector<int> per_rank(n, 0);
    auto tell = comm.make_active_msg([&](int& rank, int& count) { per_rank[rank] = count; });
    tell->send(0, me, ran);
    tp.join();
    if (me == 0) {
        int total = 0;
        for (int k : per_rank)
            total += k;
        std::printf("%d steps in %.2f s; rank 0 (the device) ran %d:", total, seconds, per_rank[0]);
        for (int r = 0; r < n; ++r)
            std::printf(" %d", per_rank[r]);
        std::printf("\n");
    }
}
