// TaskTorrent compatibility: code written against TaskTorrent's API compiles and runs with
// `using namespace ttor;` (or through <tasktorrent/tasktorrent.hpp>), with the same meaning:
// Communicator, Threadpool / Threadpool_shared, Taskflow<K>, active messages (small, large,
// blocking), Task and Threadpool_shared::insert(Task*, ...), Logger / DepsLogger and
// set_logger, and the helpers (comm_rank, wctime, elapsed, ...).
//
// Profiling: TaskTorrent's Logger collected task timings for its own plotting scripts.
// Cascade records tasks and messages through its tracing instead (CASCADE_TRACE=run.json,
// docs/tracing.md): set_logger(&log) keeps the logger for the program's own add_event calls
// and says so once (CASCADE_LOG=info); `os << log` writes what was added, in TaskTorrent's
// format.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <queue>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cascade/cascade.hpp"

namespace ttor {

using cascade::view;

// ---- time -------------------------------------------------------------------------------

/// A wall-clock time point (TaskTorrent's `timer`).
using timer = std::chrono::time_point<std::chrono::high_resolution_clock>;
/// Now.
inline timer wctime() {
    return std::chrono::high_resolution_clock::now();
}
/// Seconds from t0 to t1.
inline double elapsed(timer t0, timer t1) {
    return std::chrono::duration<double>(t1 - t0).count();
}
/// Seconds since the clock's epoch.
inline double time(timer t) {
    return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// ---- profiling: Logger, DepsLogger -------------------------------------------------------

/// One timed event of a Logger: a name, a start (at construction) and an end (record()).
struct Event {
    std::string name;  ///< what happened
    timer start;       ///< when it started
    timer end;         ///< when it ended (set by record())
    /// An event named `n` starting now.
    explicit Event(std::string n) : name(std::move(n)), start(wctime()) {}
    /// An event named "_" starting now.
    Event() : Event("_") {}
    /// Marks the end of the event: now.
    void record() { end = wctime(); }
};

/// A fixed-capacity list of events, filled by the program (add_event, record) from any thread.
struct Logger {
    /// Room for n events; more are dropped (and was_full() becomes true).
    explicit Logger(int n = 0)
        : origin_(wctime()), events_(static_cast<std::size_t>(std::max(0, n))) {}
    /// Adds an event (thread-safe).
    void add_event(std::unique_ptr<Event> e) {
        const int id = i_++;
        if (id < static_cast<int>(events_.size()))
            events_[static_cast<std::size_t>(id)] = std::move(e);
        else if (!full_.exchange(true))
            cascade::log::warn("ttor::Logger: buffer full, further events are dropped");
    }
    /// Ends e now and adds it.
    void record(std::unique_ptr<Event> e) {
        e->record();
        add_event(std::move(e));
    }
    /// How many events were kept.
    int n_events() const { return std::min(static_cast<int>(events_.size()), i_.load()); }
    /// Whether events were dropped.
    bool was_full() const { return full_.load(); }
    /// The events (the first n_events() are set).
    const std::vector<std::unique_ptr<Event>>& get_events() const { return events_; }
    /// When the logger was made.
    timer get_origin() const { return origin_; }

  private:
    timer origin_;
    std::atomic<bool> full_{false};
    std::atomic<int> i_{0};
    std::vector<std::unique_ptr<Event>> events_;
};

/// One dependency: task `self_name` fulfills a promise of `out_deps_name`.
struct DepsEvent {
    std::string self_name;      ///< the task that fulfills
    std::string out_deps_name;  ///< the task it fulfills a promise of
    /// The edge s -> o.
    DepsEvent(std::string s, std::string o)
        : self_name(std::move(s)), out_deps_name(std::move(o)) {}
    DepsEvent() = default;
};

/// A fixed-capacity list of dependencies, written as `self,out` lines. Cascade's own task
/// graph is CASCADE_DAG=graph.dot.
struct DepsLogger {
    std::atomic<int> i{0};                           ///< events added so far
    std::atomic<bool> printed_warning{false};        ///< whether events were dropped
    std::vector<std::unique_ptr<DepsEvent>> events;  ///< the kept events
    /// Room for n events.
    explicit DepsLogger(int n = 0) : events(static_cast<std::size_t>(std::max(0, n))) {}
    /// Adds an edge (thread-safe).
    void add_event(std::unique_ptr<DepsEvent> e) {
        const int id = i++;
        if (id < static_cast<int>(events.size()))
            events[static_cast<std::size_t>(id)] = std::move(e);
        else if (!printed_warning.exchange(true))
            cascade::log::warn("ttor::DepsLogger: buffer full, further events are dropped");
    }
    /// Whether events were dropped.
    bool was_full() const { return printed_warning.load(); }
};

/// Writes `name,start,end` per event (seconds), as TaskTorrent did.
inline std::ostream& operator<<(std::ostream& os, Logger& t) {
    os << std::setprecision(64);
    for (int k = 0; k < t.n_events(); ++k) {
        const auto& e = t.get_events()[static_cast<std::size_t>(k)];
        os << e->name << "," << ttor::time(e->start) << "," << ttor::time(e->end) << "\n";
    }
    return os;
}
/// Writes `self,out` per edge.
inline std::ostream& operator<<(std::ostream& os, DepsLogger& t) {
    const int n = std::min(static_cast<int>(t.events.size()), t.i.load());
    for (int k = 0; k < n; ++k)
        os << t.events[static_cast<std::size_t>(k)]->self_name << ","
           << t.events[static_cast<std::size_t>(k)]->out_deps_name << "\n";
    return os;
}

namespace detail {
inline void note_logger(const char* who) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
        cascade::log::info(std::string(who) +
                           "::set_logger: Cascade records tasks and messages with its tracing "
                           "(CASCADE_TRACE=run.json, docs/tracing.md); the Logger keeps the "
                           "program's own events");
}
}  // namespace detail

// ---- tasks ------------------------------------------------------------------------------

/// A task inserted directly into a pool: run(), then fulfill(); the pool deletes it.
struct Task {
    std::function<void()> run = [] {};      ///< the work
    std::function<void()> fulfill = [] {};  ///< runs right after run()
    double priority = 0;                    ///< higher runs first
    std::string name = "_";                 ///< for diagnostics
    /// The name as a C string.
    const char* c_name() const { return name.c_str(); }
};

// ---- communicator -----------------------------------------------------------------------

/// TaskTorrent's Communicator over cascade::Communicator.
class Communicator : public cascade::Communicator {
  public:
    /// Wraps `comm` (initializing MPI if needed). `break_msg_size` (bytes) caps the pieces
    /// large bodies travel in.
    explicit Communicator(MPI_Comm comm = MPI_COMM_WORLD, int verb = 0,
                          std::size_t break_msg_size = std::size_t(std::numeric_limits<int>::max()))
        : cascade::Communicator(comm, verb) {
        if (break_msg_size < std::size_t(std::numeric_limits<int>::max()))
            set_large_chunk(break_msg_size);
    }
    /// Receives and runs what has arrived, and moves queued messages.
    void recv_process() { progress(); }
    /// Messages processed here so far.
    int get_n_msg_processed() const { return static_cast<int>(processed()); }
    /// Messages queued here so far.
    int get_n_msg_queued() const { return static_cast<int>(queued()); }
    /// See the note at the top of this file.
    void set_logger(Logger* l) {
        logger_ = l;
        detail::note_logger("Communicator");
    }

  private:
    Logger* logger_ = nullptr;
};

template <class... Ps>
using ActiveMsg = cascade::ActiveMsg<Ps...>;
template <class T, class... Ps>
using LargeActiveMsg = cascade::LargeActiveMsg<T, Ps...>;

// ---- thread pools -----------------------------------------------------------------------

/// A pool of worker threads on this rank only (no messages): TaskTorrent's Threadpool_shared.
class Threadpool_shared : public cascade::Threadpool {
  public:
    /// n_threads workers, started now unless start_immediately is false.
    explicit Threadpool_shared(int n_threads, int verb = 0, std::string basename = "Wk_",
                               bool start_immediately = true)
        : cascade::Threadpool(n_threads,
                              cascade::ThreadpoolOptions{.verb = verb,
                                                         .name = basename.empty() ? "tp" : basename,
                                                         .start = start_immediately}) {}

    using cascade::Threadpool::insert;
    /// Queues t on worker `where` (only there if binding); the pool runs t->run(),
    /// t->fulfill() and deletes t.
    void insert(Task* t, int where, bool binding = false) {
        insert(
            [t] {
                std::unique_ptr<Task> owned(t);
                owned->run();
                owned->fulfill();
            },
            where, t->priority, binding);
    }
    /// Whether the pool has finished (join() returned).
    bool is_done() const { return done_; }
    /// Waits until every task ran (and, with a communicator, every rank is done).
    void join() {
        cascade::Threadpool::join();
        done_ = true;
    }
    /// See the note at the top of this file.
    void set_logger(Logger* l) {
        logger_ = l;
        detail::note_logger("Threadpool");
    }

  protected:
    /// For ttor::Threadpool: a pool whose join() also waits for `comm` (distributed
    /// completion).
    Threadpool_shared(int n_threads, Communicator* comm, int verb, std::string basename,
                      bool start_immediately)
        : cascade::Threadpool(n_threads, comm, verb, std::move(basename), start_immediately) {}

  private:
    bool done_ = false;
    Logger* logger_ = nullptr;
};

/// A pool whose join() also waits for distributed completion over a communicator.
class Threadpool : public Threadpool_shared {
  public:
    /// n_threads workers; join() is distributed over comm.
    Threadpool(int n_threads, Communicator* comm, int verb = 0, std::string basename = "Wk_",
               bool start_immediately = true)
        : Threadpool_shared(n_threads, comm, verb, std::move(basename), start_immediately) {}
    /// A pool without a communicator.
    explicit Threadpool(int n_threads, int verb = 0, std::string basename = "Wk_",
                        bool start_immediately = true)
        : Threadpool_shared(n_threads, verb, std::move(basename), start_immediately) {}
};

/// TaskTorrent's name for the distributed pool.
using Threadpool_dist = Threadpool;

// ---- task graphs ------------------------------------------------------------------------

/// A parametrized task graph (cascade::Taskflow) with TaskTorrent's extra names.
template <class K>
class Taskflow : public cascade::Taskflow<K> {
  public:
    /// A task graph run by tp.
    explicit Taskflow(cascade::Threadpool* tp, int verb = 0) : cascade::Taskflow<K>(tp, verb) {}
    // The setters return this Taskflow, so that a chain reaches set_name below.
    /// See cascade::Taskflow::set_task.
    Taskflow& set_task(std::function<void(K)> f) {
        cascade::Taskflow<K>::set_task(std::move(f));
        return *this;
    }
    /// See cascade::Taskflow::set_fulfill.
    Taskflow& set_fulfill(std::function<void(K)> f) {
        cascade::Taskflow<K>::set_fulfill(std::move(f));
        return *this;
    }
    /// See cascade::Taskflow::set_indegree.
    Taskflow& set_indegree(std::function<int(K)> f) {
        cascade::Taskflow<K>::set_indegree(std::move(f));
        return *this;
    }
    /// See cascade::Taskflow::set_mapping.
    Taskflow& set_mapping(std::function<int(K)> f) {
        cascade::Taskflow<K>::set_mapping(std::move(f));
        return *this;
    }
    /// See cascade::Taskflow::set_binding.
    Taskflow& set_binding(std::function<bool(K)> f) {
        cascade::Taskflow<K>::set_binding(std::move(f));
        return *this;
    }
    /// See cascade::Taskflow::set_priority.
    Taskflow& set_priority(std::function<double(K)> f) {
        cascade::Taskflow<K>::set_priority(std::move(f));
        return *this;
    }
    /// The paper's name for set_task.
    Taskflow& set_run(std::function<void(K)> f) {
        this->set_task(std::move(f));
        return *this;
    }
    /// Names task k (also used by name(k)).
    Taskflow& set_name(std::function<std::string(K)> f) {
        name_of_ = f;
        cascade::Taskflow<K>::set_name(std::move(f));
        return *this;
    }
    /// The name of task k.
    std::string name(K k) const { return name_of_ ? name_of_(k) : "_"; }
    /// See the note at the top of this file.
    Taskflow& set_logger(DepsLogger* l) {
        logger_ = l;
        return *this;
    }

  private:
    std::function<std::string(K)> name_of_;
    DepsLogger* logger_ = nullptr;
};

// ---- helpers ----------------------------------------------------------------------------

/// This process's rank in MPI_COMM_WORLD.
inline int comm_rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}
/// The number of ranks in MPI_COMM_WORLD.
inline int comm_size() {
    int s = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    return s;
}
/// This process's rank in `comm`.
inline int comm_rank(MPI_Comm comm) {
    int r = 0;
    MPI_Comm_rank(comm, &r);
    return r;
}
/// The number of ranks in `comm`.
inline int comm_size(MPI_Comm comm) {
    int s = 1;
    MPI_Comm_size(comm, &s);
    return s;
}
/// The MPI processor name of this rank.
inline std::string processor_name() {
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    return std::string(name, static_cast<std::size_t>(len));
}
/// The host name (TaskTorrent's get_name_me).
inline std::string get_name_me() {
    return processor_name();
}

}  // namespace ttor
