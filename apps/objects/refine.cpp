// An adaptive workload in the manner of mesh refinement: a 2D domain cut into blocks (mobile
// objects) that advance in steps; step t+1 of a block needs step t of its four neighbours
// (their values arrive as handler invocations). A front sweeps across the domain along x
// during the run, and the blocks it is crossing cost --factor times more per step while it
// passes. Static placement gives each rank a strip of columns, so the rank the front is
// crossing holds back everyone; a balancing policy moves blocks to the ranks that wait.
// The answer is a checksum of every block's final value: it depends only on the steps, not
// on where the blocks ran, and is checked against a direct computation.
//
//   mpiexec -n 8 --oversubscribe objects_refine --fake-work --policy diffusion
#include <CLI/CLI.hpp>
#include <atomic>
#include <cascade/balance/balancer.hpp>
#include <cascade/cascade.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "common/record.hpp"
#include "common/spin_shared.hpp"

namespace {

struct Block {
    std::int32_t x = 0, y = 0, step = 0;
    std::uint64_t v = 0;           // value after `step`
    std::int32_t got[2] = {0, 0};  // neighbour values received for step t (slot t % 2)
    std::uint64_t acc[2] = {0, 0};
    double queued = 0;  // seconds of the step queued on it (its load for the balancer)
    template <class Archive>
    void serialize(Archive& ar) {
        ar(x, y, step, v, got[0], got[1], acc[0], acc[1], queued);
    }
};

std::uint64_t mix(std::uint64_t v, std::uint64_t a) {
    v ^= a + 0x9e3779b97f4a7c15ULL + (v << 6) + (v >> 2);
    return v * 0xff51afd7ed558ccdULL;
}
std::uint64_t initial(int x, int y) {
    return mix(std::uint64_t(x) * 7919 + 1, std::uint64_t(y) * 104729 + 3);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"a front sweeping a 2D domain of mobile blocks, static placement vs balancing"};
    int nx = 32, ny = 8, steps = 32, threads = 1;
    double base_ms = 1.0, factor = 6.0, band = 1.5, period_ms = 2.0;
    std::string policy = "diffusion";
    bool fake = false;
    app.add_option("--nx", nx, "blocks along x (the front moves along x)");
    app.add_option("--ny", ny, "blocks along y");
    app.add_option("--steps", steps, "steps");
    app.add_option("--base-ms", base_ms, "work of one block step away from the front (ms)");
    app.add_option("--factor", factor, "work of a block step under the front / away from it");
    app.add_option("--band", band, "half width of the front (blocks)");
    app.add_option("--threads", threads, "worker threads per rank");
    app.add_option("--policy", policy, "static | diffusion | master_worker | rotate")
        ->check(CLI::IsMember({"static", "diffusion", "master_worker", "rotate"}));
    app.add_option("--period-ms", period_ms, "balancing period (ms)");
    app.add_flag("--fake-work", fake, "sleep instead of spinning (each rank stands for a core)");
    CLI11_PARSE(app, argc, argv);

    cascade::Communicator comm;
    cascade::Threadpool tp(threads, &comm, 0, "refine");
    cascade::Objects objs(tp, comm);
    cascade::Balancer bal(objs, cascade::make_policy(policy == "static" ? "none" : policy),
                          {.period_s = period_ms * 1e-3});
    const int me = comm.rank(), n = comm.ranks();
    auto owner = [&](int x) { return int(std::int64_t(x) * n / nx); };  // strips of columns
    auto cost = [&](int x, int t) {  // seconds of step t of a block in column x
        const double front = (t + 0.5) * nx / steps;
        return base_ms * 1e-3 * (std::abs(x + 0.5 - front) < band ? factor : 1.0);
    };
    auto neighbours = [&](int x, int y) {
        return int(x > 0) + int(x < nx - 1) + int(y > 0) + int(y < ny - 1);
    };
    // Block (x, y) lives first on owner(x); ids count up per rank in (x, y) order.
    std::vector<cascade::mobile_ptr<Block>> ptr(std::size_t(nx) * ny);
    {
        std::vector<std::uint64_t> next(n, 1);
        for (int x = 0; x < nx; ++x)
            for (int y = 0; y < ny; ++y)
                ptr[std::size_t(x) * ny + y] =
                    cascade::mobile_ptr<Block>(cascade::ObjectKey{owner(x), 0, next[owner(x)]++});
    }
    auto at = [&](int x, int y) { return ptr[std::size_t(x) * ny + y]; };
    objs.set_load<Block>([](const Block& b) { return b.queued; });

    // One rate for every rank (measured on rank 0 while the others wait): each handler is
    // the same work wherever it runs.
    const double iters_per_s =
        fake ? 0 : cascade_bench::spin_iters_per_second_shared(MPI_COMM_WORLD);
    std::atomic<double> busy{0};
    auto work = [&](double s) {
        if (fake)
            std::this_thread::sleep_for(std::chrono::duration<double>(s));
        else
            cascade_bench::spin(static_cast<std::uint64_t>(s * iters_per_s));
    };
    cascade::Handler<Block, void, std::int32_t, std::uint64_t>* halo = nullptr;
    cascade::Handler<Block, void, std::int32_t>* advance = nullptr;
    // Tells the neighbours the value of step b.step.
    auto publish = [&](const Block& b) {
        const std::int32_t t = b.step;
        if (b.x > 0) halo->invoke(at(b.x - 1, b.y), t, b.v);
        if (b.x < nx - 1) halo->invoke(at(b.x + 1, b.y), t, b.v);
        if (b.y > 0) halo->invoke(at(b.x, b.y - 1), t, b.v);
        if (b.y < ny - 1) halo->invoke(at(b.x, b.y + 1), t, b.v);
    };
    // All neighbour values of step b.step are in: queue step b.step + 1 on the block.
    auto maybe_advance = [&](cascade::mobile_ptr<Block> self, Block& b) {
        const int s = b.step % 2;
        if (b.step >= steps || b.got[s] < neighbours(b.x, b.y) || b.queued > 0) return;
        b.queued = cost(b.x, b.step + 1);
        advance->invoke(self, b.step + 1);
    };
    halo = objs.make_handler<Block>(
        [&](Block& b, std::int32_t& t, std::uint64_t& v) {
            b.acc[t % 2] += v;
            b.got[t % 2]++;
            maybe_advance(at(b.x, b.y), b);
        },
        {.name = "halo"});
    advance = objs.make_handler<Block>(
        [&](Block& b, std::int32_t& t) {
            const double t0 = cascade_bench::now_seconds();
            work(cost(b.x, t));
            const int s = (t - 1) % 2;
            b.v = mix(b.v, b.acc[s]);
            b.acc[s] = 0;
            b.got[s] = 0;
            b.step = t;
            b.queued = 0;
            busy.fetch_add(cascade_bench::now_seconds() - t0, std::memory_order_relaxed);
            publish(b);
            maybe_advance(at(b.x, b.y), b);
        },
        {.name = "step"});
    auto start = objs.make_handler<Block>(
        [&](Block& b) {
            publish(b);
            maybe_advance(at(b.x, b.y), b);
        },
        {.name = "start"});

    std::vector<cascade::mobile_ptr<Block>> mine;
    for (int x = 0; x < nx; ++x)
        for (int y = 0; y < ny; ++y)
            if (owner(x) == me) {
                Block b;
                b.x = x, b.y = y, b.v = initial(x, y);
                mine.push_back(objs.create<Block>(b));
            }
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = cascade_bench::now_seconds();
    tp.insert([&] {
        for (auto& p : mine)
            start->invoke(p);
    });
    tp.join();
    const double mine_s = cascade_bench::now_seconds() - t0;

    // Checksum of the final values, against the same steps computed directly.
    std::uint64_t sum = 0, want = 0;
    long finished = 0;
    for (int x = 0; x < nx; ++x)
        for (int y = 0; y < ny; ++y)
            if (Block* b = objs.local(at(x, y))) {
                sum += b->v * std::uint64_t(1 + x + nx * y);
                finished += b->step == steps;
            }
    {
        std::vector<std::uint64_t> v(std::size_t(nx) * ny), w(v.size());
        for (int x = 0; x < nx; ++x)
            for (int y = 0; y < ny; ++y)
                v[std::size_t(x) * ny + y] = initial(x, y);
        for (int t = 1; t <= steps; ++t) {
            for (int x = 0; x < nx; ++x)
                for (int y = 0; y < ny; ++y) {
                    std::uint64_t a = 0;
                    if (x > 0) a += v[std::size_t(x - 1) * ny + y];
                    if (x < nx - 1) a += v[std::size_t(x + 1) * ny + y];
                    if (y > 0) a += v[std::size_t(x) * ny + y - 1];
                    if (y < ny - 1) a += v[std::size_t(x) * ny + y + 1];
                    w[std::size_t(x) * ny + y] = mix(v[std::size_t(x) * ny + y], a);
                }
            v.swap(w);
        }
        for (int x = 0; x < nx; ++x)
            for (int y = 0; y < ny; ++y)
                want += v[std::size_t(x) * ny + y] * std::uint64_t(1 + x + nx * y);
    }
    std::uint64_t all_sum = 0;
    long all_finished = 0, migrations = long(bal.migrations()), all_migrations = 0;
    double seconds = 0, b = busy.load(), max_busy = 0, min_busy = 0;
    MPI_Allreduce(&sum, &all_sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&finished, &all_finished, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&migrations, &all_migrations, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&mine_s, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&b, &max_busy, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&b, &min_busy, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    double total = 0;
    for (int x = 0; x < nx; ++x)
        for (int t = 1; t <= steps; ++t)
            total += ny * cost(x, t);
    const double ideal = total / (n * threads);
    const bool ok = all_sum == want && all_finished == long(nx) * ny;
    if (me == 0) {
        std::printf(
            "refine: %d ranks x %d threads, %dx%d blocks, %d steps, %s, %s work: %.3f s "
            "(ideal %.3f s, %.2fx), busy max %.3f s min %.3f s, %ld migrations, checksum "
            "%016llx: %s\n",
            n, threads, nx, ny, steps, policy.c_str(), fake ? "sleep" : "spin", seconds, ideal,
            seconds / ideal, max_busy, min_busy, all_migrations, (unsigned long long)all_sum,
            ok ? "OK" : "WRONG");
        cascade_bench::Record()
            .add("bench", "refine")
            .add("placement", "strips")
            .add("policy", policy)
            .add("ranks", n)
            .add("threads", threads)
            .add("work", fake ? "sleep" : "spin")
            .add("seconds", seconds)
            .add("ideal_seconds", ideal)
            .add("busy_max", max_busy)
            .add("busy_min", min_busy)
            .add("migrations", all_migrations)
            .add("ok", ok)
            .print_result();
    }
    return ok ? 0 : 1;
}
