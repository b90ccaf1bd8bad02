// Particles in a periodic 1D domain cut into cells; each cell is a mobile object holding its
// particles (std::vector members, a codec). Every step, each cell moves its particles and
// sends those that left to the cells they entered (handlers invoked on other objects, wherever
// they live); every few steps the cells migrate to other ranks, round robin. The answer is
// checked against a direct computation: particle count, and the sum of final positions.
//
//   mpiexec -n 4 particles --cells 64 --particles 100000 --steps 20 --threads 2
#include <CLI/CLI.hpp>
#include <cascade/cascade.hpp>
#include <cmath>
#include <cstdio>
#include <vector>

struct Cell {
    std::vector<double> x, v;  // positions in [0, cells), velocities
    // Particles that entered during step s wait in in_x/in_v[(s + 1) % 2] until step s + 1
    // (a neighbour may run its step s before or after this cell runs its own).
    std::vector<double> in_x[2], in_v[2];
    template <class Archive>
    void serialize(Archive& ar) {
        ar(x, v, in_x[0], in_v[0], in_x[1], in_v[1]);
    }
};

int main(int argc, char** argv) {
    CLI::App app{"mobile-object particles: cells as objects, migrating while the run goes on"};
    int cells = 64, steps = 20, threads = 2, migrate_every = 5;
    long particles = 100000;
    app.add_option("--cells", cells, "cells (mobile objects)");
    app.add_option("--particles", particles, "particles in all");
    app.add_option("--steps", steps, "time steps");
    app.add_option("--threads", threads, "worker threads per rank");
    app.add_option("--migrate-every", migrate_every, "steps between migrations of all cells");
    CLI11_PARSE(app, argc, argv);

    cascade::Communicator comm;
    cascade::Threadpool tp(threads, &comm, 0, "particles", false);
    cascade::Objects objs(tp, comm);
    const int me = comm.rank(), n = comm.ranks();
    const double L = cells;
    auto initial = [&](long i, double& x, double& v) {  // particle i at the start
        x = std::fmod(i * 0.6180339887498949 * 7.0, L);
        v = 0.05 + 0.9 * std::fmod(i * 0.7548776662466927, 1.0);
    };

    // Cell c lives first on rank c % n; its mobile_ptr is known to all (home, id).
    std::vector<cascade::mobile_ptr<Cell>> cell(cells);
    for (int c = 0; c < cells; ++c)
        cell[c] = cascade::mobile_ptr<Cell>(
            cascade::ObjectKey{c % n, 0, static_cast<std::uint64_t>(c / n + 1)});
    for (int c = me; c < cells; c += n) {
        Cell init;
        for (long i = 0; i < particles; ++i) {
            double x, v;
            initial(i, x, v);
            if (static_cast<int>(x) == c) {
                init.x.push_back(x);
                init.v.push_back(v);
            }
        }
        objs.create<Cell>(std::move(init));
    }

    auto arrive = objs.make_handler<Cell>(
        [](Cell& c, int& next_step, std::vector<double>& x, std::vector<double>& v) {
            auto& ix = c.in_x[next_step % 2];
            auto& iv = c.in_v[next_step % 2];
            ix.insert(ix.end(), x.begin(), x.end());
            iv.insert(iv.end(), v.begin(), v.end());
        },
        {.name = "arrive"});
    auto step = objs.make_handler<Cell>(
        [&](Cell& c, int& self, int& s) {
            const int b = s % 2;  // arrivals of the previous step
            c.x.insert(c.x.end(), c.in_x[b].begin(), c.in_x[b].end());
            c.v.insert(c.v.end(), c.in_v[b].begin(), c.in_v[b].end());
            c.in_x[b].clear();
            c.in_v[b].clear();
            std::vector<std::vector<double>> out_x(cells), out_v(cells);
            std::size_t keep = 0;
            for (std::size_t i = 0; i < c.x.size(); ++i) {
                double x = std::fmod(c.x[i] + c.v[i], L);
                const int dest = std::min(static_cast<int>(x), cells - 1);
                if (dest == self) {
                    c.x[keep] = x;
                    c.v[keep++] = c.v[i];
                } else {
                    out_x[dest].push_back(x);
                    out_v[dest].push_back(c.v[i]);
                }
            }
            c.x.resize(keep);
            c.v.resize(keep);
            for (int d = 0; d < cells; ++d)
                if (!out_x[d].empty()) arrive->invoke(cell[d], s + 1, out_x[d], out_v[d]);
        },
        {.name = "step"});

    for (int s = 0; s < steps; ++s) {
        tp.start();
        // Each rank starts the cells it created; they run wherever they are now.
        for (int c = me; c < cells; c += n)
            step->invoke(cell[c], c, s);
        if (migrate_every > 0 && s % migrate_every == migrate_every - 1)
            for (int c = me; c < cells; c += n)
                objs.migrate(cell[c], (c + s + 1) % n);
        tp.join();  // every step, arrival and migration of this step has finished
    }

    // Check: every particle is still there, at the position a direct computation gives.
    double sum = 0, want = 0;
    long count = 0;
    for (int c = 0; c < cells; ++c)
        if (const Cell* p = objs.local(cell[c])) {
            for (const auto* xs : {&p->x, &p->in_x[steps % 2]}) {
                count += static_cast<long>(xs->size());
                for (double x : *xs)
                    sum += x;
            }
        }
    for (long i = me; i < particles; i += n) {
        double x, v;
        initial(i, x, v);
        for (int s = 0; s < steps; ++s)
            x = std::fmod(x + v, L);
        want += x;
    }
    long all_count = 0;
    double all_sum = 0, all_want = 0;
    MPI_Allreduce(&count, &all_count, 1, MPI_LONG, MPI_SUM, comm.mpi_comm());
    MPI_Allreduce(&sum, &all_sum, 1, MPI_DOUBLE, MPI_SUM, comm.mpi_comm());
    MPI_Allreduce(&want, &all_want, 1, MPI_DOUBLE, MPI_SUM, comm.mpi_comm());
    const auto st = objs.stats();
    const bool ok = all_count == particles && std::fabs(all_sum - all_want) <= 1e-9 * all_want;
    if (me == 0)
        std::printf(
            "particles: %ld of %ld, position sum %.6f (expected %.6f), %d steps on %d "
            "ranks: %s\n",
            all_count, particles, all_sum, all_want, steps, n, ok ? "OK" : "WRONG");
    if (me == 0 && st.handlers_run == 0 && n == 1) std::printf("particles: no handler ran\n");
    return ok ? 0 : 1;
}
