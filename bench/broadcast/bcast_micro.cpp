// Broadcast micro-benchmark: one payload from rank 0 to every other rank, timed from the
// root's start (after a barrier) to the last delivery (the latest handler / on_arrival stamp,
// or MPI_Bcast return, on any rank), the dynamic broadcasts paper's §5.1 measure.
//   naive               a loop of point-to-point sends from the root
//   tree_binomial       Cascade's broadcast, binomial shape
//   tree_pipelined      Cascade's broadcast, pipelined chain (bodies only)
//   mpi_bcast           MPI_Bcast (whatever the mpiexec's MCA settings select)
//   plain_loop          not Cascade: a loop of blocking MPI_Send from the root
//   plain_tree          not Cascade: a binomial tree of blocking MPI_Send / MPI_Recv (the
//                       model a tree is measured against)
//   plain_tree_ack      the same, each node sending to its next child only once the previous
//                       one answered a 0-byte message (it has the whole body)
//   pairs               not a broadcast: ranks i < P/2 each send `bytes` to i + P/2 at once,
//                       reports the slowest pair's rate (to check that P/2 links run at rate)
// Payloads of 8 B travel as small active messages (one 8-byte argument), larger ones as
// large active messages (the body from the root's buffer into where_to's buffer).
// Configurations are interleaved: each repetition runs every (system, bytes) once. Rank 0
// prints one JSON object per configuration: median seconds, samples, root messages.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cascade/cascade.hpp"

namespace {

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at <= s.size()) {
        const std::size_t c = s.find(',', at);
        out.push_back(s.substr(at, c == std::string::npos ? std::string::npos : c - at));
        if (c == std::string::npos) break;
        at = c + 1;
    }
    return out;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.empty() ? 0 : v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace

int main(int argc, char** argv) {
    std::string systems = "naive,tree_binomial,tree_pipelined,mpi_bcast";
    std::string sizes = "8,65536,1048576,8388608";
    std::string label_mpi = "mpi_bcast";
    int reps = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i], v = argv[i + 1];
        if (k == "--systems") systems = v;
        if (k == "--bytes") sizes = v;
        if (k == "--reps") reps = std::stoi(v);
        if (k == "--mpi-label") label_mpi = v;
    }
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int me = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const std::vector<std::string> sys = split(systems);
    std::vector<std::size_t> bytes;
    for (const auto& b : split(sizes))
        bytes.push_back(std::stoull(b));
    const std::size_t max_bytes = *std::max_element(bytes.begin(), bytes.end());
    std::vector<char> tx(max_bytes, 'b'), rx(max_bytes);

    {
        cascade::Communicator comm;
        comm.broadcasts().set_detection(false);
        cascade::Threadpool tp(1, &comm);
        double arrived = 0;
        auto small =
            comm.make_active_msg([&](std::uint64_t&) { arrived = MPI_Wtime(); }, "bench.small");
        auto large =
            comm.make_large_active_msg([&](int&) { arrived = MPI_Wtime(); },
                                       [&](int&) { return rx.data(); }, [](int&) {}, "bench.large");
        std::vector<int> others;
        for (int r = 1; r < n; ++r)
            others.push_back(r);
        struct Result {
            std::vector<double> samples;
            double root_messages = 0;
        };
        std::vector<Result> results(sys.size() * bytes.size());
        for (int rep = 0; rep < reps; ++rep) {
            for (std::size_t b = 0; b < bytes.size(); ++b) {
                for (std::size_t s = 0; s < sys.size(); ++s) {
                    const std::string& system = sys[s];
                    const std::size_t nb = bytes[b];
                    if (system == "tree_pipelined" && nb <= 8) continue;
                    arrived = 0;
                    double root_msgs = 0;
                    MPI_Barrier(MPI_COMM_WORLD);
                    const double t0 = MPI_Wtime();
                    if (system == "mpi_bcast") {
                        MPI_Bcast(me == 0 ? tx.data() : rx.data(), static_cast<int>(nb), MPI_BYTE,
                                  0, MPI_COMM_WORLD);
                        if (me != 0) arrived = MPI_Wtime();
                    } else if (system == "plain_loop") {
                        if (me == 0) {
                            for (int d = 1; d < n; ++d)
                                MPI_Send(tx.data(), static_cast<int>(nb), MPI_BYTE, d, 9,
                                         MPI_COMM_WORLD);
                        } else {
                            MPI_Recv(rx.data(), static_cast<int>(nb), MPI_BYTE, 0, 9,
                                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                            arrived = MPI_Wtime();
                        }
                        root_msgs = n - 1;
                    } else if (system == "plain_tree_ack") {
                        // The same, but a node sends to its next child only once the previous
                        // one said it has the whole message (a 0-byte reply).
                        int mask = 1;
                        while (mask < n && !(me & mask))
                            mask <<= 1;
                        const int parent = me - mask;
                        if (me != 0) {
                            MPI_Recv(rx.data(), static_cast<int>(nb), MPI_BYTE, parent, 9,
                                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                            arrived = MPI_Wtime();
                            MPI_Send(nullptr, 0, MPI_BYTE, parent, 10, MPI_COMM_WORLD);
                        }
                        const char* from = me == 0 ? tx.data() : rx.data();
                        for (mask >>= 1; mask > 0; mask >>= 1) {
                            if (me + mask < n) {
                                MPI_Send(from, static_cast<int>(nb), MPI_BYTE, me + mask, 9,
                                         MPI_COMM_WORLD);
                                MPI_Recv(nullptr, 0, MPI_BYTE, me + mask, 10, MPI_COMM_WORLD,
                                         MPI_STATUS_IGNORE);
                                if (me == 0) ++root_msgs;
                            }
                        }
                    } else if (system == "plain_tree") {
                        // Receive from the parent (the rank without this rank's lowest set
                        // bit), then send to me + 2^k for the bits below it, largest first.
                        int mask = 1;
                        while (mask < n && !(me & mask))
                            mask <<= 1;
                        if (me != 0) {
                            MPI_Recv(rx.data(), static_cast<int>(nb), MPI_BYTE, me - mask, 9,
                                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                            arrived = MPI_Wtime();
                        }
                        const char* from = me == 0 ? tx.data() : rx.data();
                        for (mask >>= 1; mask > 0; mask >>= 1) {
                            if (me + mask < n) {
                                MPI_Send(from, static_cast<int>(nb), MPI_BYTE, me + mask, 9,
                                         MPI_COMM_WORLD);
                                if (me == 0) ++root_msgs;
                            }
                        }
                    } else if (system == "pairs") {
                        const int half = n / 2;
                        if (me < half)
                            MPI_Send(tx.data(), static_cast<int>(nb), MPI_BYTE, me + half, 9,
                                     MPI_COMM_WORLD);
                        else if (me < 2 * half) {
                            MPI_Recv(rx.data(), static_cast<int>(nb), MPI_BYTE, me - half, 9,
                                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                            arrived = MPI_Wtime();
                        }
                    } else {
                        const auto before = comm.broadcasts().stats();
                        if (system == "tree_binomial")
                            comm.broadcasts().set_shape(cascade::BroadcastShape::binomial);
                        if (system == "tree_pipelined")
                            comm.broadcasts().set_shape(cascade::BroadcastShape::pipelined);
                        if (me == 0) {
                            const cascade::view<char> body(tx.data(), nb);
                            if (system == "naive") {
                                for (int d : others) {
                                    if (nb <= 8)
                                        small->send_now(d, std::uint64_t(7));
                                    else
                                        large->send_large_now(d, body, 0);
                                }
                                root_msgs = double(others.size());
                            } else if (nb <= 8) {
                                small->send(others, std::uint64_t(7));
                            } else {
                                large->send_large(others, body, 0);
                            }
                        }
                        tp.join();
                        if (system != "naive")
                            root_msgs = double(comm.broadcasts().stats().root_messages -
                                               before.root_messages);
                    }
                    double dt = arrived > 0 ? arrived - t0 : 0, worst = 0;
                    MPI_Reduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                    Result& r = results[s * bytes.size() + b];
                    r.samples.push_back(worst);
                    r.root_messages = root_msgs;
                }
            }
        }
        if (me == 0) {
            for (std::size_t s = 0; s < sys.size(); ++s)
                for (std::size_t b = 0; b < bytes.size(); ++b) {
                    const Result& r = results[s * bytes.size() + b];
                    if (r.samples.empty()) continue;
                    std::string system = sys[s], shape = "null";
                    if (system == "tree_binomial") system = "tree", shape = "\"binomial\"";
                    if (system == "tree_pipelined") system = "tree", shape = "\"pipelined\"";
                    if (system == "mpi_bcast") system = label_mpi;
                    std::string samples;
                    for (double x : r.samples) {
                        if (!samples.empty()) samples += ',';
                        samples += std::to_string(x);
                    }
                    const bool cascade_sys = sys[s] == "naive" || sys[s].rfind("tree", 0) == 0 ||
                                             sys[s].rfind("plain", 0) == 0;
                    std::printf(
                        "{\"bench\":\"micro\",\"system\":\"%s\",\"shape\":%s,\"ranks\":%d,"
                        "\"bytes\":%zu,\"seconds\":%.9g,\"root_messages\":%s,\"body_copies\":%s,"
                        "\"samples\":[%s]}\n",
                        system.c_str(), shape.c_str(), n, bytes[b], median(r.samples),
                        cascade_sys ? std::to_string(int(r.root_messages)).c_str() : "null",
                        cascade_sys ? "0" : "null", samples.c_str());
                }
            std::fflush(stdout);
        }
    }
    MPI_Finalize();
    return 0;
}
