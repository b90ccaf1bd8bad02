// DataActiveMsg<T, Ps...>: a large active message whose body is a Data<T> of the device layer.
//
// The sender takes host read access to the data (the device layer copies it from a device
// first if the host copy is stale), sends those bytes as a large body, and releases the host
// access once the body has left (on_sent). The receiver writes the body into a Data<T> through
// a write request: a new Data on its Devices, or one the receiver names (into()); the handler
// gets that Data with its host copy valid, after the write access was released, so tasks may
// use it at once.
//
// The device layer sits on the core alone and has no MPI; the communicator is above it. This
// header is the one file of the comm layer that may include the device layer (tools/check-layers
// names it), and it is header-only, so neither library links the other. A program that includes
// it links both Cascade::device and Cascade::cascade.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <utility>

#include "cascade/comm/communicator.hpp"
#include "cascade/comm/view.hpp"
#include "cascade/core/errors.hpp"
#include "cascade/device/data.hpp"
#include "cascade/device/devices.hpp"

namespace cascade {

/// A large active message carrying a Data<T> body and small arguments Ps...:
///   on_arrival(data, ps...)  on the receiver, with the data's host copy valid
///   into(n, ps...) -> Data   optional, on the receiver: the Data of `n` elements to write the
///                            body into; an empty Data (or no into) makes a new Data of `n`
///                            elements on the receiver's Devices
/// Registered at construction (the same order on every rank as every active message); it must
/// outlive the messages it sends and receives (keep it until after join()).
///
/// ```cpp
/// cascade::Communicator comm;
/// cascade::Threadpool tp(2, &comm);
/// cascade::Devices devs(tp, {.sim = 1});
/// cascade::DataActiveMsg<double, int> ship(
///     comm, &devs, [&](cascade::Data<double>& d, int& tag) { /* d.to_vector() ... */ });
/// cascade::Data<double> x(devs, std::vector<double>(1000, 1.0), "x");
/// ship.send((comm.rank() + 1) % comm.ranks(), x, 7);
/// tp.join();  // every body has arrived and every host access was released
/// ```
///
/// Limits: send() waits on the calling thread for the host copy (a pool worker runs other
/// tasks meanwhile); a Data takes one host request at a time, so send a Data again (or use it
/// from the host) after the earlier send's body has left — send(dests, ...) reaches several
/// ranks with one request. Errors on the receiver (no Devices, a size mismatch) are thrown as
/// UsageError from the thread that receives the message.
template <class T, class... Ps>
class DataActiveMsg {
  public:
    /// The receiver's handler: the Data (host copy valid) and the other arguments.
    using Arrival = std::function<void(Data<T>&, Ps&...)>;
    /// Names the Data to receive into, given the element count and the other arguments.
    using Into = std::function<Data<T>(std::size_t, Ps&...)>;

    /// Registers the message with `comm`. `devs` holds the Data made on receipt (may be null on
    /// a rank that receives only into Data that into() names).
    DataActiveMsg(Communicator& comm, Devices* devs, Arrival on_arrival, Into into = {},
                  std::string name = "data")
        : comm_(comm),
          devs_(devs),
          on_arrival_(std::move(on_arrival)),
          into_(std::move(into)),
          name_(std::move(name)) {
        am_ = comm.make_large_active_msg(
            [this](std::uint64_t&, int& from, std::uint64_t& seq, Ps&... ps) {
                arrived(from, seq, ps...);
            },
            [this](std::uint64_t& n, int& from, std::uint64_t& seq, Ps&... ps) {
                return where(n, from, seq, ps...);
            },
            [this](std::uint64_t&, int&, std::uint64_t& seq, Ps&...) { sent(seq); }, name_);
    }
    DataActiveMsg(const DataActiveMsg&) = delete;
    DataActiveMsg& operator=(const DataActiveMsg&) = delete;

    /// Sends the freshest copy of `d` and `ps` to rank `dest` (see the limits above).
    void send(int dest, const Data<T>& d, const Ps&... ps) {
        auto [s, seq] = begin_send(d);
        am_->send_large(dest, view<T>(s.data(), s.size()), std::uint64_t(s.size()), comm_.rank(),
                        seq, ps...);
    }
    /// The same body to every rank of `dests` (a broadcast of large AMs, one host request).
    void send(std::span<const int> dests, const Data<T>& d, const Ps&... ps) {
        auto [s, seq] = begin_send(d);
        am_->send_large(dests, view<T>(s.data(), s.size()), std::uint64_t(s.size()), comm_.rank(),
                        seq, ps...);
    }

    /// Sends whose body has not left yet (host accesses still held here).
    std::size_t sends_in_flight() const {
        std::lock_guard<std::mutex> g(mu_);
        return sending_.size();
    }

  private:
    // Host access to `d` (released again if it fails).
    static std::span<T> host_access(const Data<T>& d, DataAccess a) {
        auto h = d.request(a);
        try {
            return h.get();
        } catch (...) {
            d.release();
            throw;
        }
    }
    // Takes host read access to `d` and remembers it under a new sequence number.
    std::pair<std::span<T>, std::uint64_t> begin_send(const Data<T>& d) {
        if (!d.valid()) throw UsageError("DataActiveMsg '" + name_ + "': sending an empty Data");
        const std::span<T> s = host_access(d, DataAccess::read);
        std::lock_guard<std::mutex> g(mu_);
        const std::uint64_t seq = ++seq_;
        sending_.emplace(seq, d);
        return {s, seq};
    }
    void sent(std::uint64_t seq) {
        Data<T> d;
        {
            std::lock_guard<std::mutex> g(mu_);
            auto it = sending_.find(seq);
            if (it == sending_.end()) return;
            d = std::move(it->second);
            sending_.erase(it);
        }
        d.release();
    }
    T* where(std::uint64_t n, int from, std::uint64_t seq, Ps&... ps) {
        Data<T> d;
        if (into_) d = into_(std::size_t(n), ps...);
        if (!d.valid()) {
            if (!devs_)
                throw UsageError("DataActiveMsg '" + name_ + "': rank " +
                                 std::to_string(comm_.rank()) +
                                 " received a Data body but has no Devices to hold it (pass "
                                 "one at construction, or name a Data with into())");
            d = Data<T>(*devs_, std::size_t(n), name_);
        } else if (d.size() != n) {
            throw UsageError("DataActiveMsg '" + name_ + "': a body of " + std::to_string(n) +
                             " elements from rank " + std::to_string(from) +
                             " does not fit Data '" + d.name() + "' of " +
                             std::to_string(d.size()) + " elements");
        }
        const std::span<T> s = host_access(d, DataAccess::write);
        std::lock_guard<std::mutex> g(mu_);
        receiving_.insert_or_assign(std::pair{from, seq}, std::move(d));
        return s.data();
    }
    void arrived(int from, std::uint64_t seq, Ps&... ps) {
        Data<T> d;
        {
            std::lock_guard<std::mutex> g(mu_);
            auto it = receiving_.find(std::pair{from, seq});
            if (it == receiving_.end()) return;
            d = std::move(it->second);
            receiving_.erase(it);
        }
        d.release();
        on_arrival_(d, ps...);
    }

    Communicator& comm_;
    Devices* devs_;
    Arrival on_arrival_;
    Into into_;
    std::string name_;
    LargeActiveMsg<T, std::uint64_t, int, std::uint64_t, Ps...>* am_ = nullptr;
    mutable std::mutex mu_;
    std::uint64_t seq_ = 0;
    std::map<std::uint64_t, Data<T>> sending_;
    std::map<std::pair<int, std::uint64_t>, Data<T>> receiving_;
};

}  // namespace cascade
