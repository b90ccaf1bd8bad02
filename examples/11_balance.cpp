// Balancing with no code: 32 cells are created on rank 0, and each runs a chain of 25 steps
// (a step invokes its own cell for the next one). Nothing here mentions balancing: run with
// CASCADE_BALANCE=diffusion (or master_worker), the cells spread over the ranks while they
// run; without it, rank 0 runs every step.
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
    int ran = 0;  // steps run on this rank (one worker: no race)
    cascade::Handler<Cell, void, cascade::mobile_ptr<Cell>, int>* step = nullptr;
    step = objs.make_handler<Cell>(
        [&](Cell& c, cascade::mobile_ptr<Cell>& self, int& left) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));  // one step's work
            ++c.steps;
            ++ran;
            if (left > 1) step->invoke(self, self, left - 1);  // wherever the cell is then
        },
        {.name = "step"});
    const auto t0 = std::chrono::steady_clock::now();
    if (me == 0)
        for (int i = 0; i < 32; ++i) {
            auto cell = objs.create<Cell>();
            step->invoke(cell, cell, 25);
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
        int total = 0, ranks = 0;
        for (int k : per_rank)
            total += k, ranks += k > 0;
        std::printf("%d steps in all, run on %d of %d ranks in %.2f s:", total, ranks, n, seconds);
        for (int r = 0; r < n; ++r)
            std::printf(" %d", per_rank[r]);
        std::printf("\n");
    }
}
