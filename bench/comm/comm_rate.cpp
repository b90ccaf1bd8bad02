// Message rate of small active messages (one std::uint64_t argument: 8 payload bytes) from
// rank 0 to rank 1, aggregation on and off, against raw MPI (MPI_Isend of 8-byte messages
// in windows of --window, the receiver pre-posting the matching MPI_Irecv window, as in the
// OSU message-rate test).
//
// Cascade sources:
//   task  one task on rank 0's worker sends all M messages while the joining thread flushes
//         them (sending and MPI progress overlap, the realistic case);
//   main  the main thread queues all M before tp.join() (one flush then ships everything).
// Timing: rank 0 from just before the first send to the arrival of rank 1's acknowledgement
// (one small AM sent by rank 1's handler after the M-th message), so the rate covers
// delivery, not just queueing. mpi_messages: MPI messages rank 0 sent for the M AMs.
// M is --messages for raw MPI and aggregated AMs, --noagg-messages without aggregation.
#include <vector>

#include "cascade/cascade.hpp"
#include "common.hpp"

using namespace commbench;

int main(int argc, char** argv) {
    return guarded_main(argc, argv, "comm_rate", [](Args& a) {
        const long M_agg = a.num("messages", 1000000);
        // Without aggregation every AM is its own MPI_Isend, all posted at once; Open MPI's
        // pending-send handling then costs O(outstanding) per progress call (perf: mutex
        // lock/unlock in mca_pml_ob1_progress under every MPI_Iprobe/MPI_Testall), quadratic
        // in the burst, so these runs use smaller bursts, at two sizes to show the growth.
        const std::vector<long> M_noagg = a.list("noagg-messages", {10000, 30000});
        const int repeats = static_cast<int>(a.num("repeats", 3));
        const int window = static_cast<int>(a.num("window", 64));
        const auto sources = a.words("sources", "task,main");
        const int threads = static_cast<int>(a.num("threads", 1));
        a.check();

        cascade::Communicator comm;
        const int me = comm.rank();
        if (comm.ranks() != 2) throw std::runtime_error("run with exactly 2 ranks");
        cascade::Threadpool tp(threads, &comm, 0, "rate", false);

        long M = M_agg;  // messages of the current run
        long received = 0;
        std::uint64_t checksum = 0;
        double t_ack = 0;
        cascade::ActiveMsg<long>* ack = nullptr;
        ack = comm.make_active_msg([&](long&) { t_ack = now_s(); }, "rate_ack");
        auto* msg = comm.make_active_msg(
            [&](std::uint64_t& x) {
                checksum += x;
                if (++received == M) ack->send(0, received);
            },
            "rate_msg");

        auto cascade_once = [&](const std::string& source, bool aggregate,
                                std::uint64_t& mpi_msgs) {
            comm.set_aggregation(aggregate);
            received = 0;
            checksum = 0;
            t_ack = 0;
            tp.start();
            MPI_Barrier(MPI_COMM_WORLD);
            const std::uint64_t sent0 = comm.stats().mpi_messages_sent;
            const double t0 = now_s();
            if (me == 0) {
                if (source == "task") {
                    tp.insert([&] {
                        for (long i = 0; i < M; ++i)
                            msg->send(1, static_cast<std::uint64_t>(i));
                    });
                } else {
                    for (long i = 0; i < M; ++i)
                        msg->send(1, static_cast<std::uint64_t>(i));
                }
            }
            tp.join();
            mpi_msgs = comm.stats().mpi_messages_sent - sent0;
            if (me == 1 &&
                (received != M || checksum != static_cast<std::uint64_t>(M) * (M - 1) / 2))
                throw std::runtime_error("rank 1 received " + std::to_string(received) + " of " +
                                         std::to_string(M) + " messages (or a bad checksum)");
            return t_ack - t0;
        };

        auto mpi_once = [&]() {
            std::vector<std::uint64_t> bufs(static_cast<std::size_t>(window));
            std::vector<MPI_Request> reqs(static_cast<std::size_t>(window));
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = now_s();
            for (long done = 0; done < M;) {
                const int w = static_cast<int>(std::min<long>(window, M - done));
                for (int i = 0; i < w; ++i) {
                    if (me == 0) {
                        bufs[i] = static_cast<std::uint64_t>(done + i);
                        MPI_Isend(&bufs[i], 8, MPI_BYTE, 1, 9, MPI_COMM_WORLD, &reqs[i]);
                    } else {
                        MPI_Irecv(&bufs[i], 8, MPI_BYTE, 0, 9, MPI_COMM_WORLD, &reqs[i]);
                    }
                }
                MPI_Waitall(w, reqs.data(), MPI_STATUSES_IGNORE);
                done += w;
            }
            char c = 0;
            if (me == 1)
                MPI_Send(&c, 1, MPI_CHAR, 0, 10, MPI_COMM_WORLD);
            else
                MPI_Recv(&c, 1, MPI_CHAR, 1, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            return now_s() - t0;
        };

        auto report = [&](const char* system, const std::string& variant, const std::string& source,
                          const std::vector<double>& secs, std::uint64_t mpi_msgs, int thr) {
            if (me != 0) return;
            std::vector<double> rates;
            for (double s : secs)
                rates.push_back(static_cast<double>(M) / s);
            Record()
                .add("bench", "rate")
                .add("system", system)
                .add("variant", variant)
                .add("source", source)
                .add("bytes", 8L)
                .add("ranks", 2)
                .add("threads", thr)
                .add("messages", M)
                .add("msgs_per_s", median(rates))
                .add("msgs_per_s_max", vmax(rates))
                .add("msgs_per_s_min", vmin(rates))
                .add("seconds", median(secs))
                .add("mpi_messages", mpi_msgs)
                .add("repeats", static_cast<long>(secs.size()))
                .print();
        };

        // Warm-up (connections, buffers).
        {
            std::uint64_t ignored = 0;
            mpi_once();
            cascade_once("main", true, ignored);
        }
        {
            std::vector<double> s;
            for (int r = 0; r < repeats; ++r)
                s.push_back(mpi_once());
            report("mpi", "isend_window" + std::to_string(window), "main", s,
                   static_cast<std::uint64_t>(M), 0);
            for (const auto& source : sources)
                for (bool agg : {true, false})
                    for (long m : agg ? std::vector<long>{M_agg} : M_noagg) {
                        M = m;
                        std::vector<double> t;
                        std::uint64_t msgs = 0;
                        for (int r = 0; r < repeats; ++r)
                            t.push_back(cascade_once(source, agg, msgs));
                        report("cascade", agg ? "aggregation_on" : "aggregation_off", source, t,
                               msgs, threads);
                    }
            M = M_agg;
        }
        return 0;
    });
}
