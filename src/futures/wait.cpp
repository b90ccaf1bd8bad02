// How a thread waits for a future, and how the futures layer queues its jobs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "cascade/comm/communicator.hpp"
#include "cascade/core/detail/waits.hpp"
#include "cascade/core/log.hpp"
#include "cascade/core/notifier.hpp"
#include "cascade/core/settings.hpp"
#include "cascade/core/spinlock.hpp"
#include "cascade/core/threadpool.hpp"
#include "cascade/futures/async.hpp"
#include "cascade/futures/detail/state.hpp"

namespace cascade::detail {

namespace {

// The name is copied when the task is queued: a trace names its tasks after they ran, when
// the job may be gone.
struct JobTask {
    Job* job;
    const char* name;
    static void run(Task& t) { t.as<JobTask>().job->run_job(); }
    static std::string describe(const Task& t) { return t.as<JobTask>().name; }
    static void discard(Task& t) { t.as<JobTask>().job->discard_job(); }
    static constexpr TaskVTable vtable{&run, &describe, &discard};
};

// A wait that lasts very long is reported once (a future nobody will set, a pool that was
// joined, a rank that does not serve calls) instead of hanging silently. CASCADE_FUTURE_WARN_S
// sets the limit (default 30 s, 0: never).
class LongWait {
  public:
    void check() {
        if (warned_) return;
        static const double limit_s =
            settings::seconds("CASCADE_FUTURE_WARN_S", 30.0, settings::kMaxSeconds);
        if (limit_s <= 0 ||
            std::chrono::steady_clock::now() - start_ < std::chrono::duration<double>(limit_s))
            return;
        warned_ = true;
        char msg[256];
        std::snprintf(msg, sizeof msg,
                      "a future has not been set after %g s of waiting (unset promise? pool "
                      "already joined? target rank not serving calls, i.e. not in join() or "
                      "get()?)",
                      limit_s);
        log::warn(msg);
    }

  private:
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
    bool warned_ = false;
};

// Sleeps on the state's word for at most timeout_us (or until it is set).
void nap_on(StateBase& s, long timeout_us, LongWait& lw) {
    lw.check();
    s.waiters().store(true, std::memory_order_seq_cst);
    if (!s.ready()) Notifier::wait_on(s.word(), StateBase::pending, timeout_us);
}

// A worker keeps running ready tasks (its own first, then stolen): the value it waits for
// is usually produced by one of them, and no worker is lost to waiting. With nothing to run
// it backs off; it never blocks for long, since new tasks do not wake it.
// A joining worker 0 (ThreadpoolOptions::joiner_works) is the thread that drives MPI: it
// moves messages itself.
void worker_wait(StateBase& s, Threadpool& tp, Communicator* comm) {
    LongWait lw;
    unsigned idle = 0;
    long nap_us = 10;
    const bool drives = comm && comm->on_comm_thread();
    while (!s.ready()) {
        if (tp.run_one_task() || (drives && comm->progress())) {
            idle = 0;
            nap_us = 10;
            continue;
        }
        ++idle;
        if (idle < 64) {
            cpu_relax();
            continue;
        }
        // The value may come in a message: keep the thread that drives MPI polling.
        if (!drives) tp.wake_joiner();
        if (idle < 96) {
            std::this_thread::yield();
            continue;
        }
        nap_on(s, nap_us, lw);
        nap_us = std::min(nap_us * 2, 500L);
    }
}

// The thread that drives MPI moves messages itself. While its own pool is idle it polls
// (hot, then yielding: a reply usually follows within a thread hand-off or two on the other
// rank); while its workers compute it only looks in between short naps, leaving them the
// cores. With one rank there is nothing to poll: it sleeps until the value is set.
void comm_wait(StateBase& s, Communicator& comm, Threadpool& tp) {
    LongWait lw;
    using clock = std::chrono::steady_clock;
    if (comm.ranks() == 1) {
        while (!s.ready()) {
            comm.progress();
            if (!tp.work_as_joiner(1)) nap_on(s, 1000, lw);
        }
        return;
    }
    auto last = clock::now();
    auto moved = last;  // a message moved or a task ran (for the watchdog)
    std::uint64_t runs = tp.stats().tasks_run;
    long nap_us = 5;
    while (!s.ready()) {
        if (comm.progress() || tp.work_as_joiner(1)) {
            last = moved = clock::now();
            nap_us = 5;
            continue;
        }
        if (const std::uint64_t r = tp.stats().tasks_run; r != runs) {
            runs = r;
            moved = clock::now();
        }
        cascade::detail::LayerLink::check_stall(
            comm, "a future's get() on the communication thread", moved);
        if (tp.idle()) {
            const auto quiet = clock::now() - last;
            if (quiet < std::chrono::microseconds(20)) continue;
            if (quiet < std::chrono::microseconds(1000)) {
                std::this_thread::yield();
                continue;
            }
        }
        nap_on(s, nap_us, lw);
        nap_us = std::min(nap_us * 2, 100L);
    }
}

}  // namespace

std::uint64_t waits_on_this_thread() noexcept {
    return tls_waits;
}

void wait_ready(StateBase& s) {
    if (s.poll_ready()) return;
    ++tls_waits;
    Futures* fx = Futures::current();
    Communicator* comm = fx ? fx->comm() : nullptr;
    if (fx && fx->pool().current_thread() >= 0) return worker_wait(s, fx->pool(), comm);
    if (comm && comm->on_comm_thread()) return comm_wait(s, *comm, fx->pool());
    LongWait lw;
    while (!s.ready())
        if (!fx || !fx->pool().work_as_joiner(1))
            nap_on(s, fx && fx->pool().joiner_works() ? 1000 : 100000, lw);
}

void schedule(Job* job) {
    Futures* fx = Futures::current();
    if (!fx) {
        job->run_job();
        return;
    }
    Task t;
    t.vt = &JobTask::vtable;
    t.emplace<JobTask>(JobTask{job, job->job_name()});
    Threadpool& tp = fx->pool();
    tp.push(t, tp.pick_thread(), false);
}

void schedule_call(Job* job, const CallStats& stats) {
    Futures* fx = Futures::current();
    if (fx && stats.trusted() && fx->defer_to_comm_thread(job)) return;
    schedule(job);
}

}  // namespace cascade::detail
