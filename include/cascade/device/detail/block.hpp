// DataBlock: the shared state behind Data<T> handles. A copy per memory space (index 0: the
// host), their MSI states, and what implicit dependencies need: the last writer and a join of
// the readers since. Freed (device copies included) when the last handle and the last task are
// gone.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "cascade/core/spinlock.hpp"
#include "cascade/device/access.hpp"

namespace cascade {
struct Event;
}

namespace cascade::device::detail {

class Runtime;
struct TaskState;

// One copy: its memory (a pointer, or the backend's handle), and the event after which its
// contents are valid (a transfer into it still in flight).
struct Copy {
    void* ptr = nullptr;
    Event* pending = nullptr;
    std::uint64_t last_use = 0;
    int pins = 0;             // tasks or transfers using it: not evictable
    int resident_index = -1;  // index in its device's resident list
};

struct DataBlock {
    std::atomic<long> refs{1};
    Runtime* rt = nullptr;
    std::size_t bytes = 0;
    std::size_t elem_size = 1;
    std::string name;
    bool host_zero = false;    // the host copy was never written: zeros when first needed
    std::vector<Copy> copies;  // per space
    std::vector<Msi> states;   // per space

    // Implicit dependencies, under `lock`.
    Spinlock lock;
    TaskState* last_writer = nullptr;   // holds a reference
    TaskState* readers_join = nullptr;  // joins the readers since the last writer (a reference)
    TaskState* host_access = nullptr;   // the host request not yet released (a reference)

    // A chunked fetch to the host (request_chunked): bytes of the host copy valid from the
    // start (kFetchFailed: a chunk failed), written by the runtime thread.
    static constexpr std::size_t kFetchFailed = ~std::size_t(0);
    std::atomic<std::size_t> host_ready{0};
    std::size_t chunk = 0;         // runtime: chunk bytes of the fetch in flight
    std::vector<char> chunk_done;  // runtime: per chunk, landed
    std::size_t chunks_left = 0;   // runtime: chunks not landed yet
    Event* chunk_last = nullptr;   // runtime: the event the copies' pending marks name
    // Pieces of a host write pushed to a device as they are written (push_range), under the
    // runtime's step lock: the space they go to (0: none), and the bytes pushed.
    int push_space = 0;
    std::size_t pushed = 0;

    std::exception_ptr error;   // a transfer of it failed: tasks using it fail with this
    DataBlock* next = nullptr;  // the runtime's list of blocks to free
};

// Reference counting of blocks (a handle or a task holds one).
void retain(DataBlock* b) noexcept;
void release(DataBlock* b) noexcept;

}  // namespace cascade::device::detail
