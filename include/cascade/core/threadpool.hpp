// Threadpool: a fixed set of worker threads, each with its own ReadyQueue. Idle workers
// steal stealable tasks from others, then back off (spin, yield, then sleep in the kernel).
// join() returns once every worker is idle and no task is queued, then rethrows the first
// exception a task raised and, in checked mode, reports tasks left waiting for promises.
// The workers live from start() (or the first join()) until the pool is destroyed.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "cascade/core/notifier.hpp"
#include "cascade/core/ready_queue.hpp"
#include "cascade/core/task.hpp"

namespace cascade {

namespace detail {
// What the pool needs to know about each Taskflow attached to it (for join diagnostics).
class TaskflowBase {
  public:
    virtual ~TaskflowBase() = default;
    // Number of tasks with at least one but not all promises fulfilled; fills `names`
    // with up to `max_names` of them.
    virtual std::size_t pending(std::size_t max_names, std::vector<std::string>& names) const = 0;
};
}  // namespace detail

class Threadpool;
class Communicator;
namespace trace {
class Buffer;
}

// What a JoinHook poll found: nothing moved (idle), something moved (active), this pool has
// no work and waits for others (waiting: the joiner naps only briefly, it disturbs no
// worker), or join() may return (done).
enum class PollResult { idle, active, waiting, done };

// Hook that lets a higher layer (the communicator) take part in join(): the joining thread
// polls it, and it decides, from the pool's local idleness and its own state, when join()
// may return. It is also how that thread drives MPI progress.
class JoinHook {
  public:
    virtual ~JoinHook() = default;
    virtual PollResult poll(Threadpool& tp) = 0;
    // Re-checked after the joiner announced it will sleep: true if it must not (work queued
    // for the communication thread since the last poll).
    virtual bool wants_progress() const = 0;
    // The pool is being destroyed: forget it.
    virtual void detach(Threadpool& tp) noexcept = 0;
    // For diagnostics (watchdog, errors): this process's rank (-1: none), and what it waits
    // for (messages in flight, completion-protocol state).
    virtual int rank() const noexcept { return -1; }
    virtual std::string describe_state() const { return {}; }
    // Ends the whole job (the watchdog fired): prints `what` and exits non-zero.
    [[noreturn]] virtual void abort_job(const std::string& what);
    // Without a hook (or by default): print and _Exit(3).
    [[noreturn]] static void abort_job_default(const std::string& what);
};

struct ThreadpoolOptions {
    int verb = 0;
    std::string name = "tp";
    bool start = true;
    int checked = -1;  // -1: from CASCADE_CHECK (or the build default); 0/1: forced
};

class Threadpool {
  public:
    explicit Threadpool(int n_threads, ThreadpoolOptions opts = {});
    // A pool whose join() also waits for distributed completion over `comm` (TaskTorrent's
    // signature). Defined in the comm layer.
    Threadpool(int n_threads, Communicator* comm, int verb = 0, std::string name = "",
               bool start = true);
    Threadpool(const Threadpool&) = delete;
    Threadpool& operator=(const Threadpool&) = delete;
    ~Threadpool();

    // Starts the workers (if not started by the constructor). Tasks may be inserted before.
    // After a join() the workers are still there; start() then only marks the pool as having
    // work for the destructor to join (as the constructor's start does).
    void start();
    // Waits until all work is done and reports errors (see top). The workers stay, asleep
    // once idle: tasks queued after join() run at once, and a later join() waits for them.
    void join();

    int size() const noexcept { return n_; }
    const std::string& name() const noexcept { return opts_.name; }
    int verbosity() const noexcept { return opts_.verb; }
    bool checked() const noexcept { return checked_; }
    void set_checked(bool on) noexcept { checked_ = on; }

    // Index of the calling thread in this pool, or -1 for a thread outside it.
    int current_thread() const noexcept;

    // Queues a ready task on worker `thread` (bound: only that worker may run it). From a
    // thread outside the pool, stealable tasks of priority 0 go through the worker's inbox
    // (no lock).
    void push(const Task& t, int thread, bool bound);
    // Bulk insertion: push() without waking sleeping workers; call wake_workers() once after
    // the last one.
    void push_quiet(const Task& t, int thread, bool bound);
    void wake_workers() noexcept;

    // Queues a callable as a task. thread < 0: the calling worker, or round-robin.
    template <class F>
    void insert(F&& f, int thread = -1, double priority = 0, bool bound = false);

    // A worker for work without a mapping: the calling worker if any, else round-robin.
    int pick_thread() noexcept;

    // Runs one ready task (the caller's own queue first, then stolen) on the calling worker,
    // e.g. while it waits for a future. Returns false if the caller is not a worker of this
    // pool or no task was found.
    bool run_one_task();

    // Statistics (read after join()).
    std::uint64_t tasks_run(int thread) const noexcept {
        return stats_[thread].run.load(std::memory_order_relaxed);
    }
    std::uint64_t tasks_stolen(int thread) const noexcept { return stats_[thread].stolen; }
    std::uint64_t tasks_run() const noexcept;
    std::uint64_t tasks_stolen() const noexcept;

    // For Taskflow and the communicator.
    void attach(detail::TaskflowBase* tf);
    void detach(detail::TaskflowBase* tf);
    void set_join_hook(JoinHook* hook) noexcept { hook_ = hook; }
    // Records an error to be rethrown by join(); further queued tasks are discarded.
    void fail(std::exception_ptr e) noexcept;
    bool failed() const noexcept { return failed_.load(std::memory_order_relaxed); }
    std::exception_ptr error() const;
    // True when every worker is idle and no task is queued (nothing runs in this pool).
    bool idle() const noexcept { return locally_idle(); }
    // Wakes the thread blocked in join() so it re-polls the hook (e.g. a message to send).
    void wake_joiner() noexcept {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (joiner_sleeping_.load(std::memory_order_relaxed)) Notifier::wake_all(join_word_);
    }

  private:
    struct alignas(64) WorkerStats {
        std::atomic<std::uint64_t> run{0};  // read by the joiner's watchdog while running
        std::uint64_t stolen = 0;
    };

    bool enqueue(const Task& t, int thread, bool bound);  // true: a wake-up may be needed
    void wake_for(int thread, bool bound) noexcept;
    void stop_workers() noexcept;
    void worker_loop(int me);
    void become_idle() noexcept;
    void become_active() noexcept;
    bool find_task(int me, Task& out);
    bool has_work_for(int me) const noexcept;
    bool locally_idle() const noexcept;
    void execute(Task& t, int me);
    void run_guarded(Task& t, int me);
    [[noreturn]] void watchdog_fire(double quiet_seconds, double limit_seconds);
    void watchdog_report(double quiet_seconds, double limit_seconds);
    std::string rank_prefix() const;

    int n_;
    ThreadpoolOptions opts_;
    bool checked_;
    std::unique_ptr<ReadyQueue[]> queues_;
    std::unique_ptr<WorkerStats[]> stats_;
    Notifier notifier_;
    std::vector<std::thread> threads_;
    std::atomic<bool> stop_{false};
    std::atomic<bool> running_{false};
    bool armed_ = false;  // start() called since the last join(): the destructor joins
    std::atomic<std::uint32_t> join_word_{0};
    std::atomic<bool> joiner_sleeping_{false};
    alignas(64) std::atomic<std::uint64_t> idle_state_{0};
    std::atomic<unsigned> round_robin_{0};
    JoinHook* hook_ = nullptr;
    // Trace buffers, one per worker; null when not recording (see cascade/trace/).
    std::unique_ptr<trace::Buffer*[]> trace_;

    std::atomic<bool> failed_{false};
    mutable std::mutex error_mutex_;
    std::exception_ptr error_;

    mutable std::mutex taskflows_mutex_;
    std::vector<detail::TaskflowBase*> taskflows_;
};

// ---- closures as tasks ------------------------------------------------------------------

namespace detail {

template <class F>
struct InlineClosure {
    F f;
    static void run(Task& t) { t.as<InlineClosure>().f(); }
    static std::string describe(const Task&) { return "closure"; }
    static constexpr TaskVTable vtable{&run, &describe, nullptr};
};

template <class F>
struct BoxedClosure {
    F* f;
    static void run(Task& t) {
        std::unique_ptr<F> owned(t.as<BoxedClosure>().f);
        (*owned)();
    }
    static std::string describe(const Task&) { return "closure"; }
    static void discard(Task& t) { delete t.as<BoxedClosure>().f; }
    static constexpr TaskVTable vtable{&run, &describe, &discard};
};

}  // namespace detail

template <class F>
void Threadpool::insert(F&& f, int thread, double priority, bool bound) {
    using Fn = std::decay_t<F>;
    Task t;
    t.priority = priority;
    if constexpr (std::is_trivially_copyable_v<Fn> &&
                  Task::fits_inline<detail::InlineClosure<Fn>>) {
        t.vt = &detail::InlineClosure<Fn>::vtable;
        t.emplace<detail::InlineClosure<Fn>>(detail::InlineClosure<Fn>{std::forward<F>(f)});
    } else {
        t.vt = &detail::BoxedClosure<Fn>::vtable;
        t.emplace<detail::BoxedClosure<Fn>>(detail::BoxedClosure<Fn>{new Fn(std::forward<F>(f))});
    }
    try {
        push(t, thread < 0 ? pick_thread() : thread, bound);
    } catch (...) {
        t.discard();
        throw;
    }
}

}  // namespace cascade
