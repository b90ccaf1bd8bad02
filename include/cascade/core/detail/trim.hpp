// Returning the memory the allocator keeps free to the system between epochs.
#pragma once

namespace cascade::detail {

/// Called when a join() has finished: hands the free pages the C library's allocator keeps
/// back to the system (glibc's malloc_trim; nothing elsewhere), across the process at most
/// once per CASCADE_TRIM seconds, or, unset, once 100 times the last trim's own duration has
/// passed (about 1 % of the time; 0.5-1 ms for a 50 MB heap); 0: never. A long run that allocates
/// and frees in changing patterns otherwise keeps a resident set that creeps up with fragmentation
/// while the memory it uses stays flat. Returns true when it trimmed.
bool trim_free_memory() noexcept;

}  // namespace cascade::detail
