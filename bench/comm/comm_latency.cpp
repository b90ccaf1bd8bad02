// Ping-pong between 2 ranks: one-way latency (half a round trip) and bandwidth, Cascade
// active messages against raw MPI_Send/MPI_Recv in the same program and run.
//
//   mpi        blocking MPI_Send / MPI_Recv ping-pong on MPI_COMM_WORLD
//   small_am   ActiveMsg<view<char>>: each handler sends the reply from inside the handler
//   large_am   LargeActiveMsg<char, int>: the body goes straight into a receive buffer; the
//              on-arrival handler sends a body of the same size back (symmetric ping-pong)
//
// Cascade runs in two progress modes:
//   join  the realistic one: both ranks sit in tp.join(), whose thread drives MPI and naps
//         (20 us growing to 1 ms) whenever a poll finds nothing to do;
//   poll  diagnostic: the main thread calls comm.progress() in a tight loop until its last
//         message, then joins; shows what the AM layer costs without the joiner's naps.
// Timing ("handler"): rank 0 stamps the clock before its first send (main thread) and in the
// handler that receives the N-th reply; latency = elapsed / (2 N). join_tail_us is what
// tp.join() took after that last receipt (completion detection + stopping the workers).
// sleeps_per_reply: voluntary context switches of rank 0's main thread (the joiner: each
// nap that really sleeps is one) per reply received. --timerslack-ns N sets the kernel timer
// slack of the main thread (default 50 us on Linux, which pads every nap; 0: leave it).
// Each (system, size) first runs a pilot (also a warm-up) that sizes N so one repeat takes
// about --target-ms; the median over --repeats repeats is reported.
#include <sys/prctl.h>

#include <cstring>
#include <vector>

#include "cascade/cascade.hpp"
#include "common.hpp"

using namespace commbench;

namespace {

struct Result {
    std::vector<double> one_way_s;  // per repeat
    std::vector<double> tail_s;     // per repeat (cascade only)
    std::vector<double> sleeps;     // rank 0's main thread: voluntary switches per reply received
    long n = 0;
};

}  // namespace

int main(int argc, char** argv) {
    return guarded_main(argc, argv, "comm_latency", [](Args& a) {
        const std::vector<long> sizes =
            a.list("sizes", {8, 32, 128, 512, 1024, 2048, 8192, 32768, 65536, 131072, 524288,
                             1 << 20, 2 << 20, 8 << 20, 32 << 20, 64 << 20});
        const long small_max = a.num("small-max", 65536);
        const long large_min = a.num("large-min", 1024);
        const int repeats = static_cast<int>(a.num("repeats", 5));
        const double target_s = a.real("target-ms", 20) * 1e-3;
        const long max_n = a.num("max-n", 4000);
        const auto systems = a.words("systems", "mpi,small_am,large_am");
        const auto modes = a.words("modes", "join,poll");
        const int threads = static_cast<int>(a.num("threads", 1));
        const long slack_ns = a.num("timerslack-ns", 0);
        a.check();
        if (slack_ns > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(slack_ns), 0, 0, 0);

        cascade::Communicator comm;
        const int me = comm.rank();
        if (comm.ranks() != 2) throw std::runtime_error("run with exactly 2 ranks");
        cascade::Threadpool tp(threads, &comm, 0, "latency", false);

        const long max_bytes = *std::max_element(sizes.begin(), sizes.end());
        std::vector<char> sbuf(static_cast<std::size_t>(max_bytes), 'x'), rbuf(sbuf.size(), 'y');

        // State shared with the handlers (which run on this, the communication, thread).
        long n_goal = 0, count = 0;
        std::size_t cur = 0;
        double t_last = 0;

        cascade::ActiveMsg<cascade::view<char>>* small = nullptr;
        small = comm.make_active_msg(
            [&](cascade::view<char>& v) {
                ++count;
                if (me == 1) {
                    small->send(0, v);
                } else if (count < n_goal) {
                    small->send(1, v);
                } else {
                    t_last = now_s();
                }
            },
            "pingpong_small");
        cascade::LargeActiveMsg<char, int>* large = nullptr;
        large = comm.make_large_active_msg(
            [&](int& k) {
                ++count;
                if (me == 1) {
                    large->send_large(0, cascade::view<char>(sbuf.data(), cur), k);
                } else if (count < n_goal) {
                    large->send_large(1, cascade::view<char>(sbuf.data(), cur), k + 1);
                } else {
                    t_last = now_s();
                }
            },
            [&](int&) { return rbuf.data(); }, [](int&) {}, "pingpong_large");

        // One timed ping-pong of n round trips; returns {one-way seconds, join tail seconds}.
        auto once = [&](const std::string& sys, const std::string& mode, std::size_t bytes,
                        long n) -> std::tuple<double, double, double> {
            if (sys == "mpi") {
                MPI_Barrier(MPI_COMM_WORLD);
                const double t0 = now_s();
                const int b = static_cast<int>(bytes);
                for (long i = 0; i < n; ++i) {
                    if (me == 0) {
                        MPI_Send(sbuf.data(), b, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
                        MPI_Recv(rbuf.data(), b, MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    } else {
                        MPI_Recv(rbuf.data(), b, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                        MPI_Send(sbuf.data(), b, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
                    }
                }
                return {(now_s() - t0) / (2.0 * static_cast<double>(n)), 0.0, 0.0};
            }
            n_goal = n;
            count = 0;
            cur = bytes;
            t_last = 0;
            tp.start();
            MPI_Barrier(MPI_COMM_WORLD);
            const ThreadUsage u0 = ThreadUsage::now();
            const double t0 = now_s();
            if (me == 0) {
                if (sys == "small_am")
                    small->send(1, cascade::view<char>(sbuf.data(), bytes));
                else
                    large->send_large(1, cascade::view<char>(sbuf.data(), bytes), 0);
            }
            if (mode == "poll")
                while (count < n)
                    comm.progress();
            tp.join();
            const double t_join = now_s();
            if (count != n)
                throw std::runtime_error("rank " + std::to_string(me) + ": " +
                                         std::to_string(count) + " messages instead of " +
                                         std::to_string(n));
            if (me != 0) return {0.0, 0.0, 0.0};
            const ThreadUsage du = ThreadUsage::now() - u0;  // includes the join tail's naps
            return {(t_last - t0) / (2.0 * static_cast<double>(n)), t_join - t_last,
                    static_cast<double>(du.nvcsw) / static_cast<double>(n)};
        };

        auto measure = [&](const std::string& sys, const std::string& mode, std::size_t bytes) {
            Result r;
            // Pilot (warm-up): a few round trips, then size n for target_s per repeat.
            long pilot = 4;
            double est = 0;
            for (int k = 0; k < 2; ++k)
                est = std::get<0>(once(sys, mode, bytes, pilot));
            double n_d = est > 0 ? target_s / (2 * est) : 1000;
            long n = std::clamp(static_cast<long>(n_d), 4L, max_n);
            MPI_Bcast(&n, 1, MPI_LONG, 0, MPI_COMM_WORLD);
            r.n = n;
            for (int k = 0; k < repeats; ++k) {
                auto [ow, tail, sl] = once(sys, mode, bytes, n);
                r.one_way_s.push_back(ow);
                r.tail_s.push_back(tail);
                r.sleeps.push_back(sl);
            }
            return r;
        };

        auto report = [&](const std::string& sys, const std::string& variant,
                          const std::string& mode, std::size_t bytes, const Result& r) {
            if (me != 0) return;
            const double lat = median(r.one_way_s);
            Record rec;
            rec.add("bench", "latency")
                .add("system", sys == "mpi" ? "mpi" : "cascade")
                .add("variant", variant)
                .add("progress", mode)
                .add("bytes", static_cast<long>(bytes))
                .add("ranks", 2)
                .add("threads", sys == "mpi" ? 0 : threads)
                .add("latency_us", lat * 1e6)
                .add("latency_us_min", vmin(r.one_way_s) * 1e6)
                .add("latency_us_max", vmax(r.one_way_s) * 1e6)
                .add("bandwidth_GBps", static_cast<double>(bytes) / lat * 1e-9)
                .add("round_trips", r.n)
                .add("repeats", static_cast<long>(r.one_way_s.size()))
                .add("timing", sys == "mpi" ? "loop" : "handler");
            if (sys != "mpi")
                rec.add("join_tail_us", median(r.tail_s) * 1e6)
                    .add("sleeps_per_reply", median(r.sleeps))
                    .add("timerslack_ns", slack_ns);
            rec.print();
        };

        // Interleave systems per size so they see the same machine state.
        for (long s : sizes) {
            const auto bytes = static_cast<std::size_t>(s);
            for (const auto& sys : systems) {
                if (sys == "mpi") {
                    report(sys, "send_recv", "blocking", bytes, measure(sys, "blocking", bytes));
                    continue;
                }
                if (sys == "small_am" && s > small_max) continue;
                if (sys == "large_am" && s < large_min) continue;
                if (sys != "small_am" && sys != "large_am")
                    throw std::runtime_error("unknown system " + sys);
                for (const auto& mode : modes)
                    report(sys, sys, mode, bytes, measure(sys, mode, bytes));
            }
        }
        return 0;
    });
}
