// The MPI half of the trace (the recorder and the writers use no MPI): run by the
// Communicator, collectively over its MPI communicator.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace cascade::detail {

// Constructor: every rank follows rank 0's choice of recording (CASCADE_TRACE), and
// measures the offset of its clock to rank 0's with a few ping-pongs.
void trace_start(MPI_Comm comm);
// Destructor: names active messages from `am_names` (indexed by id) and gathers every
// rank's events on rank 0, which writes the files.
void trace_finish(MPI_Comm comm, const std::vector<std::string>& am_names);

}  // namespace cascade::detail
