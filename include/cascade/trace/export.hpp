// Writing the trace: rank 0 gathers every rank's events and writes one Chrome trace-event
// JSON (one process per rank, one track per thread, tasks as slices, active messages as flow
// arrows from the send to the handler) and the DOT graph of the promise edges taken.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

namespace cascade::trace {

// Collective over comm (Communicator constructor): every rank follows rank 0's choice of
// recording, and measures the offset of its clock to rank 0's with a few ping-pongs.
void sync_clocks(MPI_Comm comm);
// Collective over comm (Communicator destructor): names active messages from `am_names`
// (indexed by id), gathers on rank 0, which writes the files named by options().
void finish(MPI_Comm comm, const std::vector<std::string>& am_names);
// Without a Communicator: writes this process's events at exit (one rank).
void write_at_exit();
// A rank about to end the job (abort) writes its own events to <trace>.rank<R>.json, beside
// the trace rank 0 would have written, so what led to the end can be seen.
void write_rank(int rank, const std::vector<std::string>& am_names) noexcept;

// Files are written to a temporary name and renamed into place, never through a symbolic
// link, so a reader sees the old file or the new one whole.

namespace detail {
// Parses one rank's events as finish() sends them (throws std::runtime_error when they are
// malformed) and writes them as JSON and DOT to `out`. For the fuzzer.
void render_rank_blob(const char* data, std::size_t size, std::FILE* out);
}  // namespace detail

}  // namespace cascade::trace
