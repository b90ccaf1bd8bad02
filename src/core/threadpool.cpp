#include "cascade/core/threadpool.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <system_error>
#include <thread>

#include "cascade/core/detail/inbox.hpp"
#include "cascade/core/detail/task_epilogue.hpp"
#include "cascade/core/detail/watchdog.hpp"
#include "cascade/core/detail/worker_context.hpp"
#include "cascade/core/errors.hpp"
#include "cascade/core/log.hpp"
#include "cascade/core/settings.hpp"
#include "cascade/core/workers.hpp"

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace cascade {

namespace {

using detail::tls_worker;

// Workers get a stack of this size (address space; pages are used only as the stack grows):
// a task waiting in a future's get() runs other tasks meanwhile, nested on its stack.
constexpr std::size_t kWorkerStack = std::size_t(64) << 20;
// Below this much stack left, a waiting task no longer runs others (it just waits).
constexpr std::size_t kNestReserve = std::size_t(1) << 20;

const char* stack_low_of_this_thread() noexcept {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return nullptr;
    void* addr = nullptr;
    std::size_t size = 0;
    const bool ok = pthread_attr_getstack(&attr, &addr, &size) == 0;
    pthread_attr_destroy(&attr);
    return ok ? static_cast<const char*>(addr) : nullptr;
}

bool checked_from_env() {
#ifdef CASCADE_CHECKED_DEFAULT
    constexpr bool dflt = true;
#else
    constexpr bool dflt = false;
#endif
    return settings::flag("CASCADE_CHECK", dflt);
}

// Idle back-off: spin for kIdleSpin (a new task often arrives within microseconds), then
// yield until kIdleYield (cheap when the core is free; when it is not, the thread that needs
// it runs at once, e.g. this rank's communication thread about to send the message a task
// just queued), then sleep in the kernel. Spinning longer without yielding starves that
// thread when ranks x threads exceed the cores: a reply waited ~50 us for a core. The sleep
// has a timeout only as a safety net; wake-ups come from Notifier.
constexpr auto kIdleSpin = std::chrono::microseconds(2);
constexpr auto kIdleYield = std::chrono::microseconds(100);
constexpr long kSleepTimeoutUs = 1000000;
}  // namespace

Threadpool::Threadpool(int n_threads, ThreadpoolOptions opts)
    : n_(n_threads),
      opts_(std::move(opts)),
      checked_(opts_.checked.value_or(checked_from_env())),
      queues_(n_threads > 0 ? new ReadyQueue[n_threads] : nullptr),
      stats_(n_threads > 0 ? new WorkerStats[n_threads] : nullptr),
      notifier_(n_threads) {
    if (n_threads < 1)
        throw UsageError("Threadpool '" + opts_.name + "': n_threads must be >= 1, got " +
                         std::to_string(n_threads));
    static const bool settings_valid = (settings::validate(), true);  // once, at the first pool
    (void)settings_valid;
    if (opts_.pin_workers ? *opts_.pin_workers : settings::flag("CASCADE_PIN_WORKERS", false))
        pin_.cpus = allowed_cpus();
    setup_observer();
    if ((obs_.observer = observer())) {
        obs_.worker = std::make_unique<void*[]>(static_cast<std::size_t>(n_));
        for (int i = 0; i < n_; ++i)
            obs_.worker[i] =
                obs_.observer->on_worker_created(opts_.name + " worker " + std::to_string(i), i);
    }
    if (opts_.start) start();
}

Threadpool::Threadpool(int n_threads, JoinHook* hook, int verb, std::string name, bool start)
    : Threadpool(n_threads, hook,
                 ThreadpoolOptions{
                     .verb = verb, .name = name.empty() ? "tp" : std::move(name), .start = start}) {
}

Threadpool::Threadpool(int n_threads, JoinHook* hook, ThreadpoolOptions opts)
    : Threadpool(n_threads, without_start(opts)) {
    const bool start = opts.start;
    if (hook) {
        hook_ = hook;
        hook->attach(*this);
        if (!pin_.cpus.empty())
            pin_.first =
                pin_offset(static_cast<int>(pin_.cpus.size()), node_cpus(), hook->node_rank(), n_);
    }
    if (start) this->start();
}

namespace {
// CPUs as ranges: "0-3,8,10-11".
std::string cpu_list(std::vector<int> cpus) {
    std::sort(cpus.begin(), cpus.end());
    std::string out;
    for (std::size_t i = 0; i < cpus.size();) {
        std::size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
            ++j;
        if (!out.empty()) out += ',';
        out += std::to_string(cpus[i]);
        if (j > i) out.append("-").append(std::to_string(cpus[j]));
        i = j + 1;
    }
    return out;
}
}  // namespace

std::string Threadpool::placement() const {
    std::string s = std::to_string(n_) + (n_ == 1 ? " worker" : " workers");
    if (pin_.cpus.empty()) return s + ", not pinned, on CPUs " + cpu_list(allowed_cpus());
    std::vector<int> used;
    for (int i = 0; i < n_; ++i)
        used.push_back(pin_.cpus[static_cast<std::size_t>(pin_.first + i) % pin_.cpus.size()]);
    std::string list;
    for (int c : used) {
        if (!list.empty()) list += ',';
        list += std::to_string(c);
    }
    return s + " pinned to CPUs " + list;
}

Threadpool::~Threadpool() {
    // Join what was started since the last join() (a joined pool is not joined again: with a
    // communicator that would be one more completion round, which all ranks would have to
    // enter).
    if (armed_ && running_.load() && !std::uncaught_exceptions()) {
        try {
            join();
        } catch (const std::exception& e) {
            log::error(std::string("during Threadpool destruction (call join() to catch it): ") +
                       e.what());
        }
    }
    stop_workers();
    if (hook_) hook_->detach(*this);
}

void Threadpool::stop_workers() noexcept {
    if (!running_.load()) return;
    stop_.store(true, std::memory_order_seq_cst);
    notifier_.notify_all();
    for (pthread_t th : threads_)
        pthread_join(th, nullptr);
    threads_.clear();
    running_.store(false);
}

void Threadpool::start() {
    armed_ = true;
    if (running_.exchange(true)) return;
    for (int i = 0; i < n_; ++i)
        queues_[i].inbox().started();
    stop_.store(false);
    // A joining worker 0 is idle until a thread joins (work_as_joiner).
    const int first = opts_.joiner_works ? 1 : 0;
    idle_state_.store(static_cast<std::uint64_t>(first));
    threads_.reserve(n_);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, kWorkerStack);
    for (int i = first; i < n_; ++i) {
        auto* start = new WorkerStart{this, i};
        pthread_t th;
        const int rc = pthread_create(&th, &attr, &Threadpool::worker_main, start);
        if (rc != 0) {
            delete start;
            pthread_attr_destroy(&attr);
            stop_workers();
            throw std::system_error(
                rc, std::generic_category(),
                "Threadpool '" + opts_.name + "': starting worker " + std::to_string(i));
        }
        threads_.push_back(th);
    }
    pthread_attr_destroy(&attr);
}

void* Threadpool::worker_main(void* arg) {
    const WorkerStart w = *static_cast<WorkerStart*>(arg);
    delete static_cast<WorkerStart*>(arg);
    w.pool->worker_loop(w.index);
    return nullptr;
}

int Threadpool::pick_thread() noexcept {
    int me = current_thread();
    if (me >= 0) return me;
    return static_cast<int>(round_robin_.fetch_add(1, std::memory_order_relaxed) %
                            static_cast<unsigned>(n_));
}

void Threadpool::push(const Task& t, int thread, bool bound) {
    if (enqueue(t, thread, bound)) wake_for(thread, bound);
}

void Threadpool::push_quiet(const Task& t, int thread, bool bound) {
    enqueue(t, thread, bound);
}

void Threadpool::wake_workers() noexcept {
    notifier_.publish_barrier();
    if (notifier_.sleeping_relaxed() > 0) notifier_.notify_all();
    if (opts_.joiner_works) wake_joiner();
}

bool Threadpool::enqueue(const Task& t, int thread, bool bound) {
    if (thread < 0 || thread >= n_)
        throw UsageError("task " + t.describe() + ": mapped to thread " + std::to_string(thread) +
                         ", outside [0, " + std::to_string(n_) + ") of Threadpool '" + opts_.name +
                         "'");
    const int me = current_thread();
    if (thread == me) {
        queues_[thread].push(t, bound);
        // Our own queue: we are awake and will run it, so no wake-up can be lost; only
        // invite a sleeping worker to steal, without paying for a barrier.
        if (!bound && notifier_.sleeping_relaxed() > 0) notifier_.notify_one(thread);
        return false;
    }
    // Stealable tasks without a priority from outside the pool go through the inbox (ordered
    // among themselves); tasks with one go to the heap at once, to be ordered with the rest.
    const int lane = me < 0 && !bound && t.priority == 0.0 ? detail::Inbox::this_thread_lane() : -1;
    if (lane < 0) {
        queues_[thread].push(t, bound);
    } else if (queues_[thread].push_foreign(lane, t)) [[unlikely]] {
        wait_for_inbox(thread, lane);
    }
    return true;
}

// The calling thread (outside the pool) has queued Inbox::kHigh tasks for `thread` that its
// worker has not taken yet: it waits until kLow are left, so that its lane holds a bounded
// backlog. The thread that drives the hook (the communication thread) drives it meanwhile, as
// join() does: the workers' sends may wait for it. Any other thread sleeps until the worker
// that brings the backlog down to kLow wakes it (one wake-up a wait: each takes a core from a
// worker when the threads outnumber the cores). Waiting is only safe while the workers make
// progress without this thread: workers that take no task from the lane and finish none for
// kPatience (they block on a lock this thread holds, or wait for something this thread will
// do later) end the wait, and the lane waits again only at twice its backlog.
void Threadpool::wait_for_inbox(int thread, int lane) {
    using Waiting = JoinHook::Waiting;
    const Waiting how = hook_ ? hook_->how_to_wait() : Waiting::napping;
    if (!running_.load(std::memory_order_relaxed) || tls_worker.pool != nullptr ||
        how == Waiting::never)
        return;  // before start(), the tasks wait for it; workers of other pools never wait
    if (opts_.joiner_works && thread == 0) return;  // taken only once a thread joins
    using Clock = std::chrono::steady_clock;
    constexpr auto kPatience = std::chrono::milliseconds(10);
    constexpr auto kPollWindow = std::chrono::microseconds(50);  // driving: as join() does
    constexpr long kLongestDrivingNapUs = 500;
    detail::Inbox& inbox = queues_[thread].inbox();
    seeding_.waits.fetch_add(1, std::memory_order_relaxed);
    wake_workers();  // bulk insertion (push_quiet) has woken nobody yet
    // Progress: tasks taken from the lane, or run by any worker (a worker that runs the
    // tasks it took slowly, e.g. each waiting for room to send, is not stuck).
    std::uint64_t taken = inbox.taken(lane), ran = tasks_run();
    auto moved = Clock::now(), active = moved;
    const auto start = moved;
    auto last_taken = moved;  // the pace estimate below counts tasks taken from the lane only
    const std::uint64_t first = taken;
    long nap_us = 10;  // driving
    while (inbox.backlog(lane) > detail::Inbox::kLow) {
        if (how == Waiting::driving) {
            // Read the word before polling: a worker's send after the poll wakes us.
            const std::uint32_t word = joiner_.word.load(std::memory_order_seq_cst);
            if (hook_->help_while_waiting()) {
                active = Clock::now();
                nap_us = 10;
            } else if (Clock::now() - active < kPollWindow) {
                std::this_thread::yield();
            } else {
                nap_as_joiner(word, nap_us);
                nap_us = std::min(nap_us * 2, kLongestDrivingNapUs);
            }
        } else {
            // Woken by the worker at kLow; the timeout only ends a wait for a worker that
            // takes nothing: the patience, or up to 4 times that while the backlog should
            // take longer at the pace seen so far (each sleep costs the sleeper's barrier).
            auto limit = std::chrono::duration_cast<std::chrono::microseconds>(kPatience);
            if (taken != first) {
                const auto pace = (last_taken - start) / static_cast<long>(taken - first);
                limit = std::clamp(std::chrono::duration_cast<std::chrono::microseconds>(
                                       2 * pace * static_cast<long>(inbox.backlog(lane))),
                                   limit, 4 * limit);
            }
            inbox.wait_for_consumers(lane, limit.count());
        }
        const auto now = Clock::now();
        const std::uint64_t t = inbox.taken(lane), r = tasks_run();
        if (t != taken) last_taken = now;
        if (t != taken || r != ran) {
            taken = t;
            ran = r;
            moved = now;
        } else if (now - moved >= kPatience) {
            inbox.raise_mark(lane);
            seeding_.abandoned.fetch_add(1, std::memory_order_relaxed);
            return;
        }
    }
}

void Threadpool::wake_for(int thread, bool bound) noexcept {
    if (opts_.joiner_works && thread == 0) wake_joiner();  // worker 0 naps in join()
    // Pairs with Notifier::prepare_wait: either the sleeper sees the task or we see it asleep.
    notifier_.publish_barrier();
    if (notifier_.sleeping_relaxed() > 0) {
        if (!notifier_.notify(thread) && !bound) notifier_.notify_one(thread);
    }
}

bool Threadpool::find_task(int me, Task& out) {
    if (queues_[me].pop(out)) return true;
    // Steal: visit the others starting after ourselves so thieves spread out.
    for (int k = 1; k < n_; ++k) {
        int victim = me + k;
        if (victim >= n_) victim -= n_;
        if (queues_[victim].steal(out)) {
            ++stats_[me].stolen;
            if (obs_.observer) [[unlikely]]
                obs_.observer->on_steal(obs_.worker[me], victim);
            return true;
        }
    }
    return false;
}

bool Threadpool::run_one_task() {
    const int me = current_thread();
    if (me < 0) return false;
    // What the waiting task held back must not wait with it, even when it runs nothing else.
    detail::run_task_epilogue();
    // Tasks run here are nested on the waiting task's stack: not when it is nearly full.
    const char* sp = static_cast<const char*>(__builtin_frame_address(0));
    if (tls_worker.stack_low &&
        sp - tls_worker.stack_low < static_cast<std::ptrdiff_t>(kNestReserve))
        return false;
    Task t;
    if (!find_task(me, t)) return false;
    execute(t, me);
    return true;
}

bool Threadpool::work_as_joiner(int max_tasks) {
    if (!opts_.joiner_works || tls_worker.pool != nullptr) return false;
    std::atomic<bool>& due = stats_[0].hook_due;
    if (!has_work_for(0) && !due.load(std::memory_order_relaxed)) return false;
    // The calling thread's stack bounds, read once (for the main thread the C library parses
    // /proc/self/maps).
    static thread_local const char* const stack_low = stack_low_of_this_thread();
    tls_worker = {this, 0, stack_low};
    Observer* const obs = obs_.observer;
    if (obs) obs->on_worker_start(obs_.worker[0]);
    become_active();
    int ran = 0;
    Task t;
    while (ran < max_tasks && find_task(0, t)) {
        execute(t, 0);
        ++ran;
        // Its messages go out first: handed on at once, or at a poll.
        if (hook_ && hook_->wants_progress() && !hook_->hand_on_queued()) break;
    }
    // The idle hook, as a worker calls it after a stretch of tasks (worker_loop).
    if (ran > 0 && idle_.hook.load(std::memory_order_relaxed) != nullptr) owe_hook_call(0);
    if (due.load(std::memory_order_seq_cst) && !has_work_for(0) && call_idle_hook(0) <= 0)
        paid_hook_call(0);
    become_idle();
    if (obs) obs->on_worker_stop(obs_.worker[0]);
    tls_worker = {};
    return ran > 0;
}

bool Threadpool::has_work_for(int me) const noexcept {
    if (queues_[me].size() > 0) return true;
    for (int w = 0; w < n_; ++w)
        if (queues_[w].stealable() > 0) return true;
    return false;
}

bool Threadpool::locally_idle() const noexcept {
    // All workers idle at s1, no queue holds a task, and no worker became active since s1:
    // then no worker ran or pushed anything in between, so the pool was idle throughout.
    const std::uint64_t s1 = idle_state_.load(std::memory_order_seq_cst);
    if (static_cast<std::uint32_t>(s1) != static_cast<std::uint32_t>(n_)) return false;
    if (idle_.dues.load(std::memory_order_seq_cst) != 0) return false;  // a call to make
    if (external_.load(std::memory_order_seq_cst) != 0) return false;   // work elsewhere
    for (int w = 0; w < n_; ++w)
        if (queues_[w].size() > 0) return false;
    return idle_state_.load(std::memory_order_seq_cst) == s1;
}

void Threadpool::execute(Task& t, int me) {
    if (error_.failed()) {
        t.discard();
        return;
    }
    if (obs_.observer) [[unlikely]] {  // the only cost of observation when it is off
        void* w = obs_.worker[me];
        const std::uint64_t begin = obs_.observer->on_task_begin(w, t);
        run_guarded(t, me);
        obs_.observer->on_task_end(w, begin);
    } else {
        run_guarded(t, me);
    }
    // Only this worker writes its count: a plain load and store, no atomic increment.
    stats_[me].run.store(stats_[me].run.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
}

void Threadpool::run_guarded(Task& t, int me) {
    try {
        t.run();
        detail::run_task_epilogue();
    } catch (const std::exception& e) {
        fail(std::make_exception_ptr(TaskError(t.describe(), me, std::current_exception(), e.what(),
                                               hook_ ? hook_->rank() : -1)));
    } catch (...) {
        fail(std::make_exception_ptr(TaskError(t.describe(), me, std::current_exception(),
                                               "unknown exception", hook_ ? hook_->rank() : -1)));
    }
}

std::string Threadpool::rank_prefix() const {
    const int r = hook_ ? hook_->rank() : -1;
    return r >= 0 ? "rank " + std::to_string(r) + ": " : std::string();
}

void Threadpool::fail(std::exception_ptr e) noexcept {
    error_.record(std::move(e));
}

// Idle accounting: idle_state_ holds the number of idle workers (low 32 bits) and the
// number of idle->active transitions (high 32 bits). A worker is idle from the moment it
// finds nothing to do until it is about to look for work again; an idle worker holds no task
// and pushes nothing. See locally_idle() for how the joiner uses the transition count.
void Threadpool::become_idle() noexcept {
    const std::uint64_t s = idle_state_.fetch_add(1, std::memory_order_seq_cst) + 1;
    if (static_cast<std::uint32_t>(s) == static_cast<std::uint32_t>(n_)) wake_joiner();
}

void Threadpool::become_active() noexcept {
    idle_state_.fetch_add((std::uint64_t(1) << 32) - 1, std::memory_order_seq_cst);
}

void Threadpool::worker_loop(int me) {
    tls_worker = {this, me, stack_low_of_this_thread()};
    if (!pin_.cpus.empty() && !pin_this_thread(pin_.cpus, pin_.first + me))
        log::warn("Threadpool '" + opts_.name + "': could not pin worker " + std::to_string(me));
    Observer* const obs = obs_.observer;
    void* const ow = obs ? obs_.worker[me] : nullptr;
    if (obs) obs->on_worker_start(ow);
    Task t;
    bool ran = false;  // a task since the last look at the idle hook
    for (;;) {
        if (find_task(me, t)) {
            execute(t, me);
            ran = true;
            continue;
        }
        // Still active: a call owed to the hook keeps the pool busy from here on.
        if (ran && idle_.hook.load(std::memory_order_relaxed) != nullptr) owe_hook_call(me);
        ran = false;
        become_idle();
        const std::int64_t idle_since = obs ? obs->now() : 0;
        bool found = false;
        const auto idle_start = std::chrono::steady_clock::now();
        // Messages our last task queued wait for the thread that drives MPI, which may share
        // our core: yield at once rather than spin (a remote call's reply is sent sooner).
        const bool yield_now = hook_ && hook_->wants_progress();
        for (;;) {
            const auto idle_for = std::chrono::steady_clock::now() - idle_start;
            if (idle_for >= kIdleYield) break;
            if (idle_for < kIdleSpin && !yield_now) {
                for (int i = 0; i < 8; ++i)
                    cpu_relax();
            } else {
                std::this_thread::yield();
            }
            if (has_work_for(me)) {
                become_active();
                if ((found = find_task(me, t))) break;
                become_idle();
            }
        }
        if (found) {
            if (obs) obs->on_idle(ow, idle_since);
            execute(t, me);
            ran = true;
            continue;
        }
        // The idle hook is called once per idle stretch that follows a task (or a new hook),
        // never by a worker that merely woke up: what it sends stays inside the epoch that
        // counted the call owed. One that wants another call soon keeps the call owed and
        // this worker counted busy until then (join() waits for what it still has to do).
        bool counted_idle = true;
        long timeout_us = kSleepTimeoutUs;
        if (stats_[me].hook_due.load(std::memory_order_seq_cst)) [[unlikely]] {
            become_active();
            const long again = call_idle_hook(me);
            if (again > 0) {
                timeout_us = std::min(again, kSleepTimeoutUs);
                counted_idle = false;
            } else {
                paid_hook_call(me);
                become_idle();
            }
        }
        std::uint32_t epoch = notifier_.prepare_wait(me);
        if (stop_.load(std::memory_order_seq_cst)) {
            notifier_.cancel_wait(me);
            if (counted_idle) become_active();
            if (obs) obs->on_idle(ow, idle_since);
            break;
        }
        if (has_work_for(me)) {
            notifier_.cancel_wait(me);
            if (counted_idle) become_active();
            if (obs) obs->on_idle(ow, idle_since);
            continue;
        }
        notifier_.commit_wait(me, epoch, timeout_us);
        if (counted_idle) become_active();
        if (obs) obs->on_idle(ow, idle_since);
    }
    if (obs) obs->on_worker_stop(ow);
    tls_worker = {};
}

std::exception_ptr Threadpool::error() const {
    return error_.peek();
}

std::uint64_t Threadpool::tasks_run() const noexcept {
    std::uint64_t s = 0;
    for (int i = 0; i < n_; ++i)
        s += stats_[i].run.load(std::memory_order_relaxed);
    return s;
}

ThreadpoolStats Threadpool::stats() const noexcept {
    ThreadpoolStats st;
    for (int i = 0; i < n_; ++i) {
        const ThreadpoolStats w = stats(i);
        st.tasks_run += w.tasks_run;
        st.tasks_stolen += w.tasks_stolen;
        st.kept_inbox_bytes += w.kept_inbox_bytes;
    }
    st.seeding_waits = seeding_.waits.load(std::memory_order_relaxed);
    st.seeding_waits_abandoned = seeding_.abandoned.load(std::memory_order_relaxed);
    return st;
}

ThreadpoolStats Threadpool::stats(int worker) const noexcept {
    ThreadpoolStats st;
    if (worker < 0 || worker >= n_) return st;
    st.tasks_run = stats_[worker].run.load(std::memory_order_relaxed);
    st.tasks_stolen = stats_[worker].stolen;
    st.kept_inbox_bytes = queues_[worker].inbox_kept_bytes();
    return st;
}

std::size_t Threadpool::cached_inbox_bytes() noexcept {
    return detail::Inbox::cached_bytes();
}

void Threadpool::attach(detail::TaskflowBase* tf) {
    taskflows_.add(tf);
}

void Threadpool::detach(detail::TaskflowBase* tf) {
    taskflows_.remove(tf);
}

}  // namespace cascade
