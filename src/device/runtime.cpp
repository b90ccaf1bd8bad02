// The runtime thread: it takes ready tasks, has the scheduler place them, admits them to their
// device's memory, arranges their data, launches their kernels, follows transfers and kernels
// to completion and releases the tasks that waited for them. It sleeps in the kernel when
// nothing is in flight and is woken by submissions and by backends finishing work; while a
// backend with native events (OpenCL, CUDA) has work in flight it polls them, backing off.
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

#include "cascade/core/detail/waits.hpp"
#include "cascade/core/errors.hpp"
#include "cascade/core/settings.hpp"
#include "cascade/core/spinlock.hpp"
#include "cascade/trace/event.hpp"
#include "runtime.hpp"

namespace cascade::device::detail {

double now_seconds() noexcept {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

namespace {
std::atomic<std::uint64_t> g_next_id{1};

std::size_t memory_from_env() {
    const std::optional<std::string> raw = settings::raw("CASCADE_DEVICE_MEMORY");
    if (!raw || raw->empty()) return 0;
    const char* v = raw->c_str();
    char* end = nullptr;
    double x = std::strtod(v, &end);
    std::string unit = end ? end : "";
    double mult = 1;
    if (unit == "K" || unit == "KiB" || unit == "k")
        mult = 1024;
    else if (unit == "M" || unit == "MiB")
        mult = 1024.0 * 1024;
    else if (unit == "G" || unit == "GiB")
        mult = 1024.0 * 1024 * 1024;
    else if (!unit.empty() || x <= 0)
        throw UsageError(std::string("CASCADE_DEVICE_MEMORY='") + v +
                         "': expected bytes, optionally with K, M or G (e.g. 512M)");
    return static_cast<std::size_t>(x * mult);
}

// A thread that finishes device operations and steps the runtime itself (defer_completions):
// the runtime of the operation it finished last, still counted in its finishers.
thread_local bool t_defers = false;
thread_local Runtime* t_deferred = nullptr;
// The runtime this thread is stepping in step_here() (its make_ready() need not ring).
thread_local const Runtime* t_stepping = nullptr;

// An event's finisher enters before the state changes and leaves after waking the runtime: the
// runtime is not destroyed while one is still inside (stop() waits for them). A deferring
// thread leaves in run_deferred(), after stepping the runtime or ringing it.
void wake_runtime(void* p, bool entering) {
    auto* rt = static_cast<Runtime*>(p);
    if (entering) {
        rt->finishers.fetch_add(1, std::memory_order_acq_rel);
        return;
    }
    if (t_defers) {
        if (t_deferred && t_deferred != rt) run_deferred();  // another runtime's, first
        if (t_deferred == rt) {  // already counted once: one step covers both
            rt->finishers.fetch_sub(1, std::memory_order_acq_rel);
            return;
        }
        t_deferred = rt;
        return;
    }
    rt->wake();
    rt->finishers.fetch_sub(1, std::memory_order_acq_rel);
}
}  // namespace

void defer_completions() noexcept {
    t_defers = true;
}

void run_deferred() noexcept {
    // A finish inside the step (an operation that failed as it was issued) defers again.
    while (Runtime* rt = std::exchange(t_deferred, nullptr)) {
        rt->step_here();
        rt->finishers.fetch_sub(1, std::memory_order_acq_rel);
    }
}

void Runtime::step_here() {
    std::unique_lock<std::mutex> lk(step_mutex, std::try_to_lock);
    if (!lk.owns_lock() || stop_.load(std::memory_order_acquire)) {
        wake();  // the runtime thread is stepping (or stopping): it sees the finish
        return;
    }
    steps_by_backends.fetch_add(1, std::memory_order_relaxed);
    t_stepping = this;
    // Until nothing moves (what became ready in one step is taken by the next), at most a
    // few rounds: then the runtime thread takes over.
    bool moved = false;
    for (int i = 0; i < 8 && (moved = step()); ++i) {
    }
    t_stepping = nullptr;
    lk.unlock();
    if (moved || polled_events) wake();
}

Runtime::Runtime(Devices& o, Threadpool& pool, const DevicesOptions& op)
    : host(op.memory_pool), owner(o), tp(pool), opts(op), id(g_next_id.fetch_add(1)) {
    std::vector<std::unique_ptr<Device>> devs;
    if (opts.cpu) devs.push_back(make_cpu_device(tp));
    for (int i = 0; i < opts.sim; ++i)
        devs.push_back(make_sim_device(i, opts.sim_options, opts.separate_queues, opts.pinned_host,
                                       opts.complete_on_backend));
    // N > 0 devices asked for must be there; -1 takes whatever is found, none included.
    std::string why;
    if (opts.opencl) {
        auto cl = make_opencl_devices(opts.opencl, opts.separate_queues, why);
        if (opts.opencl > 0 && static_cast<int>(cl.size()) < opts.opencl)
            throw UsageError("DevicesOptions::opencl = " + std::to_string(opts.opencl) + ": " +
                             (cl.empty() ? why : "only " + std::to_string(cl.size()) + " found"));
        for (auto& d : cl)
            devs.push_back(std::move(d));
    }
    if (opts.cuda) {
        auto cu = make_cuda_devices(opts.cuda, opts.separate_queues, opts.pinned_host, why);
        if (opts.cuda > 0 && static_cast<int>(cu.size()) < opts.cuda)
            throw UsageError("DevicesOptions::cuda = " + std::to_string(opts.cuda) + ": " +
                             (cu.empty() ? why : "only " + std::to_string(cu.size()) + " found"));
        for (auto& d : cu)
            devs.push_back(std::move(d));
    }
    if (devs.empty()) throw UsageError("Devices: no device (DevicesOptions enables none)");
    const std::size_t env_cap = memory_from_env();
    space_device.push_back(-1);
    for (auto& d : devs) {
        DeviceSlot s;
        s.dev = std::move(d);
        s.dev->index = static_cast<int>(slots.size());
        if (s.dev->kind() == DeviceKind::cpu) {
            s.dev->space = 0;
            s.capacity = ~std::size_t(0);
        } else {
            s.dev->space = n_spaces++;
            space_device.push_back(s.dev->index);
            std::size_t cap = s.dev->capacity();
            const std::size_t want = opts.memory ? opts.memory : env_cap;
            if (want && (cap == 0 || want < cap)) cap = want;
            s.capacity = cap ? cap : ~std::size_t(0);
            polled_events |= s.dev->needs_polling();
        }
        slots.push_back(std::move(s));
    }
    if (n_spaces > 64) throw UsageError("Devices: at most 63 devices with memory of their own");
    trace_setup();
}

Runtime::~Runtime() {
    stop();
}

void Runtime::start() {
    thread_ = std::thread([this] { loop(); });
}

void Runtime::stop() {
    if (!thread_.joinable()) return;
    stop_.store(true, std::memory_order_seq_cst);
    wake();
    thread_.join();
    while (finishers.load(std::memory_order_acquire) > 0 ||
           completing.load(std::memory_order_acquire) > 0 ||
           native_waiters.load(std::memory_order_acquire) > 0)
        std::this_thread::yield();
}

void Runtime::wake() noexcept {
    // Inside step_here(), which steps until nothing moves: no need to wake the runtime thread.
    if (t_stepping == this) return;
    doorbell_.ring();
}

Event* Runtime::new_event() {
    return events.take(&wake_runtime, this);
}

void Runtime::unref(Event* e) noexcept {
    events.unref(e);
}

void Runtime::fail_task(TaskState* t, std::exception_ptr e) {
    if (t->phase >= 1 && t->device >= 0) {  // admitted: give back its pins
        DeviceSlot& s = slots[static_cast<std::size_t>(t->device)];
        if (s.dev->space != 0)
            for (std::size_t i = 0; i < t->args.size(); ++i)
                if (t->args[i].block && !t->args[i].duplicate) {
                    bool first = true;
                    for (std::size_t j = 0; j < i; ++j)
                        first &= t->args[j].block != t->args[i].block;
                    if (first)
                        --t->args[i].block->copies[static_cast<std::size_t>(s.dev->space)].pins;
                }
        --s.in_flight;
        s.backlog = std::max(0.0, s.backlog - t->expected);
    } else if (t->device >= 0) {
        DeviceSlot& s = slots[static_cast<std::size_t>(t->device)];
        s.backlog = std::max(0.0, s.backlog - t->expected);
    }
    t->phase = 9;
    complete(t, e);
}

void Runtime::launch(TaskState* t) {
    DeviceSlot& s = slots[static_cast<std::size_t>(t->device)];
    const auto sp = static_cast<std::size_t>(s.dev->space);
    const std::size_t n = t->args.size();
    t->slots.resize(n);
    t->sizes.resize(n);
    t->is_data.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        ArgSlot& a = t->args[i];
        if (a.block) {
            a.block->copies[sp].last_use = ++use_clock;
            t->slots[i] = a.block->copies[sp].ptr;
            t->sizes[i] = a.block->bytes;
            t->is_data[i] = 1;
        } else {
            t->slots[i] = a.value;
            t->sizes[i] = a.size;
            t->is_data[i] = 0;
        }
    }
    LaunchRecord& r = t->launch;
    r.kernel = t->kernel;
    r.task_name = &t->name;
    r.threads = t->threads;
    r.scratch_bytes = t->scratch_bytes;
    r.slots = t->slots.data();
    r.sizes = t->sizes.data();
    r.is_data = reinterpret_cast<const bool*>(t->is_data.data());
    r.n = static_cast<int>(n);
    Event* e = new_event();
    t->kernel_event = e;
    t->t_launch = static_cast<std::int64_t>(now_seconds() * 1e9);
    t->phase = 2;
    e->t_start = trace::stamp();
    try {
        s.dev->launch(r, *e);
    } catch (...) {
        e->fail(std::current_exception());
    }
}

void Runtime::finish_kernel(TaskState* t) {
    DeviceSlot& s = slots[static_cast<std::size_t>(t->device)];
    Event* e = t->kernel_event;
    const double secs =
        e->seconds > 0 ? e->seconds : now_seconds() - static_cast<double>(t->t_launch) * 1e-9;
    trace_op(t->device, 0, t->name, *e);
    std::exception_ptr err;
    if (e->state.load(std::memory_order_acquire) == Event::failed) err = e->error;
    s.dev->release(*e);
    unref(e);
    t->kernel_event = nullptr;
    if (!err) record_seconds(*t->kernel, t->device, secs);
    t->ran_s = secs;
    ++s.stats.tasks;
    s.stats.busy_seconds += secs;
    fail_task(t, err);  // gives back pins and the device's slot; completes
}

bool Runtime::help() {
    std::unique_lock<std::mutex> lk(step_mutex, std::try_to_lock);
    if (!lk.owns_lock()) return false;
    return step();
}

bool Runtime::wait_native(TaskState* t) {
    Device* dev = nullptr;
    void* held = nullptr;
    {
        std::lock_guard<std::mutex> g(step_mutex);
        step();  // launches t if it is still waiting
        if (t->status.load(std::memory_order_acquire) != TaskState::pending) return true;
        if (t->phase != 2 || !t->kernel_event || t->kernel_event->finished()) return false;
        dev = slots[static_cast<std::size_t>(t->device)].dev.get();
        held = dev->hold(*t->kernel_event);
        if (!held) return false;
        native_waiters.fetch_add(1, std::memory_order_acq_rel);
    }
    dev->wait_held(held);
    {
        std::lock_guard<std::mutex> g(step_mutex);
        step();  // sees t's event complete: finishes t and wakes the tasks after it
    }
    // Last: the runtime thread may have completed t meanwhile, and stop() waits for this.
    native_waiters.fetch_sub(1, std::memory_order_acq_rel);
    return true;
}

bool Runtime::step() {
    bool moved = false;
    // Ready tasks, in the order they became ready.
    if (TaskState* r = ready_.exchange(nullptr, std::memory_order_acquire)) {
        const std::size_t first = incoming.size();
        for (; r; r = r->next)
            incoming.push_back(r);
        std::reverse(incoming.begin() + static_cast<std::ptrdiff_t>(first), incoming.end());
        moved = true;
    }
    if (freed_.load(std::memory_order_relaxed)) {
        release_blocks();
        moved = true;
    }
    moved |= progress_transfers();
    for (TaskState* t : incoming) {
        if (t->kind == TaskKind::host_access) {
            t->device = -1;
            t->phase = 1;
            active.push_back(t);
        } else {
            schedule(t);
        }
    }
    incoming.clear();
    // Admission: each device takes tasks in order while its queue has room. When the first
    // one would have to evict, a later one whose data fits without evicting goes first (data
    // already there is used before it is pushed out), up to 64 times per task.
    constexpr int kDepth = 32;
    constexpr std::size_t kLookahead = 32;
    for (std::size_t d = 0; d < slots.size(); ++d) {
        DeviceSlot& s = slots[d];
        while (!s.admit.empty() && s.in_flight < kDepth) {
            std::size_t pick = 0;
            bool ok = false;
            try {
                ok = admit(static_cast<int>(d), s.admit.front(), false);
                if (!ok && s.admit.front()->bypassed < 64) {
                    for (std::size_t j = 1; j < std::min(s.admit.size(), kLookahead); ++j)
                        if (admit(static_cast<int>(d), s.admit[j], false)) {
                            pick = j;
                            ok = true;
                            ++s.admit.front()->bypassed;
                            break;
                        }
                }
                if (!ok) ok = admit(static_cast<int>(d), s.admit.front(), true);
            } catch (...) {
                TaskState* t = s.admit.front();
                s.admit.pop_front();
                fail_task(t, std::current_exception());
                moved = true;
                continue;
            }
            if (!ok) break;
            TaskState* t = s.admit[pick];
            s.admit.erase(s.admit.begin() + static_cast<std::ptrdiff_t>(pick));
            moved = true;
            if (t->phase == 9) continue;  // failed in admission
            t->phase = 1;
            ++s.in_flight;
            active.push_back(t);
        }
    }
    for (std::size_t i = 0; i < active.size();) {
        TaskState* t = active[i];
        bool gone = false;
        try {
            if (t->phase == 1) {
                if (prepare(t)) {
                    moved = true;
                    if (t->kind == TaskKind::host_access) {
                        held_accesses.fetch_add(1, std::memory_order_relaxed);
                        t->status.store(TaskState::granted, std::memory_order_release);
                        t->status.notify_all();
                        fire_on_grant(t);
                        gone = true;  // release() completes it
                    } else {
                        launch(t);
                    }
                }
            } else if (t->phase == 2) {
                DeviceSlot& s = slots[static_cast<std::size_t>(t->device)];
                if (s.dev->poll(*t->kernel_event)) {
                    finish_kernel(t);
                    gone = true;
                    moved = true;
                }
            }
        } catch (...) {
            if (t->kind == TaskKind::host_access) {
                t->phase = 0;
                complete(t, std::current_exception());
            } else {
                fail_task(t, std::current_exception());
            }
            gone = true;
            moved = true;
        }
        if (gone) {
            active[i] = active.back();
            active.pop_back();
        } else {
            ++i;
        }
    }
    return moved;
}

void Runtime::loop() {
    // Short timed sleeps while polling native events: no 50 us timer slack on them.
    prctl(PR_SET_TIMERSLACK, 1UL);
    prctl(PR_SET_NAME, "cascade-device");
    int quiet = 0;
    auto quiet_since = std::chrono::steady_clock::now();
    for (;;) {
        const std::uint32_t word = doorbell_.word();
        bool moved, polling;
        {
            // Steps are serialized by step_mutex: threads waiting for a task help (help()),
            // and stats() takes its snapshot between two steps.
            std::lock_guard<std::mutex> g(step_mutex);
            moved = step();
            if (stop_.load(std::memory_order_acquire) && active.empty() && transfers.empty() &&
                incoming.empty() && !ready_.load() && (outstanding.load() == 0 || abandon)) {
                release_blocks();
                break;
            }
            polling = polled_events && (!active.empty() || !transfers.empty());
        }
        if (moved) {
            quiet = 0;
            continue;
        }
        if (polling) {
            // Native events: poll, yielding the core, for 500 us after the last progress (a
            // small kernel or copy finishes within that); then back off, up to 200 us sleeps.
            // While a thread blocks on an event itself (wait_native), it completes that task:
            // the runtime thread backs off at once and leaves the cores to the device.
            if (++quiet == 1) quiet_since = std::chrono::steady_clock::now();
            if (native_waiters.load(std::memory_order_relaxed) == 0 &&
                std::chrono::steady_clock::now() - quiet_since < std::chrono::microseconds(500)) {
                std::this_thread::yield();
            } else {
                const long us = native_waiters.load(std::memory_order_relaxed) > 0
                                    ? 200
                                    : std::min<long>(200, 8L * (quiet & 31));
                doorbell_.sleep(word, us * 1000);
            }
            continue;
        }
        // Nothing to poll: stay awake for a moment (the next submission often follows the
        // last completion), then sleep until woken (a 100 ms guard against a lost wake-up).
        if (++quiet < 64) {
            std::this_thread::yield();
            continue;
        }
        doorbell_.sleep(word, 100L * 1000 * 1000);
    }
}

}  // namespace cascade::device::detail

// ---- Devices -------------------------------------------------------------------------------
namespace cascade {

Devices::Devices(Threadpool& tp, DevicesOptions opts)
    : tp_(tp),
      opts_(std::move(opts)),
      rt_(std::make_unique<device::detail::Runtime>(*this, tp_, opts_)) {
    rt_->start();
}

Devices::~Devices() {
    try {
        wait_all();
    } catch (const std::exception& e) {
        // Tasks behind a host request never released cannot run: they are abandoned.
        std::fprintf(stderr, "cascade: Devices '%s' destroyed: %s\n", opts_.name.c_str(), e.what());
        rt_->abandon = true;
    }
    rt_->trace_counters();
    rt_->stop();
    // Abandoned tasks never complete: the pool stops waiting for them.
    for (long k = rt_->outstanding.load(std::memory_order_acquire); k > 0; --k)
        tp_.release_external_work();
}

void Devices::wait_all() {
    ++cascade::detail::tls_waits;  // a wait, ready or not (core/detail/waits.hpp)
    auto& rt = *rt_;
    const bool worker = tp_.current_thread() >= 0;
    for (long v = rt.outstanding.load(std::memory_order_acquire); v != 0;
         v = rt.outstanding.load(std::memory_order_acquire)) {
        if (const int held = rt.held_accesses.load(std::memory_order_acquire); held > 0)
            throw UsageError("Devices::wait_all(): " + std::to_string(held) +
                             " host request(s) granted and not released (tasks after them "
                             "could never run): call Data::release() first");
        if (worker) {
            if (!tp_.run_one_task()) std::this_thread::yield();
        } else {
            // Woken by the last completion; re-checks the holds every 10 ms.
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(10);
            while (rt.outstanding.load(std::memory_order_acquire) == v &&
                   rt.held_accesses.load(std::memory_order_acquire) == 0 &&
                   std::chrono::steady_clock::now() < until)
                std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
    }
}

int Devices::size() const noexcept {
    return static_cast<int>(rt_->slots.size());
}
Device& Devices::device(int i) const {
    if (i < 0 || i >= size())
        throw UsageError("Devices::device(" + std::to_string(i) + "): there are " +
                         std::to_string(size()) + " devices");
    return *rt_->slots[static_cast<std::size_t>(i)].dev;
}
int Devices::find(DeviceKind kind) const noexcept {
    for (int i = 0; i < size(); ++i)
        if (rt_->slots[static_cast<std::size_t>(i)].dev->kind() == kind) return i;
    return -1;
}

DevicesStats Devices::stats() const {
    // Taken between two steps of the runtime thread (exact after wait_all()).
    DevicesStats st;
    std::lock_guard<std::mutex> g(rt_->step_mutex);
    st.tasks = rt_->tasks_total.load();
    st.backend_steps = rt_->steps_by_backends.load(std::memory_order_relaxed);
    for (const auto& s : rt_->slots) {
        st.devices.push_back(s.stats);
        st.bytes_in += s.stats.bytes_in;
        st.bytes_out += s.stats.bytes_out;
    }
    return st;
}

}  // namespace cascade
