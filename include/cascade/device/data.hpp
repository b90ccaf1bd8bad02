// Data<T>: one logical array with a copy per memory space (the host, each device with memory
// of its own) and an MSI state per copy (PREMA's hetero_object). Copies are allocated when
// first needed and kept for reuse; tasks name the access they need (read(d), write(d),
// readwrite(d)) and the runtime moves data where the task runs. The host reaches the data
// through request(access), a future of a span, and gives it back with release(). Handles are
// shared: the data goes when the last handle and the last task using it are gone.
//
//   cascade::Data<double> x(devs, 1000, "x");
//   auto h = x.request(cascade::DataAccess::write);  // waits for earlier tasks using x
//   std::ranges::fill(h.get(), 1.0);
//   x.release();                                   // tasks submitted later may run now
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cascade/device/detail/block.hpp"
#include "cascade/device/task.hpp"

namespace cascade {

class Devices;
class Threadpool;

namespace device::detail {
DataBlock* new_block(Devices& d, std::size_t bytes, std::size_t elem, std::string name,
                     const void* init);
// What a host request asks for (Data::request, request_chunked, request_on).
struct AccessAsk {
    DataAccess mode = DataAccess::read;
    std::size_t chunk = 0;   // read: fetch in chunks of this many bytes, granted at once
    unsigned lend = 0;       // read: device kinds (lend_bit) whose copy may be lent
    int on = -1;             // write: the device whose own copy is asked for
    std::uint64_t link = 0;  // trace link of the copies it makes (0: none)
};
DeviceTask request_host(DataBlock* b, const AccessAsk& ask);
void on_granted(const DeviceTask& request, std::function<void()> f);
std::size_t host_ready(DataBlock* b) noexcept;
Threadpool& pool_of(DataBlock* b) noexcept;
bool push_range(DataBlock* b, int device, std::size_t off, std::size_t bytes,
                std::uint64_t link = 0);
void release_host(DataBlock* b);
void* host_pointer(DataBlock* b) noexcept;
// The granted access of b: its copy's memory, the device it is on (-1: the host), whether
// the grant came with a chunked fetch.
void* access_pointer(DataBlock* b) noexcept;
int access_device(DataBlock* b) noexcept;
bool access_fetched(DataBlock* b) noexcept;
DeviceKind device_kind(DataBlock* b, int device);
}  // namespace device::detail

/// A device kind as a bit of the mask Data::request_chunked takes (kinds whose copy may be
/// lent to the caller instead of copied to the host).
constexpr unsigned lend_bit(DeviceKind k) noexcept {
    return 1u << static_cast<unsigned>(k);
}

/// A host request's future (Data::request): get() waits and returns the host copy.
template <class T>
class HostAccess {
  public:
    /// Made by Data::request.
    HostAccess(DeviceTask t, device::detail::DataBlock* b) : t_(std::move(t)), b_(b) {}
    /// Whether the host copy is there.
    bool ready() const noexcept { return t_.ready(); }
    /// Waits for the host copy (a pool worker runs other tasks meanwhile).
    void wait() const { t_.wait(); }
    /// Runs `f()` as soon as the host copy is granted or the request failed, on the thread
    /// that grants it (the device runtime's, or a device engine's): `f` calls get(), which
    /// then returns the copy without waiting or rethrows the error. No worker waits meanwhile
    /// (get() in a continuation holds one until the grant). `f` must be short and must not
    /// wait (for a device task, a host request, a future): it runs inside the device
    /// runtime's step. It may send messages, insert pool tasks and call release(); the
    /// pool's epoch stays open while it runs, and an exception it throws fails the pool as a
    /// task would. If the request is granted already, `f` runs at once on the caller's
    /// thread (its exception reaches the caller). One `f` per request, before release().
    void on_granted(std::function<void()> f) const { device::detail::on_granted(t_, std::move(f)); }
    /// The host copy, valid until Data::release(); rethrows the error of a task this request
    /// waited for.
    std::span<T> get() const {
        t_.get();
        return {static_cast<T*>(device::detail::access_pointer(b_)), b_->bytes / sizeof(T)};
    }
    /// Once granted: the device whose own copy get() gives (request_chunked with kinds to
    /// lend, request_on), or -1 for the host copy. A device copy's memory is the device's
    /// (a CUDA pointer is not readable by host code); it is pinned there until release().
    int device() const noexcept { return device::detail::access_device(b_); }
    /// Once granted: whether the freshest copy was on a device and comes to the host in
    /// chunks (request_chunked), however many of them have landed already.
    bool fetched() const noexcept { return device::detail::access_fetched(b_); }
    /// For request_chunked(), once granted: bytes of the host copy valid from its start
    /// (failed_chunk when a copy failed: the Data's next user gets the error).
    std::size_t ready_bytes() const noexcept { return device::detail::host_ready(b_); }
    /// ready_bytes() when a chunk's copy failed.
    static constexpr std::size_t failed_chunk = ~std::size_t(0);
    /// The request as a task. It finishes at Data::release(), not when the host copy is
    /// granted (tasks submitted after the request wait for the release): a continuation
    /// chained to it with then() runs after the release, so it must not be the code that
    /// calls release(). To act once the copy is granted, call get() (a pool worker runs
    /// other tasks while it waits).
    const DeviceTask& task() const noexcept { return t_; }

  private:
    DeviceTask t_;
    device::detail::DataBlock* b_;
};

/// One logical array of `T` with a copy per memory space (see the top of this file).
template <class T>
class Data {
    static_assert(std::is_trivially_copyable_v<T>, "Data<T> holds trivially copyable elements");

  public:
    Data() = default;
    /// `n` elements, zero until written.
    Data(Devices& d, std::size_t n, std::string name = {})
        : b_(device::detail::new_block(d, n * sizeof(T), sizeof(T), std::move(name), nullptr)) {}
    /// A copy of `init`.
    Data(Devices& d, std::span<const T> init, std::string name = {})
        : b_(device::detail::new_block(d, init.size_bytes(), sizeof(T), std::move(name),
                                       init.data())) {}
    /// Another handle to the same data.
    Data(const Data& o) noexcept : b_(o.b_) {
        if (b_) device::detail::retain(b_);
    }
    /// Takes the handle over.
    Data(Data&& o) noexcept : b_(std::exchange(o.b_, nullptr)) {}
    /// Another handle to `o`'s data.
    Data& operator=(Data o) noexcept {
        std::swap(b_, o.b_);
        return *this;
    }
    ~Data() {
        if (b_) device::detail::release(b_);
    }

    /// Number of elements.
    std::size_t size() const noexcept { return b_ ? b_->bytes / sizeof(T) : 0; }
    /// Size in bytes.
    std::size_t bytes() const noexcept { return b_ ? b_->bytes : 0; }
    /// Its name in errors and the trace.
    const std::string& name() const noexcept { return b_->name; }
    /// False for a default-constructed or moved-from handle.
    bool valid() const noexcept { return b_ != nullptr; }

    /// Host access after every task submitted before it that writes (for read) or uses
    /// (for write, readwrite) this data; the data stays on the host for the caller until
    /// release(). One request at a time per Data.
    HostAccess<T> request(DataAccess a) const {
        return {device::detail::request_host(b_, {.mode = a}), b_};
    }
    /// Host read access granted before the host copy is whole: when the freshest copy is on a
    /// device, it comes to the host in copies of `chunk_bytes` and HostAccess::ready_bytes()
    /// tells how much of it (from the start) has landed; the caller uses each part as it
    /// lands (a sender pipelines the network behind the copies). When that device's kind is
    /// in `lend` (lend_bit masks) and its memory is addressed by pointers (CUDA, or a device
    /// whose memory is host memory), nothing is copied: the access is granted on the device
    /// copy itself (HostAccess::device()), for a reader that can use device memory (a
    /// GPU-aware MPI). `trace_link` (trace::link_id) ties the trace's slices of the copies to
    /// the caller's own. release() as for request().
    HostAccess<T> request_chunked(std::size_t chunk_bytes, unsigned lend = 0,
                                  std::uint64_t trace_link = 0) const {
        return {
            device::detail::request_host(
                b_,
                {.mode = DataAccess::read, .chunk = chunk_bytes, .lend = lend, .link = trace_link}),
            b_};
    }
    /// Write access to the copy on device `device` itself (allocated there if need be,
    /// without evicting), for a writer that can use device memory (a GPU-aware MPI receiving
    /// into it): after release() that copy is the valid one. Granted on the host copy instead
    /// (HostAccess::device() is -1) when the device's memory is an OpenCL buffer or it has no
    /// room. release() as for request().
    HostAccess<T> request_on(int device) const {
        return {device::detail::request_host(b_, {.mode = DataAccess::write, .on = device}), b_};
    }
    /// During a granted host write access (request(write) or request(readwrite)): copies
    /// elements [first, first + count) of the host copy, written already, to device `device`
    /// (an index of its Devices) now, while the host goes on writing the rest. When the pieces
    /// pushed cover the whole Data by release(), the device's copy is valid too and tasks
    /// there start without a copy in (they wait for the last piece). False when the device
    /// has no room without evicting, or is pushed to from a Data already moving: nothing
    /// was sent, and the Data stays on the host.
    /// `trace_link` (trace::link_id) ties the trace's slice of the copy to the caller's own.
    bool push_range(int device, std::size_t first, std::size_t count,
                    std::uint64_t trace_link = 0) const {
        return device::detail::push_range(b_, device, first * sizeof(T), count * sizeof(T),
                                          trace_link);
    }
    /// Ends the host access of request(); tasks waiting for it may run.
    void release() const { device::detail::release_host(b_); }
    /// A copy of the contents (request(read), copy, release()).
    std::vector<T> to_vector() const {
        auto h = request(DataAccess::read);
        std::span<T> s;
        try {
            s = h.get();
        } catch (...) {
            release();
            throw;
        }
        std::vector<T> v(s.begin(), s.end());
        release();
        return v;
    }

    /// The pool of the Devices it belongs to.
    Threadpool& pool() const noexcept { return device::detail::pool_of(b_); }
    /// The kind of device `device` (an index) of the Devices it belongs to.
    DeviceKind device_kind(int device) const { return device::detail::device_kind(b_, device); }
    /// The shared state (for the runtime).
    device::detail::DataBlock* block() const noexcept { return b_; }

  private:
    device::detail::DataBlock* b_ = nullptr;
};

/// A Data argument of a task with its access mode.
template <class T>
struct DataArg {
    device::detail::DataBlock* block;  ///< the data
    DataAccess mode;                   ///< how the task uses it
};
template <class T>
DataArg<T> read(const Data<T>& d) noexcept {
    return {d.block(), DataAccess::read};
}
template <class T>
DataArg<T> write(const Data<T>& d) noexcept {
    return {d.block(), DataAccess::write};
}
template <class T>
DataArg<T> readwrite(const Data<T>& d) noexcept {
    return {d.block(), DataAccess::readwrite};
}

}  // namespace cascade
