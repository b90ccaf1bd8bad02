// Device data on the wire: a codec for Data<T>, so that a Data travels as an async argument or
// result and as a member of a migrating mobile object, with `ar(..., field, ...)` in the codec
// of the type that holds it.
//
// When a value holding a Data leaves, the Data's freshest copy travels: before the value is
// measured and written, the sender walks it with a LeaveArchive (comm/detail/leaving.hpp),
// which takes host readwrite access to the Data (it waits for every task submitted before that
// uses the Data, so no device task or transfer on it is in flight, and copies the data from a
// device only when the host copy is stale); the host copy is written into the message, and the
// access is released once the value is written. On the receiving rank, the Data is rebuilt on
// the Devices that set_data_devices() named there, with a valid host copy and no device copy;
// later tasks copy it to a device as usual.
//
// The device layer sits on the core alone and has no MPI; the communicator is above the core.
// This header is the one file of the comm layer besides data_msg.hpp that may include the
// device layer (tools/check-layers names it), and it is header-only, so neither library links
// the other. A program that includes it links both Cascade::device and Cascade::cascade.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "cascade/comm/codec.hpp"
#include "cascade/comm/view.hpp"
#include "cascade/core/errors.hpp"
#include "cascade/device/data.hpp"
#include "cascade/device/devices.hpp"

namespace cascade {

namespace detail {
inline std::atomic<Devices*>& data_devices_slot() noexcept {
    static std::atomic<Devices*> d{nullptr};
    return d;
}
// The Data whose host access this thread holds for writing (taken by the leaving step,
// released after the value is written).
inline std::vector<const device::detail::DataBlock*>& held_for_packing() noexcept {
    thread_local std::vector<const device::detail::DataBlock*> held;
    return held;
}
}  // namespace detail

/// The Devices on which a Data arriving on this rank (an async argument or result, a member of
/// a mobile object) is rebuilt (null: none; a Data arriving then fails the job with a
/// UsageError). Call it once on every rank a Data may reach, before one travels; `devs` must
/// outlive the transfers (keep it until after join()).
inline void set_data_devices(Devices* devs) noexcept {
    detail::data_devices_slot().store(devs, std::memory_order_release);
}
/// The Devices set_data_devices() named (null if none).
inline Devices* data_devices() noexcept {
    return detail::data_devices_slot().load(std::memory_order_acquire);
}

/// Data<T> on the wire: `ar(data)` in a codec. On the wire: a flag (an empty handle travels as
/// one), the name, the elements of the host copy. It is written only after a LeaveArchive took
/// host access to it, as async and object migrations do; a Data written otherwise is a
/// UsageError (send a Data as a message body with DataActiveMsg, cascade/comm/data_msg.hpp).
///
/// ```cpp
/// struct Block {
///     cascade::Data<double> u;
///     int step = 0;
///     template <class Archive>
///     void serialize(Archive& ar) { ar(u, step); }
/// };
/// cascade::set_data_devices(&devs);  // on every rank, before a Data travels
/// ```
template <class T>
struct codec<Data<T>> {
    /// Reads `d` (a new Data on data_devices()), readies it to leave, writes or measures it.
    template <class Archive>
    static void serialize(Archive& ar, Data<T>& d) {
        if constexpr (Archive::loading) {
            bool valid = false;
            ar(valid);
            if (!valid) {
                d = Data<T>();
                return;
            }
            std::string name;
            view<const T> v;
            ar(name, v);
            Devices* devs = data_devices();
            if (!devs)
                throw UsageError("Data '" + name +
                                 "' arrived on a rank that has no Devices for it: call "
                                 "cascade::set_data_devices(&devs) (or set_object_devices, the "
                                 "same setting) on every rank that a Data may reach");
            d = Data<T>(*devs, std::span<const T>(v.data(), v.size()), std::move(name));
        } else if constexpr (requires { Archive::leaving; }) {
            // Before writing: the freshest copy on the host, no task on the Data in flight.
            if (!d.valid()) return;
            if (ar.probing()) {
                ar.need();
                return;
            }
            auto& held = detail::held_for_packing();
            if (std::find(held.begin(), held.end(), d.block()) != held.end()) return;
            auto h = d.request(DataAccess::readwrite);
            try {
                h.get();
            } catch (...) {
                d.release();
                throw;
            }
            held.push_back(d.block());
            ar.after([d] {
                auto& hs = detail::held_for_packing();
                hs.erase(std::find(hs.begin(), hs.end(), d.block()));
                d.release();
            });
        } else if constexpr (requires { ar.position(); }) {
            // Writing: the host copy the leaving step made valid.
            if (!d.valid()) {
                ar(false);
                return;
            }
            auto& held = detail::held_for_packing();
            if (std::find(held.begin(), held.end(), d.block()) == held.end())
                throw UsageError("Data '" + d.name() +
                                 "' travels between ranks only as an async argument or result "
                                 "or a member of a migrating mobile object "
                                 "(cascade/comm/device.hpp); send a Data as a message body with "
                                 "DataActiveMsg (cascade/comm/data_msg.hpp)");
            const T* p = static_cast<const T*>(device::detail::host_pointer(d.block()));
            ar(true, d.name(), view<const T>(p, d.size()));
        } else {
            // Measuring: the same shape, no access to the elements.
            if (!d.valid()) {
                ar(false);
                return;
            }
            ar(true, d.name(), view<const T>(nullptr, d.size()));
        }
    }
};

}  // namespace cascade
