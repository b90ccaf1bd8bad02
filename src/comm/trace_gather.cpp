// The MPI half of the trace: clock offsets to rank 0 when the Communicator is created, and
// the blobs of every rank sent to rank 0 when it is destroyed (trace/export.hpp makes and
// writes them), or with "%r" in the paths each rank's blob written by that rank.
#include "cascade/comm/detail/trace_gather.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "cascade/trace/export.hpp"
#include "cascade/trace/recorder.hpp"

namespace cascade::detail {

namespace {
constexpr int kSyncTag = 0x7ace;
constexpr int kSyncRounds = 8;
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
    // Offset to rank 0's clock, from the round trip with the smallest delay.
    if (rank == 0) {
        for (int r = 1; r < size; ++r)
            for (int i = 0; i < kSyncRounds; ++i) {
                MPI_Recv(nullptr, 0, MPI_BYTE, r, kSyncTag, comm, MPI_STATUS_IGNORE);
                const std::int64_t t = trace::now_ns();
                MPI_Send(&t, 1, MPI_INT64_T, r, kSyncTag, comm);
            }
        trace::set_clock_offset(0);
    } else {
        std::int64_t best_rtt = INT64_MAX, best = 0;
        for (int i = 0; i < kSyncRounds; ++i) {
            const std::int64_t a = trace::now_ns();
            MPI_Send(nullptr, 0, MPI_BYTE, 0, kSyncTag, comm);
            std::int64_t t0 = 0;
            MPI_Recv(&t0, 1, MPI_INT64_T, 0, kSyncTag, comm, MPI_STATUS_IGNORE);
            const std::int64_t b = trace::now_ns();
            if (b - a < best_rtt) {
                best_rtt = b - a;
                best = t0 - (a + (b - a) / 2);
            }
        }
        trace::set_clock_offset(best);
    }
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
