// Remote async round trip and issue cost vs raw MPI, 2 ranks, in one job.
//   roundtrip: async(1, echo, 8-byte value).get() from rank 0's main thread (the thread that
//              drives MPI), the function run by a worker ("worker") or inside the handler
//              ("handler", AsyncOptions::run_in_handler); raw MPI_Send/MPI_Recv ping-pong of
//              8 bytes as the reference. latency_us is the whole round trip.
//   issue:     async(1, size, std::vector<double>(elements)): issue_us is the time async()
//              takes to return (serializing the argument into the outgoing buffer), call_us the
//              time until get() returns (transfer, run, 8-byte reply). The MPI reference is
//              memcpy of the elements plus a raw MPI round trip carrying them one way.
// Prints one JSON object per line on rank 0.
#include <mpi.h>

#include <algorithm>
#include <cascade/cascade.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/record.hpp"
#include "common/stats.hpp"

namespace {
using clk = std::chrono::steady_clock;
double us_since(clk::time_point t0) {
    return std::chrono::duration<double, std::micro>(clk::now() - t0).count();
}
using cascade_bench::median;
// Median over `batches` of the mean time per iteration of f (microseconds).
template <class F>
double timed(int iters, int batches, F&& f) {
    std::vector<double> per;
    for (int b = 0; b < batches; ++b) {
        const auto t0 = clk::now();
        for (int i = 0; i < iters; ++i)
            f();
        per.push_back(us_since(t0) / iters);
    }
    return median(per);
}
}  // namespace

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bool quick = false, rt_only = false;
    const char* only = nullptr;
    long elements = 0;  // --elements N: the issue cost at N elements only (profiling)  // --only
                        // worker|handler: that round trip only (profiling)
    for (int i = 1; i < argc; ++i) {
        quick |= std::strcmp(argv[i], "--quick") == 0;
        rt_only |= std::strcmp(argv[i], "--roundtrip") == 0;  // round trips only (profiling)
        if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
        if (std::strcmp(argv[i], "--elements") == 0 && i + 1 < argc)
            elements = std::atol(argv[++i]);
    }
    rt_only |= only != nullptr;
    if (size != 2) {
        if (rank == 0) std::fprintf(stderr, "futures_roundtrip: run with 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    const int iters = quick ? 2000 : 10000, batches = 7;
    std::vector<long> sizes{1, 10, 100, 1000, 10000, 100000, 1000000};
    if (elements > 0) sizes = {elements};

    // ---- raw MPI ------------------------------------------------------------------------------
    {
        long x = 0;
        auto ping = [&] {
            if (rank == 0) {
                MPI_Send(&x, 1, MPI_LONG, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(&x, 1, MPI_LONG, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(&x, 1, MPI_LONG, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(&x, 1, MPI_LONG, 0, 0, MPI_COMM_WORLD);
            }
        };
        timed(iters / 10, 1, ping);
        const double rt = timed(iters / batches, batches, ping);
        if (rank == 0)
            cascade_bench::Record()
                .add("bench", "roundtrip")
                .add("system", "mpi")
                .add("variant", "ping-pong")
                .add("ranks", 2)
                .add("threads", 0)
                .add("bytes", 8)
                .add("latency_us", rt, "%.3f")
                .print();
        for (long n : sizes) {
            if (rt_only) break;
            std::vector<double> buf(static_cast<std::size_t>(n), 1.0), dst(buf.size());
            const int it = n >= 100000 ? 20 : 200;
            auto xfer = [&] {
                if (rank == 0) {
                    MPI_Send(buf.data(), static_cast<int>(n), MPI_DOUBLE, 1, 1, MPI_COMM_WORLD);
                    MPI_Recv(&x, 1, MPI_LONG, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf.data(), static_cast<int>(n), MPI_DOUBLE, 0, 1, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
                    MPI_Send(&x, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD);
                }
            };
            timed(2, 1, xfer);
            const double mpi_us = timed(it, 5, xfer);
            const double memcpy_us = timed(it, 5, [&] {
                std::memcpy(dst.data(), buf.data(), buf.size() * sizeof(double));
                asm volatile("" ::: "memory");
            });
            if (rank == 0)
                cascade_bench::Record()
                    .add("bench", "issue")
                    .add("system", "mpi")
                    .add("ranks", 2)
                    .add("threads", 0)
                    .add("elements", n)
                    .add("issue_us", memcpy_us + mpi_us, "%.3f")
                    .add("memcpy_us", memcpy_us, "%.3f")
                    .add("mpi_us", mpi_us, "%.3f")
                    .print();
        }
    }
    std::fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);

    // ---- Cascade --------------------------------------------------------------------------------
    {
        cascade::Communicator comm;
        cascade::Threadpool tp(1, &comm);
        cascade::Futures fx(tp, &comm);
        auto echo = fx.make_async([](long& x) { return x; }, "echo");
        auto echo_inline = fx.make_async([](long& x) { return x; }, "echo_inline",
                                         cascade::AsyncOptions{.run_in_handler = true});
        auto count = fx.make_async([](std::vector<double>& v) { return long(v.size()); }, "count");
        if (rank == 0) {
            struct V {
                const char* name;
                cascade::AsyncFn<long(long)>* f;
            } variants[] = {{"worker", &echo}, {"handler", &echo_inline}};
            for (auto& v : variants) {
                if ((only && std::strcmp(only, v.name) != 0) || elements > 0) continue;
                long x = 7, bad = 0;
                auto call = [&] { bad += cascade::async(1, *v.f, x).get() != x; };
                timed(iters / 10, 1, call);
                const double rt = timed(iters / batches, batches, call);
                cascade_bench::Record()
                    .add("bench", "roundtrip")
                    .add("system", "cascade")
                    .add("variant", v.name)
                    .add("ranks", 2)
                    .add("threads", 1)
                    .add("bytes", 8)
                    .add("latency_us", rt, "%.3f")
                    .add("errors", bad)
                    .print();
            }
            for (long n : sizes) {
                if (rt_only) break;
                std::vector<double> arg(static_cast<std::size_t>(n), 1.0);
                const int it = n >= 100000 ? 20 : 200;
                std::vector<double> issue, call;
                long bad = 0;
                for (int rep = 0; rep < 5 * it + 2; ++rep) {
                    const auto t0 = clk::now();
                    auto f = cascade::async(1, count, arg);
                    const double ti = us_since(t0);
                    bad += f.get() != n;
                    const double tc = us_since(t0);
                    if (rep >= 2) {
                        issue.push_back(ti);
                        call.push_back(tc);
                    }
                }
                cascade_bench::Record()
                    .add("bench", "issue")
                    .add("system", "cascade")
                    .add("ranks", 2)
                    .add("threads", 1)
                    .add("elements", n)
                    .add("issue_us", median(issue), "%.3f")
                    .add("call_us", median(call), "%.3f")
                    .add("errors", bad)
                    .print();
            }
        }
        tp.join();
    }
    MPI_Finalize();
    return 0;
}
