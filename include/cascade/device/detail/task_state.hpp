// The shared state behind a DeviceTask (and a host request): its arguments, its dependency
// count and successors, its completion. States come from a per-Devices pool and are reused
// with their vectors' capacity, so submitting a task allocates nothing once warm.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "cascade/core/spinlock.hpp"
#include "cascade/device/access.hpp"
#include "cascade/device/device.hpp"
#include "cascade/device/kernel.hpp"

namespace cascade::device::detail {

class Runtime;
struct DataBlock;

// One argument: a Data with its access mode, or a scalar's bytes.
struct ArgSlot {
    DataBlock* block = nullptr;
    DataAccess mode = DataAccess::read;
    bool prepared = false;   // runtime: its copy is arranged on the device
    bool duplicate = false;  // runtime: the same Data appears earlier in the list
    std::uint32_t size = 0;
    alignas(8) unsigned char value[16];
};

enum class TaskKind : std::uint8_t { kernel, host_fn, host_access, join };

struct TaskState {
    // Status: pending until done or failed; a host request is `granted` while the host holds
    // the data (its successors wait for release()).
    enum : int { pending = 0, done = 1, failed = 2, granted = 3 };

    std::atomic<int> refs{0};
    std::atomic<int> deps{1};  // 1: held until submitted
    std::atomic<int> status{pending};
    Runtime* rt = nullptr;
    TaskKind kind = TaskKind::kernel;
    bool submitted = false;
    const Kernel* kernel = nullptr;
    std::string name;
    DeviceKind want = DeviceKind::any;
    int on = -1;  // a device index asked for, or -1
    Threads threads;
    std::size_t scratch_bytes = 0;
    std::vector<ArgSlot> args;
    std::function<void()> fn;  // host_fn
    // host_access: run by the thread that grants the request or fails it
    // (HostAccess::on_granted); taken under succ_lock.
    std::function<void()> on_grant;
    std::exception_ptr error;
    std::size_t chunk = 0;   // host_access read: fetch in chunks of this many bytes, grant early
    unsigned lend = 0;       // host_access read: kinds (1 << DeviceKind) whose copy may be lent
    int access_on = -1;      // host_access write: the device whose copy is asked for, or -1
    std::uint64_t link = 0;  // host_access: trace link of the copies it makes (0: none)
    // ---- set by the runtime before a host access is granted ----------------------------
    bool fetched = false;  // the grant came with a copy to the host in chunks
    int lent = -1;         // the device whose copy was granted instead of the host's, or -1
    std::atomic<bool> inherited{false};  // a predecessor failed: error holds its exception

    Spinlock succ_lock;
    bool closed = false;  // finished: no more successors
    std::vector<TaskState*> successors;
    TaskState* next = nullptr;  // ready stack / free list link

    // ---- the runtime thread's --------------------------------------------------------
    int device = -1;
    int phase = 0;
    int bypassed = 0;     // times later tasks were admitted before it
    double expected = 0;  // seconds the scheduler expects the kernel to take
    std::int64_t t_launch = 0;
    double ran_s = 0;          // the kernel's measured run time, once finished (0: none)
    Event* wait_on = nullptr;  // an event it waits for (not owned)
    Event* kernel_event = nullptr;
    LaunchRecord launch;
    std::vector<void*> slots;
    std::vector<std::size_t> sizes;
    std::vector<unsigned char> is_data;  // bool as bytes (vector<bool> has no data())
    std::atomic<int> parts{0};           // cpu backend: pieces not finished

    void reset() noexcept;
};

}  // namespace cascade::device::detail
