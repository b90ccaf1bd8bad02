// The MSI coherence protocol of Data, as pure functions over the array of states of one Data
// (index 0: the host, then one per device memory space). The runtime applies them when it
// prepares a task or a host request (msi_access) and when it evicts a copy (msi_evict); the
// table-driven unit test checks every transition.
//
//   access at space s   | s was I                       | s was S or M
//   --------------------+-------------------------------+------------------------------
//   read                | fetch from a valid copy; s=S; | no transfer; s unchanged
//                       | a Modified source becomes S   |
//   write (overwrite)   | no transfer; s=M; others I    | no transfer; s=M; others I
//   readwrite           | fetch; s=M; others I          | no transfer; s=M; others I
//
// A fetch between two devices is staged through the host: the source is copied out first
// (the host copy becomes S too), then copied in. Evicting a copy that is Modified, or the
// last valid one, writes it back to the host first.
#pragma once

#include <span>

#include "cascade/device/access.hpp"

namespace cascade {

/// What the protocol asks for an access (msi_access) or an eviction (msi_evict).
struct MsiPlan {
    int source = -1;          ///< Space to copy from (-1: no transfer).
    bool via_host = false;    ///< The copy goes source -> host -> destination.
    bool write_back = false;  ///< Eviction: the copy goes back to the host first.
};

/// Applies an access at `space` to `states` and returns the transfer it needs. The source
/// is the host when the host copy is valid, else a Modified copy, else the lowest Shared.
/// Reading data no copy holds (all Invalid) is a logic error of the caller (Data starts
/// with a valid host copy), reported by source = -1 with the states unchanged.
MsiPlan msi_access(std::span<Msi> states, int space, DataAccess access) noexcept;

/// Applies the eviction of the copy at `space` (> 0) to `states`: it becomes Invalid, and
/// the host copy becomes Modified when the evicted copy had to be written back.
MsiPlan msi_evict(std::span<Msi> states, int space) noexcept;

/// Whether some copy is valid (Shared or Modified).
bool msi_any_valid(std::span<const Msi> states) noexcept;

}  // namespace cascade
