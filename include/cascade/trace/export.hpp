// Writing the trace: rank 0 gathers every rank's events and writes one Chrome trace-event
// JSON (one process per rank, one track per thread, tasks as slices, active messages as flow
// arrows from the send to the handler) and the DOT graph of the promise edges taken.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cascade::trace {

// Collective over comm (Communicator constructor): every rank follows rank 0's choice of
// recording, and measures the offset of its clock to rank 0's with a few ping-pongs.
void sync_clocks(MPI_Comm comm);
// Collective over comm (Communicator destructor): names active messages from `am_names`
// (indexed by id), gathers on rank 0, which writes the files named by options().
// `counters` (the same names on every rank) go to otherData.counters, one value per rank.
using Counters = std::vector<std::pair<std::string, std::uint64_t>>;
void finish(MPI_Comm comm, const std::vector<std::string>& am_names,
            const Counters& counters = {});
// Without a Communicator: writes this process's events at exit (one rank).
void write_at_exit();

}  // namespace cascade::trace
