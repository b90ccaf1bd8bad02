// The small vocabulary of the device layer: how a task uses a piece of data (DataAccess), the
// coherence state of one copy of it (Msi), and the kinds of devices a task may ask for.
#pragma once

#include <cstdint>

namespace cascade {

/// How a task or a host request uses a Data: read it, overwrite all of it, or update it.
enum class DataAccess : std::uint8_t { read = 1, write = 2, readwrite = 3 };

/// MSI state of one copy of a Data (one per memory space: the host and each device with
/// memory of its own). Modified: the only valid copy, changed since it was fetched. Shared:
/// valid, other copies may be valid too. Invalid: must be fetched before use.
enum class Msi : std::uint8_t { invalid = 0, shared = 1, modified = 2 };

/// The kinds of devices. `any` lets the scheduler choose among all devices.
enum class DeviceKind : std::uint8_t { any = 0, cpu, opencl, cuda, sim };

/// "read", "write", "readwrite".
const char* to_string(DataAccess a) noexcept;
/// "I", "S", "M".
const char* to_string(Msi s) noexcept;
/// "any", "cpu", "opencl", "cuda", "sim".
const char* to_string(DeviceKind k) noexcept;

/// Whether an access reads the previous contents.
constexpr bool reads(DataAccess a) noexcept {
    return (static_cast<int>(a) & 1) != 0;
}
/// Whether an access changes the contents.
constexpr bool writes(DataAccess a) noexcept {
    return (static_cast<int>(a) & 2) != 0;
}

}  // namespace cascade
