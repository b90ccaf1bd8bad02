// DeviceTask and the life of a task state: references, waiting, completion (successors
// released, waiters woken), continuations and when_all.
#include "cascade/device/task.hpp"

#include <chrono>
#include <thread>

#include "cascade/core/detail/waits.hpp"
#include "cascade/core/errors.hpp"
#include "runtime.hpp"

namespace cascade {

using device::detail::ArgSlot;
using device::detail::Runtime;
using device::detail::TaskKind;
using device::detail::TaskState;

namespace device::detail {

void TaskState::reset() noexcept {
    deps.store(1, std::memory_order_relaxed);
    status.store(pending, std::memory_order_relaxed);
    submitted = false;
    kernel = nullptr;
    name.clear();
    want = DeviceKind::any;
    on = -1;
    threads = Threads{};
    ran_s = 0;
    scratch_bytes = 0;
    args.clear();
    fn = nullptr;
    on_grant = nullptr;
    error = nullptr;
    chunk = 0;
    lend = 0;
    access_on = -1;
    link = 0;
    fetched = false;
    lent = -1;
    inherited.store(false, std::memory_order_relaxed);
    closed = false;
    successors.clear();
    next = nullptr;
    device = -1;
    phase = 0;
    bypassed = 0;
    expected = 0;
    t_launch = 0;
    wait_on = nullptr;
    kernel_event = nullptr;
}

void drop(TaskState* s) noexcept {
    if (s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) s->rt->recycle(s);
}

// Adds s as a successor of p (p must finish before s starts). With `propagate` (s uses what
// p produced: it reads p's output, or waits for p explicitly), a failure of p fails s too.
// False if p already finished.
bool add_successor(TaskState* p, TaskState* s, bool propagate) {
    p->succ_lock.lock();
    if (!p->closed) {
        s->deps.fetch_add(1, std::memory_order_relaxed);
        p->successors.push_back(reinterpret_cast<TaskState*>(
            reinterpret_cast<std::uintptr_t>(s) | static_cast<std::uintptr_t>(propagate)));
        p->succ_lock.unlock();
        return true;
    }
    p->succ_lock.unlock();
    if (propagate && p->status.load(std::memory_order_acquire) == TaskState::failed &&
        !s->inherited.exchange(true, std::memory_order_acq_rel))
        s->error = p->error;
    return false;
}

void Runtime::complete(TaskState* t, std::exception_ptr e) {
    // Counted from here to the end: the runtime is not destroyed while a thread (a pool worker
    // finishing a continuation, say) is still inside.
    completing.fetch_add(1, std::memory_order_acq_rel);
    if (e) t->error = e;
    const bool failed = t->error != nullptr;
    t->succ_lock.lock();
    t->closed = true;
    t->succ_lock.unlock();
    // The final state first, so that the tasks released below see it (on_done reads it).
    t->status.store(failed ? TaskState::failed : TaskState::done, std::memory_order_release);
    t->status.notify_all();
    if (t->kind == TaskKind::host_access) fire_on_grant(t);  // it failed before its grant
    for (TaskState* tagged : t->successors) {
        const auto bits = reinterpret_cast<std::uintptr_t>(tagged);
        TaskState* s = reinterpret_cast<TaskState*>(bits & ~std::uintptr_t(1));
        if (failed && (bits & 1) && !s->inherited.exchange(true, std::memory_order_acq_rel))
            s->error = t->error;
        if (s->deps.fetch_sub(1, std::memory_order_acq_rel) == 1) make_ready(s);
    }
    t->successors.clear();
    for (ArgSlot& a : t->args)
        if (a.block) release(a.block);
    t->args.clear();
    // What the task's end queued on the pool is queued: the pool may be idle now (before the
    // count below, which may let the Devices and then the pool be destroyed).
    tp.release_external_work();
    if (outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) outstanding.notify_all();
    drop(t);  // the runtime's reference
    completing.fetch_sub(1, std::memory_order_acq_rel);
}

void Runtime::fire_on_grant(TaskState* t) {
    t->succ_lock.lock();
    std::function<void()> f = std::move(t->on_grant);
    t->on_grant = nullptr;
    t->succ_lock.unlock();
    if (!f) return;
    // The epoch stays open while f runs (it may release the request, the pool's last work,
    // before it sends or fails), and f may send messages as a task would.
    Threadpool::ExternalScope scope(tp);
    try {
        f();
    } catch (...) {
        // Not on a pool task: the pool reports it as a failed task (join() throws).
        tp.insert([e = std::current_exception()] { std::rethrow_exception(e); });
    }
}

void Runtime::make_ready(TaskState* t) {
    if (t->inherited.load(std::memory_order_acquire)) {
        // A predecessor failed: do not run, fail with its exception.
        complete(t, nullptr);
        return;
    }
    switch (t->kind) {
        case TaskKind::join:
            complete(t, nullptr);
            return;
        case TaskKind::host_fn:
            tp.insert([this, t] {
                std::exception_ptr err;
                try {
                    t->fn();
                } catch (...) {
                    err = std::current_exception();
                }
                complete(t, err);
            });
            return;
        default:
            break;
    }
    TaskState* head = ready_.load(std::memory_order_relaxed);
    do {
        t->next = head;
    } while (!ready_.compare_exchange_weak(head, t, std::memory_order_release,
                                           std::memory_order_relaxed));
    wake();
}

TaskState* Runtime::acquire() {
    return task_states.take();
}

void Runtime::recycle(TaskState* t) noexcept {
    task_states.give(t);
}

TaskState* TaskStatePool::take() {
    struct Cache {
        std::uint64_t pool = 0;
        TaskState* chain = nullptr;
    };
    thread_local Cache cache;
    if (cache.pool != id_) cache = Cache{id_, nullptr};
    if (!cache.chain) cache.chain = returned_.exchange(nullptr, std::memory_order_acquire);
    TaskState* s = cache.chain;
    if (s) {
        cache.chain = s->next;
    } else {
        auto owned = std::make_unique<TaskState>();
        s = owned.get();
        s->rt = rt_;
        std::lock_guard<std::mutex> g(mutex_);
        all_.push_back(std::move(owned));
    }
    s->reset();
    s->refs.store(1, std::memory_order_relaxed);
    return s;
}

void TaskStatePool::give(TaskState* t) noexcept {
    t->fn = nullptr;  // what a continuation captured goes now
    t->error = nullptr;
    TaskState* head = returned_.load(std::memory_order_relaxed);
    do {
        t->next = head;
    } while (!returned_.compare_exchange_weak(head, t, std::memory_order_release,
                                              std::memory_order_relaxed));
}

std::size_t TaskStatePool::made() const {
    std::lock_guard<std::mutex> g(mutex_);
    return all_.size();
}

}  // namespace device::detail

DeviceTask::DeviceTask(TaskState* s) noexcept : s_(s) {}
DeviceTask::DeviceTask(const DeviceTask& o) noexcept : s_(o.s_) {
    if (s_) s_->refs.fetch_add(1, std::memory_order_relaxed);
}
DeviceTask::~DeviceTask() {
    if (s_) device::detail::drop(s_);
}

bool DeviceTask::ready() const noexcept {
    return s_ && s_->status.load(std::memory_order_acquire) != TaskState::pending;
}

void DeviceTask::wait() const {
    if (!s_) throw UsageError("DeviceTask::wait() on an empty task");
    // Counted even when ready: a handler that waits here may find it pending next time, so it
    // is not one to run on the communication thread (core/detail/waits.hpp).
    ++cascade::detail::tls_waits;
    if (!s_->submitted)
        throw UsageError("DeviceTask::wait(): task '" + s_->name +
                         "' was prepared but never submitted");
    Threadpool& tp = s_->rt->tp;
    if (tp.current_thread() >= 0) {
        int idle = 0;
        while (!ready()) {
            if (tp.run_one_task()) {
                idle = 0;
            } else if (++idle < 64) {
                cpu_relax();
            } else {
                std::this_thread::yield();
            }
        }
        return;
    }
    Runtime* rt = s_->rt;
    // A kernel on a device with native events (OpenCL): block on its event at once, as a plain
    // OpenCL program would, and complete the task here (no hand-off to the runtime thread).
    if (s_->kind == TaskKind::kernel && rt->polled_events && rt->opts.wait_on_events && !ready())
        rt->wait_native(s_);
    // Otherwise a thread outside the pool has nothing else to do: it stays awake for up to
    // 100 us, since device tasks often finish within microseconds, then sleeps.
    for (int i = 0; i < 200 && !ready(); ++i)
        cpu_relax();
    if (!ready()) {
        // Help the runtime meanwhile (launch, poll, complete), yielding when nothing moved.
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
        while (!ready() && std::chrono::steady_clock::now() < until)
            if (!rt->help()) std::this_thread::yield();
    }
    for (int v = s_->status.load(std::memory_order_acquire); v == TaskState::pending;
         v = s_->status.load(std::memory_order_acquire))
        s_->status.wait(v, std::memory_order_acquire);
}

void DeviceTask::get() const {
    wait();
    if (s_->status.load(std::memory_order_acquire) == TaskState::failed)
        std::rethrow_exception(s_->error);
}

bool DeviceTask::failed() const noexcept {
    return s_ && s_->status.load(std::memory_order_acquire) == TaskState::failed;
}
std::exception_ptr DeviceTask::error() const noexcept {
    return failed() ? s_->error : nullptr;
}
const std::string& DeviceTask::name() const noexcept {
    return s_->name;
}
int DeviceTask::device() const noexcept {
    return s_ ? s_->device : -1;
}
double DeviceTask::seconds() const noexcept {
    return s_ && ready() ? s_->ran_s : 0.0;
}
Threadpool& DeviceTask::pool() const noexcept {
    return s_->rt->tp;
}

DeviceTask& DeviceTask::after(const DeviceTask& u) {
    if (!s_ || !u.s_) throw UsageError("DeviceTask::after() with an empty task");
    if (s_->submitted)
        throw UsageError("DeviceTask::after(): task '" + s_->name +
                         "' is already submitted; make it with Devices::prepare, call after(), "
                         "then submit()");
    if (s_->rt != u.s_->rt)
        throw UsageError("DeviceTask::after(): tasks '" + s_->name + "' and '" + u.s_->name +
                         "' belong to different Devices");
    if (u.s_ == s_) throw UsageError("DeviceTask::after(): task '" + s_->name + "' after itself");
    if (!u.s_->submitted)
        throw UsageError("DeviceTask::after(): task '" + u.s_->name +
                         "' is not submitted yet (submit it first)");
    device::detail::add_successor(u.s_, s_, true);
    return *this;
}

DeviceTask& DeviceTask::submit() {
    if (!s_) throw UsageError("DeviceTask::submit() on an empty task");
    if (s_->submitted) throw UsageError("task '" + s_->name + "' submitted twice");
    s_->submitted = true;
    Runtime* rt = s_->rt;
    rt->tp.hold_external_work();  // join() waits for it (released in complete())
    rt->outstanding.fetch_add(1, std::memory_order_relaxed);
    rt->tasks_total.fetch_add(1, std::memory_order_relaxed);
    s_->refs.fetch_add(1, std::memory_order_relaxed);  // the runtime's, until complete()
    if (s_->deps.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        rt->make_ready(s_);
        // A thread outside the pool launches it now if the runtime is not busy.
        if (s_->kind == TaskKind::kernel && rt->tp.current_thread() < 0) rt->help();
    }
    return *this;
}

namespace {
DeviceTask host_task(Runtime* rt, TaskKind kind, std::string name, std::function<void()> f) {
    TaskState* s = rt->acquire();
    s->kind = kind;
    s->name = std::move(name);
    s->fn = std::move(f);
    return DeviceTask(s);
}
}  // namespace

DeviceTask DeviceTask::then(std::function<void()> f) const {
    if (!s_) throw UsageError("DeviceTask::then() on an empty task");
    DeviceTask c = host_task(s_->rt, TaskKind::host_fn, s_->name + ".then", std::move(f));
    c.after(*this);
    c.submit();
    return c;
}

DeviceTask DeviceTask::on_done(std::function<void(std::exception_ptr)> f) const {
    if (!s_) throw UsageError("DeviceTask::on_done() on an empty task");
    if (!s_->submitted)
        throw UsageError("DeviceTask::on_done(): task '" + s_->name + "' is not submitted yet");
    DeviceTask self = *this;
    DeviceTask c = host_task(s_->rt, TaskKind::host_fn, s_->name + ".on_done",
                             [self, f = std::move(f)] { f(self.error()); });
    device::detail::add_successor(s_, c.s_, false);  // runs whether this task failed or not
    c.submit();
    return c;
}

DeviceTask when_all(std::span<const DeviceTask> tasks) {
    if (tasks.empty() || !tasks[0].valid()) throw UsageError("when_all() needs at least one task");
    DeviceTask c = host_task(tasks[0].state()->rt, TaskKind::join, "when_all", nullptr);
    for (const DeviceTask& t : tasks)
        c.after(t);
    c.submit();
    return c;
}
DeviceTask when_all(std::initializer_list<DeviceTask> tasks) {
    return when_all(std::span<const DeviceTask>(tasks.begin(), tasks.size()));
}

}  // namespace cascade
