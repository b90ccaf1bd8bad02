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
DeviceTask request_host(DataBlock* b, DataAccess a, std::size_t chunk = 0);
std::size_t host_ready(DataBlock* b) noexcept;
Threadpool& pool_of(DataBlock* b) noexcept;
bool push_range(DataBlock* b, int device, std::size_t off, std::size_t bytes);
void release_host(DataBlock* b);
void* host_pointer(DataBlock* b) noexcept;
}  // namespace device::detail

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
    /// The host copy, valid until Data::release(); rethrows the error of a task this request
    /// waited for.
    std::span<T> get() const {
        t_.get();
        return {static_cast<T*>(device::detail::host_pointer(b_)), b_->bytes / sizeof(T)};
    }
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
    HostAccess<T> request(DataAccess a) const { return {device::detail::request_host(b_, a), b_}; }
    /// Host read access granted before the host copy is whole: when the freshest copy is on a
    /// device, it comes to the host in copies of `chunk_bytes` and HostAccess::ready_bytes()
    /// tells how much of it (from the start) has landed; the caller uses each part as it
    /// lands (a sender pipelines the network behind the copies). release() as for request().
    HostAccess<T> request_chunked(std::size_t chunk_bytes) const {
        return {device::detail::request_host(b_, DataAccess::read, chunk_bytes), b_};
    }
    /// During a granted host write access (request(write) or request(readwrite)): copies
    /// elements [first, first + count) of the host copy, written already, to device `device`
    /// (an index of its Devices) now, while the host goes on writing the rest. When the pieces
    /// pushed cover the whole Data by release(), the device's copy is valid too and tasks
    /// there start without a copy in (they wait for the last piece). False when the device
    /// has no room without evicting, or is pushed to from a Data already moving: nothing
    /// was sent, and the Data stays on the host.
    bool push_range(int device, std::size_t first, std::size_t count) const {
        return device::detail::push_range(b_, device, first * sizeof(T), count * sizeof(T));
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
