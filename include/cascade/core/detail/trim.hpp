// Returning the memory the allocator keeps free to the system between epochs.
#pragma once

namespace cascade::detail {

/// Called when a join() has finished: hands the free pages the C library's allocator keeps
/// back to the system (glibc's malloc_trim; nothing elsewhere), across the process at most
/// once per CASCADE_TRIM seconds, or, unset, once 50 times the last trim's cost has passed
/// (about 2 % of the time): its own CPU time (0.1-1 ms for a 50 MB heap) and the page faults
/// of touching the pages it returned again; 0: never. A long run that allocates and frees in
/// changing patterns otherwise keeps a resident set that creeps up with fragmentation while
/// the memory it uses stays flat. Returns true when it trimmed.
bool trim_free_memory() noexcept;

}  // namespace cascade::detail
