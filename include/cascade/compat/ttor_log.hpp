// TaskTorrent compatibility (see cascade/compat/ttor.hpp): its clock helpers (wctime,
// elapsed), its profiling loggers (Logger, DepsLogger; Cascade's tracing records instead) and
// its Task.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <iomanip>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "cascade/core/log.hpp"

namespace ttor {

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

namespace detail {
// Keeps e in the next free slot of `events` (thread-safe through `next`); once they are all
// taken, drops it and warns once (`full`).
template <class E>
void keep_event(std::vector<std::unique_ptr<E>>& events, std::atomic<int>& next,
                std::atomic<bool>& full, std::unique_ptr<E> e, const char* who) {
    const int id = next++;
    if (id < static_cast<int>(events.size()))
        events[static_cast<std::size_t>(id)] = std::move(e);
    else if (!full.exchange(true))
        cascade::log::warn(std::string(who) + ": buffer full, further events are dropped");
}
}  // namespace detail

/// A fixed-capacity list of events, filled by the program (add_event, record) from any thread.
struct Logger {
    /// Room for n events; more are dropped (and was_full() becomes true).
    explicit Logger(int n = 0)
        : origin_(wctime()), events_(static_cast<std::size_t>(std::max(0, n))) {}
    /// Adds an event (thread-safe).
    void add_event(std::unique_ptr<Event> e) {
        detail::keep_event(events_, i_, full_, std::move(e), "ttor::Logger");
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
        detail::keep_event(events, i, printed_warning, std::move(e), "ttor::DepsLogger");
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

}  // namespace ttor
