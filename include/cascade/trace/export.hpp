// Writing the trace: every rank's events are collected into a blob (collect), rank 0 turns
// the blobs of all ranks into one Chrome trace-event JSON (one process per rank, one track per
// thread, tasks as slices, active messages as flow arrows from the send to the handler) and
// the DOT graph of the promise edges taken (write_files). Moving the blobs between ranks is
// the communicator's part (comm/detail/trace_gather.hpp); this layer uses no MPI.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace cascade::trace {

// This process's events as a blob for write_files, named: active messages from `am_names`
// (indexed by id; null: none), tasks from their taskflows (which must be alive).
std::vector<char> collect(int rank, const std::vector<std::string>* am_names);
// Writes the files named by options() from the blobs of all ranks (rank 0 of a job, or the
// one process without a communicator).
void write_files(const std::vector<std::vector<char>>& blobs);
// Without a Communicator: writes this process's events at exit (one rank).
void write_at_exit();
// Where a rank that ends the job writes its own events: rank 0's trace path (the
// communicator tells every rank when it starts), empty: nowhere.
void set_rank_files_base(const std::string& path);
// A rank about to end the job (abort) writes its own events to <trace>.rank<R>.json, beside
// the trace rank 0 would have written, so what led to the end can be seen.
void write_rank(int rank, const std::vector<std::string>& am_names) noexcept;

// Files are written to a temporary name and renamed into place, never through a symbolic
// link, so a reader sees the old file or the new one whole.

namespace detail {
// Parses one rank's events as collect() makes them (throws std::runtime_error when they are
// malformed) and writes them as JSON and DOT to `out`. For the fuzzer.
void render_rank_blob(const char* data, std::size_t size, std::FILE* out);
}  // namespace detail

}  // namespace cascade::trace
