// Back-to-back epochs: an iterative code that ends every step with a global synchronization.
// Ranks form a ring; each step every rank sends a small halo (--halo-bytes) to both
// neighbours and waits until everything of the step arrived everywhere.
//
//   system "cascade": each step one task on this rank's pool sends the halo to both
//                     neighbours as active messages (their handlers copy it in), then
//                     tp.join(): distributed completion detection, once per step;
//   system "mpi":     MPI_Irecv / MPI_Isend to both neighbours, MPI_Waitall, MPI_Barrier.
// Variant "empty" is the same loop with nothing sent: the cost of the synchronization alone.
// --joiner-works 1: the thread in join() is the pool's worker 0 (no worker thread beside it
// with --threads 1).
//
// cpu_us_per_step: the CPU time of all ranks' processes (every thread, user and system) per
// step, median over rounds: what the step costs when the ranks share cores, less sensitive
// than the wall time to other load on the machine. ctrl_msgs_per_step: the completion
// protocol's messages between ranks per step (CommStats::control_messages_sent, all ranks).
//
// The systems alternate over --repeats rounds of --steps steps; per round the slowest rank's
// time is kept; us_per_step is the median over rounds.
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "cascade/cascade.hpp"
#include "common.hpp"

using namespace commbench;

int main(int argc, char** argv) {
    return guarded_main(argc, argv, "comm_epochs", [](Args& a) {
        const int steps = static_cast<int>(a.num("steps", 1000));
        const int repeats = static_cast<int>(a.num("repeats", 5));
        const int threads = static_cast<int>(a.num("threads", 1));
        // 1: the thread in join() is worker 0 (ThreadpoolOptions::joiner_works).
        const bool joiner_works = a.num("joiner-works", 0) != 0;
        const auto halo_bytes = static_cast<std::size_t>(a.num("halo-bytes", 512));
        const auto variants = a.words("variants", "halo,empty");
        const auto systems = a.words("systems", "cascade,mpi");
        a.check();

        cascade::Communicator comm;
        const int me = comm.rank(), n = comm.ranks();
        const int left = (me + n - 1) % n, right = (me + 1) % n;
        cascade::Threadpool tp(threads, &comm, {.name = "epochs", .joiner_works = joiner_works});
        std::vector<char> out(halo_bytes, static_cast<char>(me)), from_left(halo_bytes),
            from_right(halo_bytes);
        long received = 0;
        auto* halo = comm.make_active_msg([&](int& from, cascade::view<char>& v) {
            std::memcpy(from == left ? from_left.data() : from_right.data(), v.data(), v.size());
            ++received;
        });
        cascade::Taskflow<int> step_tf(&tp, "step");
        step_tf.set_task([&](int) {
            const cascade::view<char> v(out.data(), out.size());
            halo->send(left, me, v);
            if (right != left) halo->send(right, me, v);
        });

        int next_key = 0;  // keys never repeat (checked mode remembers completed ones)
        auto run_cascade = [&](bool send) {
            for (int s = 0; s < steps; ++s) {
                if (send) step_tf.fulfill_promise(next_key++);
                tp.join();
            }
        };
        auto run_mpi = [&](bool send) {
            MPI_Request reqs[4];
            for (int s = 0; s < steps; ++s) {
                if (send) {
                    const int k = static_cast<int>(halo_bytes);
                    MPI_Irecv(from_left.data(), k, MPI_BYTE, left, 7, MPI_COMM_WORLD, &reqs[0]);
                    MPI_Irecv(from_right.data(), k, MPI_BYTE, right, 7, MPI_COMM_WORLD, &reqs[1]);
                    MPI_Isend(out.data(), k, MPI_BYTE, right, 7, MPI_COMM_WORLD, &reqs[2]);
                    MPI_Isend(out.data(), k, MPI_BYTE, left, 7, MPI_COMM_WORLD, &reqs[3]);
                    MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE);
                }
                MPI_Barrier(MPI_COMM_WORLD);
            }
        };

        for (const auto& v : variants) {
            if (v != "halo" && v != "empty") throw std::runtime_error("unknown variant " + v);
            const bool send = v == "halo";
            std::vector<std::vector<double>> per_system(systems.size());
            std::vector<std::vector<double>> cpu_system(systems.size());  // all ranks' CPU time
            std::uint64_t ctrl = 0;  // completion messages all ranks sent in Cascade's steps
            long cascade_steps = 0;
            for (int r = 0; r < repeats; ++r) {
                for (std::size_t si = 0; si < systems.size(); ++si) {
                    const std::string& sys = systems[(si + static_cast<std::size_t>(r)) %
                                                     systems.size()];  // alternate who goes first
                    const std::size_t slot = static_cast<std::size_t>(
                        std::find(systems.begin(), systems.end(), sys) - systems.begin());
                    MPI_Barrier(MPI_COMM_WORLD);
                    const double t0 = now_s(), c0 = process_cpu_s();
                    const std::uint64_t ctrl0 = comm.stats().control_messages_sent;
                    if (sys == "cascade") {
                        run_cascade(send);
                        ctrl += comm.stats().control_messages_sent - ctrl0;
                        cascade_steps += steps;
                    } else if (sys == "mpi")
                        run_mpi(send);
                    else
                        throw std::runtime_error("unknown system " + sys);
                    const double t = now_s() - t0;
                    per_system[slot].push_back(allreduce(t, MPI_MAX));
                    cpu_system[slot].push_back(allreduce(process_cpu_s() - c0, MPI_SUM));
                }
            }
            if (send && received != static_cast<long>(repeats) * steps * (left == right ? 1 : 2) *
                                        static_cast<long>(
                                            std::count(systems.begin(), systems.end(), "cascade")))
                throw std::runtime_error("halo messages lost: " + std::to_string(received));
            received = 0;
            const double ctrl_per_step = cascade_steps > 0
                                             ? allreduce(static_cast<double>(ctrl), MPI_SUM) /
                                                   static_cast<double>(cascade_steps)
                                             : 0.0;
            for (std::size_t si = 0; si < systems.size(); ++si) {
                std::vector<double> us, cpu_us;
                for (double t : per_system[si])
                    us.push_back(t / steps * 1e6);
                for (double t : cpu_system[si])
                    cpu_us.push_back(t / steps * 1e6);
                if (me == 0)
                    Record()
                        .add("bench", "epochs")
                        .add("system", systems[si])
                        .add("variant", v)
                        .add("ranks", n)
                        .add("threads", systems[si] == "mpi" ? 0 : threads)
                        .add("halo_bytes", static_cast<long>(send ? halo_bytes : 0))
                        .add("steps", static_cast<long>(steps))
                        .add("us_per_step", median(us))
                        .add("us_per_step_min", vmin(us))
                        .add("us_per_step_max", vmax(us))
                        .add("cpu_us_per_step", median(cpu_us))
                        .add("repeats", static_cast<long>(repeats))
                        .add("ctrl_msgs_per_step", systems[si] == "cascade" ? ctrl_per_step : 0.0)
                        .add("stat", "median over repeats of the slowest rank's steps")
                        .print();
            }
        }
        return 0;
    });
}
