// How many worker threads a process should run, and pinning them. The count starts from the
// CPUs the process may run on (its affinity mask, which mpiexec's or srun's binding sets), so
// a rank bound to 4 cores gets 4 workers; when the mask is the whole node, the node's CPUs
// are shared among the ranks on that node (see default_workers(const Communicator&) in the
// comm layer). The thread that drives MPI (the one in join()) naps when there is nothing to
// do, so it does not get a core of its own (docs/running.md has the measurement).
#pragma once

#include <vector>

namespace cascade {

/// The CPUs the calling thread may run on (its affinity mask), in increasing order; every
/// online CPU where the mask cannot be read.
std::vector<int> allowed_cpus();

/// The number of CPUs online on this machine (node), at least 1.
int node_cpus() noexcept;

/// The default worker count for a process that is one of `local_ranks` ranks on its node:
/// the CPUs of its affinity mask, divided among the local ranks when the mask covers the
/// whole node (no binding), at least 1. The CASCADE_WORKERS variable overrides it.
int default_workers(int local_ranks = 1);

/// Pins the calling thread to the i-th CPU (modulo their number) of `cpus`. Returns false
/// when the system refused.
bool pin_this_thread(const std::vector<int>& cpus, int i) noexcept;

/// Where worker 0 of a pool is pinned among `mask_cpus` CPUs of its rank's mask (worker i
/// then goes to CPU first + i, modulo): 0 when the mask is this rank's own (narrower than
/// the node's `node_cpus`, a binding), else node_rank x workers, so that the unbound ranks of
/// one node spread their workers over its CPUs instead of all starting at the first one.
int pin_offset(int mask_cpus, int node_cpus, int node_rank, int workers) noexcept;

}  // namespace cascade
