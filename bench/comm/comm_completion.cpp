// Completion-detection latency: a distributed Threadpool with no work at all; every rank
// times tp.join() after an MPI_Barrier. Per repeat the maximum over ranks is kept; the
// median (and p90) over --reps repeats is reported.
//
// Variants (system "cascade"):
//   join          tp.start(), MPI_Barrier, time tp.join(): what a user sees. Includes the
//                 workers' idle back-off (a pool only counts as idle once its workers sleep),
//                 the COUNT/REQUEST/CONFIRM/SHUTDOWN exchange driven by the joiner's polls,
//                 which nap 20 us .. 1 ms when a poll finds nothing, and stopping the workers.
//   join_settled  as join, but the workers are given --settle-ms to fall asleep before the
//                 barrier: the protocol and the naps without the back-off.
//   busy_poll     diagnostic: settled workers as in join_settled; after the barrier the main
//                 thread calls comm.poll(tp) in a tight loop (no naps) until the protocol
//                 says done; then an untimed join (which stops the workers after one more
//                 completion round). Settling matters here: a busy main thread sharing a
//                 core with a worker that is still backing off (yielding) starves it for
//                 whole scheduler time slices.
// System "mpi": an MPI_Barrier after the barrier, the raw cost of "everyone agrees".
#include <thread>
#include <vector>

#include "cascade/cascade.hpp"
#include "common.hpp"

using namespace commbench;

int main(int argc, char** argv) {
    return guarded_main(argc, argv, "comm_completion", [](Args& a) {
        const int reps = static_cast<int>(a.num("reps", 50));
        const int warmup = static_cast<int>(a.num("warmup", 5));
        const int threads = static_cast<int>(a.num("threads", 1));
        const double settle_s = a.real("settle-ms", 5) * 1e-3;
        const auto variants = a.words("variants", "join,join_settled,busy_poll,mpi");
        a.check();

        cascade::Communicator comm;
        const int me = comm.rank(), n = comm.ranks();
        cascade::Threadpool tp(threads, &comm, 0, "completion", false);

        auto once = [&](const std::string& v) {
            if (v == "mpi") {
                MPI_Barrier(MPI_COMM_WORLD);
                const double t0 = now_s();
                MPI_Barrier(MPI_COMM_WORLD);
                return now_s() - t0;
            }
            tp.start();
            if (v == "join_settled" || v == "busy_poll")
                std::this_thread::sleep_for(std::chrono::duration<double>(settle_s));
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = now_s();
            double t1 = 0;
            if (v == "busy_poll") {
                while (comm.poll(tp) != cascade::PollResult::done) {
                }
                t1 = now_s();
                tp.join();
            } else if (v == "join" || v == "join_settled") {
                tp.join();
                t1 = now_s();
            } else {
                throw std::runtime_error("unknown variant " + v);
            }
            return t1 - t0;
        };

        for (const auto& v : variants) {
            for (int k = 0; k < warmup; ++k)
                once(v);
            std::vector<double> maxes, mine;
            for (int k = 0; k < reps; ++k) {
                const double t = once(v);
                mine.push_back(t);
                maxes.push_back(allreduce(t, MPI_MAX));
            }
            if (me == 0)
                Record()
                    .add("bench", "completion")
                    .add("system", v == "mpi" ? "mpi" : "cascade")
                    .add("variant", v == "mpi" ? std::string("barrier") : v)
                    .add("bytes", 0L)
                    .add("ranks", n)
                    .add("threads", v == "mpi" ? 0 : threads)
                    .add("completion_us", median(maxes) * 1e6)
                    .add("completion_us_p10", quantile(maxes, 0.1) * 1e6)
                    .add("completion_us_p90", quantile(maxes, 0.9) * 1e6)
                    .add("completion_us_min", vmin(maxes) * 1e6)
                    .add("completion_us_max", vmax(maxes) * 1e6)
                    .add("rank0_us", median(mine) * 1e6)
                    .add("reps", static_cast<long>(reps))
                    .add("stat", "median over reps of the max over ranks")
                    .print();
        }
        return 0;
    });
}
