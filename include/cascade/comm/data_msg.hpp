// DataActiveMsg<T, Ps...>: a large active message whose body is a Data<T> of the device layer.
//
// The sender takes host read access to the data and sends the bytes as large bodies, releasing
// the access once every body has left (on_sent). A host copy that is valid goes as one body.
// When the freshest copy is on a device, the access is a chunked one (Data::request_chunked):
// the device layer copies it to the host in pieces of chunk_bytes, and each piece leaves as its
// own body as soon as it landed, so the device-to-host copy of piece k+1 overlaps the network
// transfer of piece k (the staged path). The direct path (a CUDA copy and an MPI library that
// sends from device memory, mpi_device_support(), with CASCADE_GPU_AWARE on) is chosen by
// path(); it is the staged path until the device layer lends a device copy to a sender. The
// receiver writes the body into a Data<T> through a write request: a new Data on its Devices, or
// one the receiver names (into()); the handler gets that Data with its host copy valid, after the
// write access was released, so tasks may use it at once.
//
// The device layer sits on the core alone and has no MPI; the communicator is above it. This
// header is the one file of the comm layer that may include the device layer (tools/check-layers
// names it), and it is header-only, so neither library links the other. A program that includes
// it links both Cascade::device and Cascade::cascade.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "cascade/comm/communicator.hpp"
#include "cascade/comm/device_support.hpp"
#include "cascade/comm/view.hpp"
#include "cascade/core/errors.hpp"
#include "cascade/core/threadpool.hpp"
#include "cascade/device/data.hpp"
#include "cascade/device/devices.hpp"

namespace cascade {

/// How a Data body leaves (DataActiveMsg::path).
enum class DataPath {
    host,    ///< the host copy is valid: one body from it
    staged,  ///< the freshest copy is on a device: pieces copied to the host, each sent on landing
    direct,  ///< the freshest copy is on a CUDA device and MPI sends from device memory
};

/// Settings of a DataActiveMsg.
struct DataMsgOptions {
    /// Bytes per piece of a body staged from a device (0: one piece); CASCADE_DATA_CHUNK.
    std::size_t chunk_bytes = data_chunk_setting();
    /// Whether a CUDA copy may go to MPI directly when the library supports it;
    /// CASCADE_GPU_AWARE.
    bool gpu_aware = gpu_aware_setting();
    /// On the receiver: a device (index of the receiving Data's Devices) that each piece is
    /// copied to as it arrives, so the handler's Data is valid there too (-1: the host only).
    int to_device = -1;
};

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
                  std::string name = "data", DataMsgOptions opts = {})
        : comm_(comm),
          devs_(devs),
          on_arrival_(std::move(on_arrival)),
          into_(std::move(into)),
          name_(std::move(name)),
          opts_(opts) {
        am_ = comm.make_large_active_msg(
            [this](std::uint64_t&, int& from, std::uint64_t& seq, std::uint64_t& off,
                   std::uint64_t& len, Ps&... ps) { arrived(from, seq, off, len, ps...); },
            [this](std::uint64_t& n, int& from, std::uint64_t& seq, std::uint64_t& off,
                   std::uint64_t&, Ps&... ps) { return where(n, from, seq, off, ps...); },
            [this](std::uint64_t&, int&, std::uint64_t& seq, std::uint64_t&, std::uint64_t&,
                   Ps&...) { sent(seq); },
            name_);
    }
    DataActiveMsg(const DataActiveMsg&) = delete;
    DataActiveMsg& operator=(const DataActiveMsg&) = delete;

    /// Sends the freshest copy of `d` and `ps` to rank `dest` (see the limits above).
    void send(int dest, const Data<T>& d, const Ps&... ps) {
        send_pieces(std::span<const int>(&dest, 1), false, d, ps...);
    }
    /// The same body to every rank of `dests` (a broadcast of large AMs, one host request).
    void send(std::span<const int> dests, const Data<T>& d, const Ps&... ps) {
        send_pieces(dests, true, d, ps...);
    }

    /// Sends whose body has not left yet (host accesses still held here).
    std::size_t sends_in_flight() const {
        std::lock_guard<std::mutex> g(mu_);
        return sending_.size();
    }
    /// The path a body whose freshest copy is on a device of `kind` takes.
    DataPath path(DeviceKind kind) const {
        if (kind == DeviceKind::cpu || kind == DeviceKind::any) return DataPath::host;
        if (kind == DeviceKind::cuda && opts_.gpu_aware && mpi_device_support().cuda)
            return DataPath::direct;
        return DataPath::staged;
    }
    /// Bodies sent so far by `p` (a body staged in pieces counts once).
    std::uint64_t sent_by(DataPath p) const noexcept {
        return by_path_[static_cast<int>(p)].load(std::memory_order_relaxed);
    }
    /// Its settings.
    const DataMsgOptions& options() const noexcept { return opts_; }

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
    // What a send staged in pieces keeps until its last piece has left.
    struct Sending {
        Data<T> data;
        std::size_t pieces = 1;  // not left yet
        HostAccess<T> access{DeviceTask{}, nullptr};
        T* host = nullptr;       // the host copy
        std::size_t n = 0;       // elements
        std::size_t per = 0;     // elements per piece
        std::size_t count = 0;   // pieces
        int dest = 0;            // send(dest, ...)
        std::vector<int> dests;  // send(dests, ...) only
        bool many = false;
        std::tuple<Ps...> args;
    };

    // Takes host read access to `d` (chunked when the freshest copy is on a device). A valid
    // host copy leaves at once as one body; a staged one leaves piece by piece from a pool task
    // (pump) while the caller goes on, and the thread in join() sends each one as it comes.
    void send_pieces(std::span<const int> dests, bool many, const Data<T>& d, const Ps&... ps) {
        if (!d.valid()) throw UsageError("DataActiveMsg '" + name_ + "': sending an empty Data");
        const std::size_t chunk =
            opts_.chunk_bytes == 0
                ? std::max<std::size_t>(d.bytes(), 1)
                : std::max(opts_.chunk_bytes / sizeof(T), std::size_t(1)) * sizeof(T);
        auto h = d.request_chunked(chunk);
        std::span<T> s;
        try {
            s = h.get();
        } catch (...) {
            d.release();
            throw;
        }
        const bool whole = h.ready_bytes() == s.size_bytes();  // the host copy was valid
        const std::size_t per = whole ? std::max<std::size_t>(s.size(), 1) : chunk / sizeof(T);
        const std::size_t pieces = s.empty() ? 1 : (s.size() + per - 1) / per;
        Threadpool* tp = &d.pool();
        std::uint64_t seq;
        Sending* st;
        {
            std::lock_guard<std::mutex> g(mu_);
            seq = ++seq_;
            st = &sending_
                      .emplace(seq, Sending{d, pieces, h, s.data(), s.size(), per, pieces,
                                            dests.empty() ? 0 : dests[0],
                                            many ? std::vector<int>(dests.begin(), dests.end())
                                                 : std::vector<int>{},
                                            many, std::tuple<Ps...>(ps...)})
                      .first->second;
        }
        by_path_[static_cast<int>(whole ? DataPath::host : DataPath::staged)].fetch_add(
            1, std::memory_order_relaxed);
        if (whole)
            pump(*st, seq, nullptr);
        else
            tp->insert([this, st, seq, tp] { pump(*st, seq, tp); });
    }
    // Sends each piece once its copy has landed (a worker runs other tasks while it waits).
    void pump(Sending& st, std::uint64_t seq, Threadpool* tp) {
        for (std::size_t k = 0; k < st.count; ++k) {
            const std::size_t off = std::min(k * st.per, st.n), len = std::min(st.per, st.n - off);
            const std::size_t end = (off + len) * sizeof(T);
            for (int spin = 0;; ++spin) {
                const std::size_t r = st.access.ready_bytes();
                if (r == HostAccess<T>::failed_chunk) {
                    abandon(seq, st.count - k);
                    throw UsageError("DataActiveMsg '" + name_ + "': copying Data '" +
                                     st.data.name() + "' from its device failed");
                }
                if (r >= end) break;
                if (tp && tp->run_one_task()) continue;
                if (spin < 64)
                    std::this_thread::yield();
                else
                    std::this_thread::sleep_for(std::chrono::microseconds(10));
            }
            std::apply(
                [&](const Ps&... ps) {
                    const view<T> v(st.host + off, len);
                    if (st.many)
                        am_->send_large(std::span<const int>(st.dests), v, std::uint64_t(st.n),
                                        comm_.rank(), seq, std::uint64_t(off), std::uint64_t(len),
                                        ps...);
                    else
                        am_->send_large(st.dest, v, std::uint64_t(st.n), comm_.rank(), seq,
                                        std::uint64_t(off), std::uint64_t(len), ps...);
                },
                st.args);
        }
    }
    // Pieces that will never be sent: count them as sent.
    void abandon(std::uint64_t seq, std::size_t pieces) {
        for (std::size_t i = 0; i < pieces; ++i)
            sent(seq);
    }
    void sent(std::uint64_t seq) {
        Data<T> d;
        {
            std::lock_guard<std::mutex> g(mu_);
            auto it = sending_.find(seq);
            if (it == sending_.end()) return;
            if (--it->second.pieces > 0) return;
            d = std::move(it->second.data);
            sending_.erase(it);
        }
        d.release();
    }
    T* where(std::uint64_t n, int from, std::uint64_t seq, std::uint64_t off, Ps&... ps) {
        {
            std::lock_guard<std::mutex> g(mu_);
            auto it = receiving_.find(std::pair{from, seq});
            if (it != receiving_.end()) return it->second.host + off;
        }
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
        receiving_.insert_or_assign(std::pair{from, seq},
                                    Receiving{std::move(d), s.data(), std::size_t(n)});
        return s.data() + off;
    }
    void arrived(int from, std::uint64_t seq, std::uint64_t off, std::uint64_t len, Ps&... ps) {
        Data<T> d;
        {
            std::lock_guard<std::mutex> g(mu_);
            auto it = receiving_.find(std::pair{from, seq});
            if (it == receiving_.end()) return;
            Receiving& r = it->second;
            // Each piece goes on to the device as soon as it is here (the host-to-device copy
            // of piece k overlaps the arrival of piece k+1); the first refusal stops that.
            if (opts_.to_device >= 0 && r.pushing && len > 0)
                r.pushing = r.data.push_range(opts_.to_device, std::size_t(off), std::size_t(len));
            // The last piece (or an empty body's only one) completes the Data.
            if (r.left > len) {
                r.left -= std::size_t(len);
                return;
            }
            d = std::move(r.data);
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
    DataMsgOptions opts_;
    // Header: elements of the body, sender, sequence number, offset and length of the piece.
    LargeActiveMsg<T, std::uint64_t, int, std::uint64_t, std::uint64_t, std::uint64_t, Ps...>* am_ =
        nullptr;
    struct Receiving {
        Data<T> data;
        T* host;              // its host copy (write access held)
        std::size_t left;     // elements not arrived yet
        bool pushing = true;  // pieces go on to opts_.to_device
    };
    mutable std::mutex mu_;
    std::uint64_t seq_ = 0;
    std::map<std::uint64_t, Sending> sending_;
    std::map<std::pair<int, std::uint64_t>, Receiving> receiving_;
    std::atomic<std::uint64_t> by_path_[3] = {};
};

}  // namespace cascade
