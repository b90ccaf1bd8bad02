// Threadpool: a fixed set of worker threads, each with its own ReadyQueue. Idle workers
// steal stealable tasks from others, then back off (spin, yield, then sleep in the kernel).
// join() returns once every worker is idle and no task is queued, then rethrows the first
// exception a task raised and, in checked mode, reports tasks left waiting for promises.
// The workers live from start() (or the first join()) until the pool is destroyed.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "cascade/core/detail/closure.hpp"
#include "cascade/core/detail/first_error.hpp"
#include "cascade/core/detail/taskflow_base.hpp"
#include "cascade/core/detail/worker_context.hpp"
#include "cascade/core/idle_hook.hpp"
#include "cascade/core/join_hook.hpp"
#include "cascade/core/notifier.hpp"
#include "cascade/core/observer.hpp"
#include "cascade/core/ready_queue.hpp"
#include "cascade/core/task.hpp"

namespace cascade {

namespace detail {
class HeldAfterFailure;  // detail/watchdog.hpp
}

/// Settings of a Threadpool.
struct ThreadpoolOptions {
    int verb = 0;             ///< > 0: warnings (e.g. tasks left waiting) go to stderr
    std::string name = "tp";  ///< named in diagnostics and trace tracks
    bool start = true;        ///< start the workers in the constructor
    /// Checked mode (docs/taskgraphs.md); unset: from CASCADE_CHECK (or the build default).
    std::optional<bool> checked = std::nullopt;
    /// Worker i runs only on the i-th CPU (modulo) of the CPUs the constructing thread may
    /// use (its affinity mask). Unset: from CASCADE_PIN_WORKERS (default off).
    std::optional<bool> pin_workers = std::nullopt;
    /// The thread in join() is worker 0 while it waits there (and while it waits in a
    /// future's get() outside the pool): the pool starts n - 1 threads, so a pool of 1 adds
    /// no thread beside the caller, as a one-thread-per-rank MPI code has, and with a
    /// communicator the thread that drives MPI runs the tasks too (no hand-off between two
    /// threads per message). Worker 0's tasks run only then; the other workers may steal
    /// them.
    bool joiner_works = false;
};

/// Counters of a Threadpool (Threadpool::stats()): the whole pool's, or one worker's.
struct ThreadpoolStats {
    std::uint64_t tasks_run = 0;     ///< Tasks run (read after join()).
    std::uint64_t tasks_stolen = 0;  ///< Of which stolen from another worker (after join()).
    /// Bytes the workers' inboxes keep for reuse: the emptied segments of the tasks that
    /// threads outside the pool queued, so that seeding a graph again maps no new memory.
    /// Per worker and queueing thread, an inbox keeps as many as the largest backlog queued
    /// before start() (up to 32 MiB), and otherwise 20 segments of 32 KiB (the backlog at
    /// which a seeding thread waits, plus the one it waits down to). A snapshot.
    std::size_t kept_inbox_bytes = 0;
    /// Times a thread outside the pool waited for the workers to take the tasks it queued
    /// (see Threadpool::push()); whole pool only. A snapshot.
    std::uint64_t seeding_waits = 0;
    /// Of seeding_waits, those the thread ended because for 10 ms the workers took none of
    /// its tasks and finished none (blocked, or waiting for that thread); whole pool only.
    std::uint64_t seeding_waits_abandoned = 0;
};

/// A fixed set of worker threads that run Tasks (see the top of this file).
///
/// ```cpp
/// cascade::Threadpool tp(4);                        // 4 workers, started now
/// std::atomic<int> n{0};
/// for (int i = 0; i < 100; ++i) tp.insert([&] { ++n; });
/// tp.join();                                        // n == 100
/// ```
class Threadpool {
  public:
    /// A pool of `n_threads` workers (>= 1).
    explicit Threadpool(int n_threads, ThreadpoolOptions opts = {});
    /// A pool whose join() also lets `hook` take part (TaskTorrent's signature: with a
    /// Communicator, `Threadpool tp(n, &comm)`, join() waits for distributed completion and
    /// drives MPI).
    Threadpool(int n_threads, JoinHook* hook, int verb = 0, std::string name = "",
               bool start = true);
    /// Where the workers run, in words: "2 workers pinned to CPUs 0,1" or "2 workers, not
    /// pinned, on CPUs 0-1" (the start-up banner at CASCADE_LOG=info prints it).
    std::string placement() const;
    /// A pool whose join() lets `hook` take part, with every option:
    /// `Threadpool tp(2, &comm, {.name = "solver", .pin_workers = true})`.
    Threadpool(int n_threads, JoinHook* hook, ThreadpoolOptions opts);
    Threadpool(const Threadpool&) = delete;
    Threadpool& operator=(const Threadpool&) = delete;
    ~Threadpool();

    /// Starts the workers (if not started by the constructor). Tasks may be inserted before.
    /// After a join() the workers are still there; start() then only marks the pool as having
    /// work for the destructor to join (as the constructor's start does).
    void start();
    /// Waits until all work is done (with a JoinHook: on every rank) and reports errors: it
    /// rethrows the first task error as TaskError and, in checked mode, throws
    /// IncompleteGraphError for tasks left waiting for promises. The workers stay, asleep
    /// once idle: tasks queued after join() run at once, and a later join() waits for them.
    void join();

    /// Number of workers (with ThreadpoolOptions::joiner_works, the thread in join() is one).
    int workers() const noexcept { return n_; }
    /// With ThreadpoolOptions::joiner_works, from a thread outside the pool (the one that
    /// joins or waits): runs up to `max_tasks` of worker 0's tasks (its own queue, then
    /// stolen) as worker 0; whether it ran any. Without that option: false at once.
    bool work_as_joiner(int max_tasks);
    /// Whether the thread in join() is worker 0 (ThreadpoolOptions::joiner_works).
    bool joiner_works() const noexcept { return opts_.joiner_works; }
    /// The name given in the options (diagnostics, trace tracks).
    const std::string& name() const noexcept { return opts_.name; }
    /// The verbosity given in the options (ThreadpoolOptions::verb).
    int verbosity() const noexcept { return opts_.verb; }
    /// Checked mode: taskflows created on this pool count every promise.
    bool checked() const noexcept { return checked_; }
    /// Turns checked mode on or off for taskflows created afterwards (not synchronized: set
    /// it before creating them).
    void set_checked(bool on) noexcept { checked_ = on; }

    /// Index of the calling thread in this pool, or -1 for a thread outside it.
    int current_thread() const noexcept {
        return detail::tls_worker.pool == this ? detail::tls_worker.index : -1;
    }

    /// Queues a ready task on worker `thread` (bound: only that worker may run it). The
    /// low-level entry of task producers (Taskflow, futures); throws UsageError for a
    /// thread outside [0, size()). From a thread outside the pool, stealable tasks of
    /// priority 0 go through the worker's inbox (no lock). Such a thread that has queued
    /// 8192 tasks the worker has not taken yet waits (once the pool is started) until 2048
    /// are left, so that seeding faster than the workers run keeps memory bounded; it stops
    /// waiting when for 10 ms the workers neither take one of its tasks nor finish any
    /// task (then waits again only at twice that backlog). Worker threads and message
    /// handlers never wait.
    void push(const Task& t, int thread, bool bound);
    /// Bulk insertion: push() without waking sleeping workers; call wake_workers() once after
    /// the last one.
    void push_quiet(const Task& t, int thread, bool bound);
    /// Wakes sleeping workers so they look for the tasks queued by push_quiet(). Any thread.
    void wake_workers() noexcept;

    /// Queues a callable as a task. thread < 0: the calling worker, or round-robin; higher
    /// priority runs first among a worker's ready tasks.
    template <class F>
    void insert(F&& f, int thread = -1, double priority = 0, bool bound = false);

    /// A worker for work without a mapping: the calling worker if any, else round-robin.
    int pick_thread() noexcept;

    /// Runs one ready task (the caller's own queue first, then stolen) on the calling worker,
    /// e.g. while it waits for a future. Returns false if the caller is not a worker of this
    /// pool or no task was found.
    bool run_one_task();

    /// The pool's counters (see ThreadpoolStats). Any thread; counts of tasks are exact
    /// after join(). Allocates nothing.
    ThreadpoolStats stats() const noexcept;
    /// Worker `worker`'s counters: tasks_run, tasks_stolen and its inbox's kept bytes (the
    /// seeding counters are the pool's, in stats()).
    ThreadpoolStats stats(int worker) const noexcept;
    /// Bytes of the inbox segments that destroyed pools left to the process-wide cache new
    /// pools draw from (up to 32 MiB). Any thread; a snapshot.
    static std::size_t cached_inbox_bytes() noexcept;

    /// Whether a task (or, with a communicator, a handler) failed since the last join().
    bool failed() const noexcept { return error_.failed(); }
    /// The error join() will rethrow, or null.
    std::exception_ptr error() const;
    /// True when every worker is idle and no task is queued (nothing runs in this pool).
    bool idle() const noexcept { return locally_idle(); }
    /// Work of this pool that runs outside its workers (a device task in flight): while any
    /// is held the pool is not idle, so join() waits for it. Any thread. Hold before the
    /// work can finish; release once what its end queues on this pool was queued (the last
    /// release wakes the thread in join()).
    void hold_external_work() noexcept { external_.fetch_add(1, std::memory_order_seq_cst); }
    /// Ends one hold_external_work().
    void release_external_work() noexcept {
        if (external_.fetch_sub(1, std::memory_order_seq_cst) == 1) wake_joiner();
    }
    /// Work of this pool run on the calling thread outside its workers (a device runtime's
    /// callback): holds the pool's epoch open (hold_external_work) for the scope's life, and
    /// lets this thread send active messages while join() runs, as a task may (they are
    /// counted before the hold ends).
    class ExternalScope {
      public:
        /// Holds `tp`'s epoch open and marks the calling thread as running its work.
        explicit ExternalScope(Threadpool& tp) noexcept
            : tp_(tp), prev_(std::exchange(detail::tls_external_scope, &tp)) {
            tp_.hold_external_work();
        }
        /// Ends the hold (the last one wakes the thread in join()) and the mark.
        ~ExternalScope() {
            detail::tls_external_scope = prev_;
            tp_.release_external_work();
        }
        /// Not copyable: one hold per scope.
        ExternalScope(const ExternalScope&) = delete;
        /// Not copyable.
        ExternalScope& operator=(const ExternalScope&) = delete;

      private:
        Threadpool& tp_;
        const Threadpool* prev_;
    };
    /// Whether the calling thread is inside an ExternalScope of this pool.
    bool in_external_scope() const noexcept { return detail::tls_external_scope == this; }
    /// Calls `hook` when a worker finds nothing to do (null: nobody); see idle_hook.hpp.
    /// Setting null returns once no worker is inside the previous hook.
    void set_idle_hook(IdleHook* hook) noexcept;
    /// Wakes the thread blocked in join() so it re-polls its hook (e.g. a message to send,
    /// or a value a future waits for).
    void wake_joiner() noexcept {
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (joiner_.sleeping.load(std::memory_order_relaxed)) Notifier::wake_all(joiner_.word);
    }

  private:
    std::uint64_t tasks_run() const noexcept;  // by all workers, for the watchdogs
    static ThreadpoolOptions without_start(ThreadpoolOptions o) {
        o.start = false;  // started once the hook is attached
        return o;
    }
    // Taskflows register themselves (join diagnostics); a JoinHook records errors of its own
    // (a failed handler) and unhooks itself (JoinHook's protected helpers).
    template <class K>
    friend class Taskflow;
    friend class JoinHook;
    void attach(detail::TaskflowBase* tf);
    void detach(detail::TaskflowBase* tf);
    // Records an error to be rethrown by join(); further queued tasks are discarded.
    void fail(std::exception_ptr e) noexcept;

    struct alignas(64) WorkerStats {
        std::atomic<std::uint64_t> run{0};  // read by the joiner's watchdog while running
        std::uint64_t stolen = 0;
        // The worker owes the idle hook a call (it ran a task since its last call, or a hook
        // was installed): counted in idle_.dues, which keeps the pool from being idle.
        std::atomic<bool> hook_due{false};
    };

    bool enqueue(const Task& t, int thread, bool bound);  // true: a wake-up may be needed
    void wait_for_inbox(int thread, int lane);            // the backlog of lane is high
    // Sleeps as the joiner (wake_joiner() wakes it) for up to timeout_us, unless the hook
    // (or, without one, the idle pool) wants the caller awake; `word`: joiner_.word read before
    // the caller's last check.
    void nap_as_joiner(std::uint32_t word, long timeout_us);
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
    // `limit_name`: what set the limit (null: CASCADE_WATCHDOG).
    void watchdog_report(double quiet_seconds, double limit_seconds,
                         const char* limit_name = nullptr);
    void check_held_after_failure(detail::HeldAfterFailure& held, bool may_end, bool moved);
    std::string rank_prefix() const;

    int n_;
    ThreadpoolOptions opts_;
    bool checked_;
    std::unique_ptr<ReadyQueue[]> queues_;
    std::unique_ptr<WorkerStats[]> stats_;
    Notifier notifier_;
    std::vector<pthread_t> threads_;  // pthreads: a bigger stack than std::thread gives
    struct WorkerStart {
        Threadpool* pool;
        int index;
    };
    static void* worker_main(void* arg);
    std::atomic<bool> stop_{false};
    std::atomic<bool> running_{false};
    bool armed_ = false;  // start() called since the last join(): the destructor joins
    // The thread in join(): the word it naps on and whether it naps (wake_joiner()).
    struct Joiner {
        std::atomic<std::uint32_t> word{0};
        std::atomic<bool> sleeping{false};
    } joiner_;
    alignas(64) std::atomic<std::uint64_t> idle_state_{0};
    std::atomic<unsigned> round_robin_{0};
    struct SeedingCounters {  // ThreadpoolStats::seeding_waits and seeding_waits_abandoned
        std::atomic<std::uint64_t> waits{0}, abandoned{0};
    } seeding_;
    JoinHook* hook_ = nullptr;
    // The idle hook (read only by idle workers), the calls inside it now (set_idle_hook
    // waits for them), and the workers that owe it a call: a worker idle with a call owed
    // could wake and send after its rank reported itself idle to the completion protocol, so
    // the pool is not idle until every owed call was made (locally_idle()).
    struct IdleHookSlot {
        std::atomic<IdleHook*> hook{nullptr};
        std::atomic<int> calls{0};
        std::atomic<int> dues{0};
    } idle_;
    // Holds of work running outside the workers (hold_external_work): the pool is not idle
    // while any is held.
    std::atomic<long> external_{0};
    long call_idle_hook(int me) noexcept;
    void owe_hook_call(int w) noexcept;
    void paid_hook_call(int w) noexcept;
    // The observer (see observer.hpp) when the pool was created, and its handle of each
    // worker; null when none (the only cost of observation when it is off).
    struct Observed {
        Observer* observer = nullptr;
        std::unique_ptr<void*[]> worker;
    } obs_;
    // CPUs the workers are pinned to (empty: not pinned); worker i gets cpus[(first + i) %
    // size] (pin_offset).
    struct Pinning {
        std::vector<int> cpus;
        int first = 0;
    } pin_;
    detail::FirstError error_;        // the error join() rethrows
    detail::TaskflowList taskflows_;  // join diagnostics
};

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
