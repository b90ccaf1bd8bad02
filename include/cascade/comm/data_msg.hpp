// DataActiveMsg<T, Ps...>: a large active message whose body is a Data<T> of the device layer.
//
// The sender takes read access to the data and sends the bytes as large bodies, releasing
// the access once every body has left (on_sent). Three paths:
//   host    the host copy is valid: it goes as one body;
//   staged  the freshest copy is on a device: the access is a chunked one
//           (Data::request_chunked), the device layer copies the data to the host in pieces of
//           chunk_bytes, and each piece leaves as its own body as soon as it landed, so the
//           device-to-host copy of piece k+1 overlaps the network transfer of piece k;
//   direct  the freshest copy is on a device whose memory MPI can address (GpuAware): the
//           device layer lends that copy and the body goes from it as one, with no copy.
// The receiver writes the body into a Data<T> through a write request: a new Data on its
// Devices, or one the receiver names (into()); with to_device set it either receives straight
// into that device's copy (the direct path allowed for the device) or pushes each piece there
// as it arrives. The handler gets the Data after the write access was released, so tasks may
// use it at once; on a rank that forwards a broadcast body to others, only once the body has
// left for them too (the buffer is read until then).
//
// When the trace is recorded, the pieces are linked across the layers and ranks: the copy out
// of the sender's device, the send, the arrival and the copy onto the receiver's device of one
// piece share a link id (trace::link_id), drawn as one flow arrow.
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
#include "cascade/trace/recorder.hpp"

namespace cascade {

/// How a Data body leaves or arrives (DataActiveMsg::sent_by, received_by).
enum class DataPath {
    host,    ///< from (into) the host copy as it is
    staged,  ///< through the host in pieces: copied off the device piece by piece and each sent
             ///< on landing; on the receiver, each piece pushed onto to_device as it arrives
    direct,  ///< from (into) the device copy itself: MPI reads (writes) device memory
};

/// Settings of a DataActiveMsg.
struct DataMsgOptions {
    /// Bytes per piece of a body staged from a device (0: one piece); CASCADE_DATA_CHUNK.
    std::size_t chunk_bytes = data_chunk_setting();
    /// When bodies go straight from and into device copies; CASCADE_GPU_AWARE.
    GpuAware gpu_aware = gpu_aware_setting();
    /// On the receiver: a device (index of the receiving Data's Devices) where the handler's
    /// Data is valid too: received into directly when the direct path is allowed for it,
    /// else each piece copied there as it arrives (-1: the host only).
    int to_device = -1;
};

/// A large active message carrying a Data<T> body and small arguments Ps...:
///   on_arrival(data, ps...)  on the receiver, with the data valid on the host, or on
///                            to_device (and the host unless it was received directly)
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
/// Limits: send() waits on the calling thread for the read access (a pool worker runs other
/// tasks meanwhile); a Data takes one host request at a time, so send a Data again (or use it
/// from the host) after the earlier send's body has left — send(dests, ...) reaches several
/// ranks with one request. Errors on the receiver (no Devices, a size mismatch) are thrown as
/// UsageError from the thread that receives the message.
template <class T, class... Ps>
class DataActiveMsg {
  public:
    /// The receiver's handler: the Data and the other arguments.
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
        for (DeviceKind k : {DeviceKind::cuda, DeviceKind::sim, DeviceKind::opencl})
            if (path(k) == DataPath::direct) lend_ |= lend_bit(k);
        am_ = comm.make_large_active_msg(
            [this](std::uint64_t&, int& from, std::uint64_t& seq, std::uint64_t& off,
                   std::uint64_t& len, std::uint64_t& link,
                   Ps&... ps) { arrived(from, seq, off, len, link, ps...); },
            [this](std::uint64_t& n, int& from, std::uint64_t& seq, std::uint64_t& off,
                   std::uint64_t&, std::uint64_t&,
                   Ps&... ps) { return where(n, from, seq, off, ps...); },
            [this](std::uint64_t&, int&, std::uint64_t& seq, std::uint64_t&, std::uint64_t&,
                   std::uint64_t&, Ps&...) { sent(seq); },
            name_);
        // The receiver's buffer is read until every rank below it in a broadcast has the
        // body: the Data is handed over only then.
        am_->set_on_forwarded([this](std::uint64_t&, int& from, std::uint64_t& seq, std::uint64_t&,
                                     std::uint64_t& len, std::uint64_t&,
                                     Ps&... ps) { forwarded(from, seq, len, ps...); });
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
    /// The path a body whose freshest copy is on a device of `kind` takes (a device whose
    /// memory is host memory, as a sim device's, takes the direct path only when forced).
    DataPath path(DeviceKind kind) const {
        if (kind == DeviceKind::cpu || kind == DeviceKind::any) return DataPath::host;
        if (opts_.gpu_aware == GpuAware::off || kind == DeviceKind::opencl) return DataPath::staged;
        if (opts_.gpu_aware == GpuAware::force) return DataPath::direct;
        return kind == DeviceKind::cuda && mpi_device_support().cuda ? DataPath::direct
                                                                     : DataPath::staged;
    }
    /// Bodies sent so far by `p` (a body staged in pieces counts once).
    std::uint64_t sent_by(DataPath p) const noexcept {
        return by_path_[static_cast<int>(p)].load(std::memory_order_relaxed);
    }
    /// Bodies received so far by `p` (host: into the host copy, not pushed to a device).
    std::uint64_t received_by(DataPath p) const noexcept {
        return in_path_[static_cast<int>(p)].load(std::memory_order_relaxed);
    }
    /// Its settings.
    const DataMsgOptions& options() const noexcept { return opts_; }

  private:
    // The span of a granted access to d; when the grant fails, d's access is released before
    // the error goes on.
    template <class Access>
    static std::span<T> granted(const Access& h, const Data<T>& d) {
        try {
            return h.get();
        } catch (...) {
            d.release();
            throw;
        }
    }

    // What a send keeps until its last piece has left.
    struct Sending {
        Data<T> data;
        std::size_t pieces = 1;  // not left yet
        HostAccess<T> access{DeviceTask{}, nullptr};
        T* host = nullptr;       // the copy sent from (the host's, or a lent device copy)
        std::size_t n = 0;       // elements
        std::size_t per = 0;     // elements per piece
        std::size_t count = 0;   // pieces
        int dest = 0;            // send(dest, ...)
        std::vector<int> dests;  // send(dests, ...) only
        bool many = false;
        std::uint64_t link = 0;  // trace link base (0: not traced)
        std::tuple<Ps...> args;
    };

    // Takes read access to `d`: chunked when the freshest copy is on a device, lent when that
    // device's copy may go directly. A valid host copy or a lent one leaves at once as one
    // body; a staged one leaves piece by piece from a pool task (pump) while the caller goes
    // on, and the thread in join() sends each one as it comes.
    void send_pieces(std::span<const int> dests, bool many, const Data<T>& d, const Ps&... ps) {
        if (!d.valid()) throw UsageError("DataActiveMsg '" + name_ + "': sending an empty Data");
        const std::size_t chunk =
            opts_.chunk_bytes == 0
                ? std::max<std::size_t>(d.bytes(), 1)
                : std::max(opts_.chunk_bytes / sizeof(T), std::size_t(1)) * sizeof(T);
        std::uint64_t seq;
        {
            std::lock_guard<std::mutex> g(mu_);
            seq = ++seq_;
        }
        const std::uint64_t link = trace::recording() ? link_base(comm_.rank(), seq) : 0;
        auto h = d.request_chunked(chunk, lend_, link);
        const std::span<T> s = granted(h, d);
        const DataPath p = h.device() >= 0 ? DataPath::direct
                           : h.fetched()   ? DataPath::staged
                                           : DataPath::host;
        const std::size_t per =
            p == DataPath::staged ? chunk / sizeof(T) : std::max<std::size_t>(s.size(), 1);
        const std::size_t pieces = s.empty() ? 1 : (s.size() + per - 1) / per;
        Threadpool* tp = &d.pool();
        Sending* st;
        {
            std::lock_guard<std::mutex> g(mu_);
            st = &sending_
                      .emplace(seq, Sending{d, pieces, h, s.data(), s.size(), per, pieces,
                                            dests.empty() ? 0 : dests[0],
                                            many ? std::vector<int>(dests.begin(), dests.end())
                                                 : std::vector<int>{},
                                            many, link, std::tuple<Ps...>(ps...)})
                      .first->second;
        }
        by_path_[static_cast<int>(p)].fetch_add(1, std::memory_order_relaxed);
        if (p != DataPath::staged)
            pump(*st, seq, nullptr);
        else
            tp->insert([this, st, seq, tp] { pump(*st, seq, tp); });
    }
    // Sends each piece once its copy has landed (a worker runs other tasks while it waits).
    // `st` may be gone once the last piece was handed over (its on_sent may run at once).
    void pump(Sending& st, std::uint64_t seq, Threadpool* tp) {
        const std::size_t count = st.count;
        for (std::size_t k = 0; k < count; ++k) {
            const std::size_t off = std::min(k * st.per, st.n), len = std::min(st.per, st.n - off);
            const std::size_t end = (off + len) * sizeof(T);
            for (int spin = 0;; ++spin) {
                const std::size_t r = st.access.ready_bytes();
                if (r == HostAccess<T>::failed_chunk) {
                    const std::string what = st.data.name();
                    abandon(seq, count - k);
                    throw UsageError("DataActiveMsg '" + name_ + "': copying Data '" + what +
                                     "' from its device failed");
                }
                if (r >= end) break;
                if (tp && tp->run_one_task()) continue;
                if (spin < 64)
                    std::this_thread::yield();
                else
                    std::this_thread::sleep_for(std::chrono::microseconds(10));
            }
            const std::uint64_t link = st.link ? trace::link_id(st.link, k) : 0;
            trace::Buffer* tb = link ? trace::this_thread() : nullptr;
            const std::int64_t t0 = tb ? trace::stamp() : 0;
            const int peer = st.many ? -1 : st.dest;
            std::apply(
                [&](const Ps&... ps) {
                    const view<T> v(st.host + off, len);
                    if (st.many)
                        am_->send_large(std::span<const int>(st.dests), v, std::uint64_t(st.n),
                                        comm_.rank(), seq, std::uint64_t(off), std::uint64_t(len),
                                        link, ps...);
                    else if (tp)  // a piece leaves now, not when the pump's task ends
                        am_->send_large_now(st.dest, v, std::uint64_t(st.n), comm_.rank(), seq,
                                            std::uint64_t(off), std::uint64_t(len), link, ps...);
                    else
                        am_->send_large(st.dest, v, std::uint64_t(st.n), comm_.rank(), seq,
                                        std::uint64_t(off), std::uint64_t(len), link, ps...);
                },
                st.args);
            if (tb) record_link(tb, t0, link, trace::LinkStep::send, peer);
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
        // Straight into the device's copy when the direct path is allowed for it.
        const bool direct = opts_.to_device >= 0 && n > 0 &&
                            path(d.device_kind(opts_.to_device)) == DataPath::direct;
        auto h = direct ? d.request_on(opts_.to_device) : d.request(DataAccess::write);
        const std::span<T> s = granted(h, d);
        const bool on_device = h.device() >= 0;
        std::lock_guard<std::mutex> g(mu_);
        receiving_.insert_or_assign(std::pair{from, seq},
                                    Receiving{std::move(d), s.data(), std::size_t(n),
                                              opts_.to_device >= 0 && !on_device, on_device});
        return s.data() + off;
    }
    // A piece is here: it goes on to the device as soon as it is (the host-to-device copy of
    // piece k overlaps the arrival of piece k+1); the first refusal stops that.
    void arrived(int from, std::uint64_t seq, std::uint64_t off, std::uint64_t len,
                 std::uint64_t link, Ps&...) {
        trace::Buffer* tb = link ? trace::this_thread() : nullptr;
        const std::int64_t t0 = tb ? trace::stamp() : 0;
        {
            std::lock_guard<std::mutex> g(mu_);
            auto it = receiving_.find(std::pair{from, seq});
            if (it == receiving_.end()) return;
            Receiving& r = it->second;
            if (r.pushing && len > 0)
                r.pushing = r.data.push_range(opts_.to_device, std::size_t(off), std::size_t(len),
                                              tb ? link : 0);
            r.pushed_any |= r.pushing && len > 0;
        }
        if (tb) record_link(tb, t0, link, trace::LinkStep::arrive, from);
    }
    // A piece's buffer is no longer read (right after its arrival, or on a rank that forwards
    // a broadcast, once it left for the ranks below): the last one hands the Data over.
    void forwarded(int from, std::uint64_t seq, std::uint64_t len, Ps&... ps) {
        Data<T> d;
        DataPath p;
        {
            std::lock_guard<std::mutex> g(mu_);
            auto it = receiving_.find(std::pair{from, seq});
            if (it == receiving_.end()) return;
            Receiving& r = it->second;
            // The last piece (or an empty body's only one) completes the Data.
            if (r.left > len) {
                r.left -= std::size_t(len);
                return;
            }
            p = r.direct ? DataPath::direct : r.pushed_any ? DataPath::staged : DataPath::host;
            d = std::move(r.data);
            receiving_.erase(it);
        }
        d.release();
        in_path_[static_cast<int>(p)].fetch_add(1, std::memory_order_relaxed);
        on_arrival_(d, ps...);
    }

    // A trace link base unique to this message's send `seq` from `rank`.
    std::uint64_t link_base(int rank, std::uint64_t seq) const noexcept {
        return (std::uint64_t(static_cast<std::uint32_t>(rank)) << 40) ^
               (std::uint64_t(am_->id()) << 56) ^ seq;
    }
    // A step of a linked transfer, from t0 to now, on the calling thread's trace.
    void record_link(trace::Buffer* tb, std::int64_t t0, std::uint64_t link, trace::LinkStep step,
                     int peer) const noexcept {
        if (trace::Event* e = tb->reserve(trace::Kind::link)) {
            e->t0 = t0;
            e->t1 = trace::stamp();
            e->a = link;
            e->b = static_cast<std::uint64_t>(step);
            e->peer = peer;
            e->am = am_->id();
            tb->commit();
        }
    }

    Communicator& comm_;
    Devices* devs_;
    Arrival on_arrival_;
    Into into_;
    std::string name_;
    DataMsgOptions opts_;
    unsigned lend_ = 0;  // device kinds whose copies go directly (lend_bit)
    // Header: elements of the body, sender, sequence number, offset and length of the piece,
    // its trace link id (0: not traced).
    LargeActiveMsg<T, std::uint64_t, int, std::uint64_t, std::uint64_t, std::uint64_t,
                   std::uint64_t, Ps...>* am_ = nullptr;
    struct Receiving {
        Data<T> data;
        T* host;                  // the copy written (write access held): host or device
        std::size_t left;         // elements whose buffer is still read (not forwarded yet)
        bool pushing = false;     // pieces go on to opts_.to_device
        bool direct = false;      // received into the device copy
        bool pushed_any = false;  // a piece went on to the device
    };
    mutable std::mutex mu_;
    std::uint64_t seq_ = 0;
    std::map<std::uint64_t, Sending> sending_;
    std::map<std::pair<int, std::uint64_t>, Receiving> receiving_;
    std::atomic<std::uint64_t> by_path_[3] = {};
    std::atomic<std::uint64_t> in_path_[3] = {};
};

}  // namespace cascade
