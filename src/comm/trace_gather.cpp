// The MPI half of the trace: clock offsets to rank 0 when the Communicator is created, and
// the blobs of every rank sent to rank 0 when it is destroyed (trace/export.hpp makes and
// writes them), or with "%r" in the paths each rank's blob written by that rank.
#include "cascade/comm/detail/trace_gather.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "cascade/comm/detail/constants.hpp"
#include "cascade/trace/export.hpp"
#include "cascade/trace/recorder.hpp"

namespace cascade::detail {

namespace {
constexpr int kSyncTag = comm::kTraceTag;
constexpr int kSyncRounds = 16;
}  // namespace

void trace_start(MPI_Comm comm) {
    trace::init_from_env();
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    // Everyone follows rank 0, so the collectives below and in trace_finish() match.
    // Bit 0: record; bit 1: record promise edges too (rank 0 writes the task graph); bit 2:
    // one file per rank (rank 0's paths hold %r), which every rank then writes itself.
    int on = trace::recording() ? (trace::recording_edges() ? 3 : 1) : 0;
    if (on && trace::per_rank_files()) on |= 4;
    MPI_Bcast(&on, 1, MPI_INT, 0, comm);
    if (!on) {
        if (trace::recording()) trace::configure(trace::Options{});
        return;
    }
    if (on & 4) {
        // Rank 0's path patterns, so that every rank writes where rank 0 was told to.
        trace::Options o = trace::options();
        for (std::string* path : {&o.trace_path, &o.dag_path}) {
            int n = static_cast<int>(path->size());
            MPI_Bcast(&n, 1, MPI_INT, 0, comm);
            path->resize(static_cast<std::size_t>(n));
            MPI_Bcast(path->data(), n, MPI_CHAR, 0, comm);
        }
        if (rank != 0) trace::configure(std::move(o));
    } else if (!trace::recording()) {
        // Record here too (rank 0 writes everything): no paths of our own.
        trace::configure(trace::Options{});
        trace::set_recording(true);
    }
    trace::set_recording_edges((on & 2) != 0);
    // Every rank learns rank 0's trace path: a rank that ends the job early writes its own
    // events beside it.
    {
        std::string path = rank == 0 ? trace::options().trace_path : std::string();
        if (path.empty() && rank == 0) path = trace::options().dag_path;
        long long len = static_cast<long long>(path.size());
        MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, comm);
        path.resize(static_cast<std::size_t>(len));
        if (len > 0) MPI_Bcast(path.data(), static_cast<int>(len), MPI_CHAR, 0, comm);
        trace::set_rank_files_base(path);
    }
    // Offset to rank 0's clock. Ranks on one node read the same clock (steady_clock is the
    // system-wide CLOCK_MONOTONIC on Linux), so only the lowest rank of each node measures its
    // offset, from the ping-pong with rank 0 with the smallest round trip, and hands it to the
    // others of its node. On one node every offset is exactly 0: a delayed ping-pong (ranks
    // oversubscribed on a busy machine) cannot skew the picture, and a message never appears to
    // arrive before it was sent.
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    int node_rank = 0;
    MPI_Comm_rank(node, &node_rank);
    int same_node_as_root = 0;
    {
        // Rank 0 is a leader (it has the lowest rank of its node); its node's ranks learn that.
        int root_here = rank == 0 ? 1 : 0;
        MPI_Allreduce(&root_here, &same_node_as_root, 1, MPI_INT, MPI_MAX, node);
    }
    // Rank 0 serves every other leader whose node it does not share, in rank order.
    std::vector<int> leaders(rank == 0 ? size : 0);
    int remote_leader = (node_rank == 0 && rank != 0 && !same_node_as_root) ? 1 : 0;
    MPI_Gather(&remote_leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, 0, comm);
    std::int64_t offset = 0;
    if (rank == 0) {
        for (int r = 1; r < size; ++r) {
            if (!leaders[r]) continue;
            for (int i = 0; i < kSyncRounds; ++i) {
                MPI_Recv(nullptr, 0, MPI_BYTE, r, kSyncTag, comm, MPI_STATUS_IGNORE);
                const std::int64_t t = trace::now_ns();
                MPI_Send(&t, 1, MPI_INT64_T, r, kSyncTag, comm);
            }
        }
    } else if (remote_leader) {
        std::int64_t best_rtt = INT64_MAX;
        for (int i = 0; i < kSyncRounds; ++i) {
            const std::int64_t a = trace::now_ns();
            MPI_Send(nullptr, 0, MPI_BYTE, 0, kSyncTag, comm);
            std::int64_t t0 = 0;
            MPI_Recv(&t0, 1, MPI_INT64_T, 0, kSyncTag, comm, MPI_STATUS_IGNORE);
            const std::int64_t b = trace::now_ns();
            if (b - a < best_rtt) {
                best_rtt = b - a;
                offset = t0 - (a + (b - a) / 2);
            }
        }
    }
    MPI_Bcast(&offset, 1, MPI_INT64_T, 0, node);
    MPI_Comm_free(&node);
    trace::set_clock_offset(offset);
}

void trace_finish(MPI_Comm comm, const std::vector<std::string>& am_names) {
    if (!trace::recording()) return;
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    std::vector<char> mine = trace::collect(rank, &am_names);
    if (trace::per_rank_files()) {  // each rank writes its own file; nothing is gathered
        trace::set_written(true);
        trace::write_files({std::move(mine)}, rank);
        return;
    }
    long long n = static_cast<long long>(mine.size());
    std::vector<long long> sizes(rank == 0 ? size : 0);
    MPI_Gather(&n, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG, 0, comm);
    // Per-rank blobs may exceed what an int count holds: send in chunks of at most 1 GiB.
    constexpr long long kChunk = 1LL << 30;
    trace::set_written(true);
    if (rank != 0) {
        for (long long off = 0; off < n; off += kChunk)
            MPI_Send(mine.data() + off, static_cast<int>(std::min(kChunk, n - off)), MPI_BYTE, 0,
                     kSyncTag, comm);
        return;
    }
    std::vector<std::vector<char>> all;
    all.push_back(std::move(mine));
    for (int r = 1; r < size; ++r) {
        std::vector<char> blob(static_cast<std::size_t>(sizes[static_cast<std::size_t>(r)]));
        const long long m = static_cast<long long>(blob.size());
        for (long long off = 0; off < m; off += kChunk)
            MPI_Recv(blob.data() + off, static_cast<int>(std::min(kChunk, m - off)), MPI_BYTE, r,
                     kSyncTag, comm, MPI_STATUS_IGNORE);
        all.push_back(std::move(blob));
    }
    trace::write_files(all);
}

}  // namespace cascade::detail
