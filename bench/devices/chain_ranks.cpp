// PREMA's DGEMM chain over two ranks (thesis figure 49): rank 0 computes C = A0 B0 on its
// device and sends C (a Data, DataActiveMsg: the device-to-host copy, then the bytes as a large
// message) to rank 1, which computes D = A1 C on its device (the host-to-device copy first).
// `--chains K` runs K such chains at once: rank 0 submits its K products back to back, each
// result leaves as soon as it is ready, and rank 1 starts each second product as its C
// arrives, so kernels, device copies and messages of different chains overlap.
//   mpiexec -n 2 devices_chain_ranks --n N --chains K [--reps R] [--run-kernels 1]
// Devices: one sim device per rank modelling a PCIe GPU (12 GB/s page-locked copies, 8 us per
// copy, kernels 2n^3 / 5 TF/s, slept; --run-kernels 1 runs the product's plain loop instead,
// for small n, and checks the results). The parts: kernel_seconds and transfer_seconds (the
// device runtimes' summed op times on both ranks, per run) and message_seconds (one body of
// the same size sent from a valid host copy, arrival minus send, the median of 5, times K: the
// same clock on every rank of one machine). sum_seconds is their sum; overlap = 1 - seconds /
// sum_seconds (0: the parts one after the other). Checked: every D arrived and was computed; with
// --run-kernels 1, that it is A1 A0 B0 (entries known in closed form).
// Record: bench chain_ranks, system cascade, device sim, ranks, devices, network, n, chains,
// seconds (median of R), kernel_seconds, transfer_seconds, message_seconds, sum_seconds,
// overlap, ok.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cascade/cascade.hpp>
#include <cascade/comm/data_msg.hpp>
#include <cascade/device/devices.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/record.hpp"
#include "common/stats.hpp"

namespace {

cascade::Kernel& dgemm_kernel() {
    static cascade::Kernel k("dgemm");
    static const bool once = [] {
        // C = A * B, n x n, column-major; argument 3 is n. A plain loop: the sim devices here
        // sleep the model instead of running it.
        k.cpu([](cascade::KernelArgs& a) {
            const int n = a.scalar<int>(3);
            const double* x = a.data<double>(0);
            const double* y = a.data<double>(1);
            double* z = a.data<double>(2);
            for (int j = 0; j < n; ++j)
                for (int i = 0; i < n; ++i) {
                    double s = 0;
                    for (int l = 0; l < n; ++l)
                        s += x[std::size_t(l) * n + i] * y[std::size_t(j) * n + l];
                    z[std::size_t(j) * n + i] = s;
                }
        });
        k.model([](const cascade::Threads& t) {
            const double n = static_cast<double>(t.global[0]);
            return 2 * n * n * n / 5e12;
        });
        return true;
    }();
    (void)once;
    return k;
}

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace

int main(int argc, char** argv) {
    int n = 1024, chains = 1, reps = 3;
    bool run_kernels = false;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--n")
            n = std::atoi(argv[i + 1]);
        else if (a == "--chains")
            chains = std::atoi(argv[i + 1]);
        else if (a == "--reps")
            reps = std::atoi(argv[i + 1]);
        else if (a == "--run-kernels")
            run_kernels = std::atoi(argv[i + 1]) != 0;
    }
    cascade::Communicator comm;
    cascade::Threadpool tp(1, &comm);
    cascade::DevicesOptions o;
    o.cpu = false;
    o.sim = 1;
    o.sim_options.run_kernels = run_kernels;
    cascade::Devices devs(tp, o);
    const int me = comm.rank(), ranks = comm.ranks();
    const int to = ranks > 1 ? 1 : 0;  // rank 0 sends to rank 1 (to itself at one rank)
    const std::size_t nn = std::size_t(n) * std::size_t(n);
    auto& k = dgemm_kernel();
    const cascade::Launch launch{.threads = {n}};
    // A0 = B0 = A1 = 1/n everywhere: every entry of A0 B0 is 1/n, of A1 A0 B0 too.
    cascade::Data<double> a(devs, std::vector<double>(nn, 1.0 / n), "A");
    cascade::Data<double> b(devs, std::vector<double>(nn, 1.0 / n), "B");

    // Rank 1's side: each C that arrives is multiplied by A; the results are kept.
    std::vector<cascade::Data<double>> results;
    std::atomic<int> finished{0};
    std::atomic<double> end_time{0}, arrival{0};
    std::vector<cascade::DeviceTask> second;
    cascade::DataActiveMsg<double, int, double> ship(
        comm, &devs, [&](cascade::Data<double>& c, int& chain, double& sent) {
            if (chain < 0) {  // the message alone: a body from a valid host copy
                arrival.store(now() - sent);
                return;
            }
            cascade::Data<double> d(devs, nn);
            results.push_back(d);
            auto t =
                devs.submit(k, cascade::read(a), cascade::read(c), cascade::write(d), n, launch);
            t.then([&, c] {
                (void)c;  // kept until the product read it
                end_time.store(now());
                finished.fetch_add(1);
            });
        });

    // The message alone: the median of 5 bodies (after a warm-up one), one at a time.
    double message = 0;
    {
        std::vector<double> pings;
        for (int r = 0; r < 6; ++r) {
            if (me == 0) {
                cascade::Data<double> h(devs, std::vector<double>(nn, 0.0), "ping");
                ship.send(to, h, -1, now());
            }
            tp.join();
            double got = arrival.load(), all = 0;
            MPI_Allreduce(&got, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (r > 0) pings.push_back(all);
        }
        message = cascade_bench::median(pings);
    }

    std::vector<double> walls;
    double kernel = 0, transfer = 0;
    bool ok = true;
    for (int r = 0; r <= reps; ++r) {  // round 0 warms up (device memory, message buffers)
        results.clear();
        finished = 0;
        const auto before = devs.stats().devices[0];
        std::vector<cascade::Data<double>> cs;
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now();
        if (me == 0)
            for (int c = 0; c < chains; ++c) {
                cs.emplace_back(devs, nn);
                cascade::Data<double> out = cs.back();
                devs.submit(k, cascade::read(a), cascade::read(b), cascade::write(out), n, launch)
                    .then([&, out, c] { ship.send(to, out, c, now()); });
            }
        tp.join();
        double wall = me == to ? end_time.load() - t0 : 0, all_wall = 0;
        MPI_Allreduce(&wall, &all_wall, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        const auto after = devs.stats().devices[0];
        double parts[2] = {after.busy_seconds - before.busy_seconds,
                           after.transfer_seconds - before.transfer_seconds};
        double sums[2] = {0, 0};
        MPI_Allreduce(parts, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (me == to) {  // every D came; computed: entries of 1/n times 1/n summed twice: 1/n
            ok = ok && finished.load() == chains && int(results.size()) == chains;
            for (auto& d : results) {
                if (!run_kernels) break;
                const auto v = d.to_vector();
                ok =
                    ok && std::abs(v[0] - 1.0 / n) < 1e-12 && std::abs(v[nn - 1] - 1.0 / n) < 1e-12;
            }
        }
        if (r > 0) walls.push_back(all_wall), kernel += sums[0], transfer += sums[1];
    }
    int good = ok, all_good = 0;
    MPI_Allreduce(&good, &all_good, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    kernel /= reps;
    transfer /= reps;
    const double wall = cascade_bench::median(walls);
    const double sum = kernel + transfer + message * chains;
    if (me == 0) {
        std::printf(
            "chain over %d ranks, n = %d, %d chain(s): %.3f ms; parts: kernels %.3f ms, "
            "device copies %.3f ms, messages %.3f ms (sum %.3f ms); overlap %.0f %%: %s\n",
            ranks, n, chains, wall * 1e3, kernel * 1e3, transfer * 1e3, message * chains * 1e3,
            sum * 1e3, 100 * (1 - wall / sum), all_good ? "OK" : "WRONG");
        cascade_bench::Record()
            .add("bench", "chain_ranks")
            .add("system", "cascade")
            .add("device", "sim")
            .add("ranks", ranks)
            .add("devices", ranks)
            .add("network", "shm")
            .add("n", n)
            .add("chains", chains)
            .add("seconds", wall)
            .add("kernel_seconds", kernel)
            .add("transfer_seconds", transfer)
            .add("message_seconds", message * chains)
            .add("sum_seconds", sum)
            .add("overlap", 1 - wall / sum)
            .add("ok", bool(all_good))
            .print();
    }
    return all_good ? 0 : 1;
}
