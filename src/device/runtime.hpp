// The device runtime's internals: the task-state pool, the ready stack, the runtime thread's
// tables (devices, residency, transfers in flight, per-kernel timings). Everything below
// "runtime thread only" is touched by that thread alone, so it needs no lock.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cascade/device/detail/block.hpp"
#include "cascade/device/detail/task_state.hpp"
#include "cascade/device/devices.hpp"
#include "doorbell.hpp"
#include "event_pool.hpp"
#include "host_pool.hpp"
#include "task_pool.hpp"

namespace cascade::device::detail {

// A transfer in flight: after `ev`, chain a copy in (staging through the host), unpin the
// source, free evicted memory.
struct Transfer {
    Event* ev = nullptr;
    DataBlock* block = nullptr;
    int device = -1;           // the device that runs it
    int src_space = -1;        // pinned while it runs
    int then_space = -1;       // stage 2: copy host -> this space when done
    void* free_ptr = nullptr;  // eviction: device memory to free when done
    std::size_t bytes = 0;
    bool out = false;             // device -> host
    double issued = 0;            // now_seconds() when issued
    std::size_t chunk_index = 0;  // a chunk of a chunked fetch (chunked: true)
    bool chunked = false;
    bool pushed = false;     // a piece of push_range (holds the pool's external work)
    std::uint64_t link = 0;  // trace link id of the copy (0: none)
};

// Per-device bookkeeping of the runtime thread.
struct DeviceSlot {
    std::unique_ptr<Device> dev;
    std::deque<TaskState*> admit;      // scheduled, waiting for memory (FIFO)
    std::vector<DataBlock*> resident;  // blocks with a copy here
    std::unordered_map<std::size_t, std::vector<void*>> pool;  // freed memory by size
    std::size_t pooled_bytes = 0;
    std::size_t capacity = 0;  // data bytes allowed (the cap)
    std::size_t used = 0;      // bytes allocated from the backend (incl. pool)
    std::size_t freeing = 0;   // bytes of evicted copies being written back (freed when done)
    int in_flight = 0;         // tasks admitted, not finished
    int transfers = 0;         // transfers in flight
    double backlog = 0;        // expected seconds of the admitted tasks
    DeviceStats stats;
    void* trace_kernel = nullptr;  // trace buffers (trace.cpp)
    void* trace_in = nullptr;
    void* trace_out = nullptr;
    std::int64_t trace_last[3] = {0, 0, 0};  // end of the last slice per track
};

class Runtime {
  public:
    Runtime(Devices& owner, Threadpool& tp, const DevicesOptions& opts);
    ~Runtime();
    void start();
    void stop();

    // ---- any thread -----------------------------------------------------------------
    TaskState* acquire();
    void recycle(TaskState* t) noexcept;
    void make_ready(TaskState* t);                      // deps reached zero
    void complete(TaskState* t, std::exception_ptr e);  // finished (any thread)
    void fire_on_grant(TaskState* t);        // host request granted or failed: runs its on_grant
    void free_block(DataBlock* b) noexcept;  // last reference gone
    void wake() noexcept;
    HostPool host;  // host copies

    Devices& owner;
    Threadpool& tp;
    DevicesOptions opts;
    std::uint64_t id;
    int n_spaces = 1;
    std::vector<int> space_device;     // per space: the device that holds it (-1: the host)
    std::vector<DeviceSlot> slots;     // fixed after construction
    std::atomic<long> outstanding{0};  // submitted, not finished
    std::atomic<int> held_accesses{0};
    std::atomic<std::uint64_t> tasks_total{0};
    bool abandon = false;            // destroyed with tasks that can never run
    std::atomic<int> finishers{0};   // backends inside Event::finish()/fail()
    std::atomic<int> completing{0};  // threads inside complete()
    std::mutex step_mutex;           // held during a step (by the runtime thread or a helper)
    // A thread outside the pool waiting for a task (or submitting one) runs a step itself when
    // no one else does: the task is launched, and its completion seen, without waiting for
    // the runtime thread to wake up. Returns whether something moved.
    bool help();
    // A backend thread that just finished an operation (the sim device's engines, when
    // their thread is marked with defer_completions()) completes it itself: the finish
    // does not ring the runtime thread; the backend calls run_deferred() once it has started
    // its next operation (or has none), which steps the runtime here, until nothing moves,
    // instead of waking the runtime thread (one wake-up less per device operation). When
    // the runtime thread is stepping already, it rings as a plain finish does.
    void step_here();
    std::atomic<std::uint64_t> steps_by_backends{0};  // step_here() calls that stepped
    // A thread outside the pool waiting for kernel task t: when t runs on a device with native
    // events, it blocks on t's event (Device::wait_held), then runs the step that completes t.
    // False when it could not (t not launched yet, or no native event): then it polls.
    bool wait_native(TaskState* t);
    std::atomic<int> native_waiters{0};  // threads in wait_native() past hold(); stop() waits

    // ---- the runtime thread, or a helper holding step_mutex -----------------------------
    void loop();
    bool step();
    Event* new_event();
    void unref(Event* e) noexcept;
    void schedule(TaskState* t);  // scheduler.cpp
    // memory.cpp: allocates t's copies on device d (evicting only if `evicting`); false: wait.
    bool admit(int d, TaskState* t, bool evicting);
    bool prepare(TaskState* t);     // memory.cpp: arrange each argument's copy
    bool fetch_host(TaskState* t);  // memory.cpp: host requests
    void launch(TaskState* t);
    void finish_kernel(TaskState* t);
    void fail_task(TaskState* t, std::exception_ptr e);
    bool progress_transfers();  // memory.cpp
    void issue_copy(int d, DataBlock* b, int from, int to, int then_space);
    // A device -> host copy of b in chunks of `chunk` bytes (request_chunked): host_ready
    // grows as they land, in order.
    // Chunk k's copy has the trace link trace::link_id(link, k) when link != 0.
    void issue_chunked_out(int d, DataBlock* b, int from, std::size_t chunk, std::uint64_t link);
    void chunk_landed(const Transfer& tr);
    // push_range / the end of a host write that pushed pieces (data.cpp, under step_mutex).
    bool push_piece(DataBlock* b, int d, std::size_t off, std::size_t bytes, std::uint64_t link);
    void end_pushes(DataBlock* b);
    // The host access that was lent b's copy on device d ends (data.cpp, under step_mutex).
    void end_lend(DataBlock* b, int d);
    // A host access asked on a device (request_on) or one that may be lent a device copy:
    // 1: granted on the device's copy, 0: not yet, -1: it goes to the host like any other
    // (memory.cpp).
    int prepare_on_device(TaskState* t);
    void* device_allocate(int d, std::size_t bytes);
    void device_free(int d, void* p, std::size_t bytes) noexcept;
    void drop_copy(DataBlock* b, int space) noexcept;
    void release_blocks();
    void ensure_host(DataBlock* b);
    void evict(int d, DataBlock* b);
    DataBlock* lru_victim(int d, const TaskState* t) const;
    double expected_seconds(const Kernel& k, int d) const;
    void record_seconds(const Kernel& k, int d, double s);
    void trace_op(int d, int queue, const std::string& what, Event& e,
                  std::uint64_t link = 0);  // trace.cpp
    void trace_setup();
    void trace_counters();

    std::vector<TaskState*> incoming;      // drained from the ready stack, FIFO
    std::vector<TaskState*> active;        // fetching or running
    std::vector<TaskState*> host_waiting;  // host requests fetching
    std::vector<Transfer> transfers;
    std::vector<double> kernel_seconds;  // [kernel id * devices + device], <0: unknown
    std::uint64_t use_clock = 0;
    EventPool events;
    bool polled_events = false;  // some device needs polling

  private:
    std::atomic<TaskState*> ready_{nullptr};
    std::atomic<DataBlock*> freed_{nullptr};
    TaskStatePool task_states{id, this};
    Doorbell doorbell_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

void drop(TaskState* s) noexcept;  // a reference to a task state

// The calling thread finishes device operations (a sim engine's thread): from now on its
// finishes defer the runtime's wake-up to run_deferred().
void defer_completions() noexcept;
// Steps the runtime whose operation this thread finished last (if any), or rings it.
void run_deferred() noexcept;
void close_join(TaskState* j);  // dependencies.cpp: a readers' join is complete
bool add_successor(TaskState* p, TaskState* s, bool propagate);

// Backends (each in its own file).
std::unique_ptr<Device> make_cpu_device(Threadpool& tp);
std::unique_ptr<Device> make_sim_device(int number, const SimOptions& o, bool separate_queues,
                                        bool pinned, bool complete_on_engine);
// OpenCL / CUDA devices found (up to `count`, -1: all); empty when the backend is not built
// or finds none (then `why` says why).
std::vector<std::unique_ptr<Device>> make_opencl_devices(int count, bool separate_queues,
                                                         std::string& why);
std::vector<std::unique_ptr<Device>> make_cuda_devices(int count, bool separate_queues, bool pinned,
                                                       std::string& why);

double now_seconds() noexcept;

}  // namespace cascade::device::detail
