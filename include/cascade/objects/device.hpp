// Mobile objects with device data: a codec for Data<T>, so that an object whose members
// include Data<T> migrates like any other, with `ar(..., field, ...)` in its codec.
//
// When the object leaves, each Data member's freshest copy travels inside the migration
// message: before the object is packed, the migration takes host readwrite access to the Data
// (it waits for every task submitted before that uses the Data, so no device task or transfer
// on it is in flight, and copies the data from a device only when the host copy is stale), the
// host copy is written into the message, and the access is released once the object is
// packed. When it arrives, each Data member is rebuilt on the Devices that
// set_object_devices() named on the destination rank, with a valid host copy and no device
// copy; later tasks copy it to a device as usual.
//
// The device layer sits on the core alone and has no MPI; the objects layer is above the
// communicator. This header is the one file of the objects layer that may include the device
// layer (tools/check-layers names it), and it is header-only, so neither library links the
// other. A program that includes it links both Cascade::device and Cascade::cascade.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
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
inline std::atomic<Devices*>& object_devices_slot() noexcept {
    static std::atomic<Devices*> d{nullptr};
    return d;
}
// The Data whose host access this thread's migration holds (taken before packing, released
// after).
inline std::vector<const device::detail::DataBlock*>& held_for_packing() noexcept {
    thread_local std::vector<const device::detail::DataBlock*> held;
    return held;
}
}  // namespace detail

/// The Devices on which the Data members of objects arriving on this rank are rebuilt (null:
/// none; an object with a Data member arriving then fails the job with a UsageError). Call it
/// on every rank such objects may reach, before they migrate; `devs` must outlive the
/// migrations (keep it until after join()).
inline void set_object_devices(Devices* devs) noexcept {
    detail::object_devices_slot().store(devs, std::memory_order_release);
}
/// The Devices set_object_devices() named (null if none).
inline Devices* object_devices() noexcept {
    return detail::object_devices_slot().load(std::memory_order_acquire);
}

/// Data<T> as a member of a mobile object: `ar(data)` in the object's codec. On the wire: a
/// flag (an empty handle travels as one), the name, the elements of the host copy. It travels
/// only as part of a migrating object; as a message or async argument it is a UsageError
/// (send a Data with DataActiveMsg, cascade/comm/data_msg.hpp).
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
template <class T>
struct codec<Data<T>> {
    /// Reads `d` (a new Data on object_devices()), readies it to leave, writes or measures it.
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
            Devices* devs = object_devices();
            if (!devs)
                throw UsageError("objects: an object arriving here holds Data '" + name +
                                 "', but this rank has no Devices for it: call "
                                 "cascade::set_object_devices(&devs) on every rank that objects "
                                 "with Data members may reach");
            d = Data<T>(*devs, std::span<const T>(v.data(), v.size()), std::move(name));
        } else if constexpr (requires { Archive::leaving; }) {
            // Before packing: the freshest copy on the host, no task on the Data in flight.
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
                                 "' travels between ranks only as a member of a migrating "
                                 "mobile object (cascade/objects/device.hpp); send a Data "
                                 "with DataActiveMsg (cascade/comm/data_msg.hpp)");
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
