// Mobile objects with device data: an object whose members include Data<T> migrates like any
// other, with `ar(..., field, ...)` in its codec (the codec of Data is in
// cascade/comm/device.hpp, shared with async arguments and results).
//
// When the object leaves, each Data member's freshest copy travels inside the migration
// message: before the object is packed, the migration takes host readwrite access to the Data
// (it waits for every task submitted before that uses the Data, so no device task or transfer
// on it is in flight, and copies the data from a device only when the host copy is stale), the
// host copy is written into the message, and the access is released once the object is
// packed. A migration whose object has a Data member runs on a pool worker, never on the
// communication thread. When it arrives, each Data member is rebuilt on the Devices that
// set_object_devices() (the same setting as set_data_devices()) named on the destination rank,
// with a valid host copy and no device copy; later tasks copy it to a device as usual.
//
// The device layer sits on the core alone and has no MPI; the objects layer is above the
// communicator. This header is the one file of the objects layer that may include the device
// layer (tools/check-layers names it), and it is header-only, so neither library links the
// other. A program that includes it links both Cascade::device and Cascade::cascade.
#pragma once

#include "cascade/comm/device.hpp"
#include "cascade/device/devices.hpp"

namespace cascade {

/// The Devices on which the Data members of objects arriving on this rank are rebuilt (null:
/// none; an object with a Data member arriving then fails the job with a UsageError). The same
/// setting as set_data_devices(), which async arguments and results use: one call names the
/// Devices of both. Call it on every rank such objects may reach, before they migrate; `devs`
/// must outlive the migrations (keep it until after join()).
///
/// ```cpp
/// struct Block {
///     cascade::Data<double> u;
///     int step = 0;
///     template <class Archive>
///     void serialize(Archive& ar) { ar(u, step); }
/// };
/// cascade::set_object_devices(&devs);  // on every rank, before objects migrate
/// ```
inline void set_object_devices(Devices* devs) noexcept {
    set_data_devices(devs);
}
/// The Devices set_object_devices() named (null if none).
inline Devices* object_devices() noexcept {
    return data_devices();
}

}  // namespace cascade
