// The trace recorder of this process. Recording is on when CASCADE_TRACE=<file.json> or
// CASCADE_DAG=<file.dot> is set (or after trace::configure), decided before pools start:
//   - each worker records into its pool's Buffer (tasks, idle periods, steals), other threads
//     (main, the one that drives MPI) into a Buffer of their own (sends, handlers, promises);
//   - promise edges (fulfill_promise calls) are recorded only when the task graph is asked
//     for (a DAG path);
//   - names are resolved lazily: a task event keeps its Taskflow pointer and key; they
//     become the set_name name when the Taskflow is destroyed or the trace is written;
//   - at the end (Communicator destruction, or process exit without one) the events of every
//     rank are gathered on rank 0, which writes the Chrome trace JSON and the DOT graph
//     (export.hpp).
// The recorder watches pools and taskflows as the core's Observer (core/observer.hpp), which
// it installs while recording; the communicator records its own events (sends, handlers,
// transfers) straight into the calling thread's buffer. With recording off, each hook costs
// one predictable branch.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cascade/core/observer.hpp"
#include "cascade/core/settings.hpp"
#include "cascade/core/task.hpp"
#include "cascade/trace/buffer.hpp"
#include "cascade/trace/event.hpp"

namespace cascade::trace {

/// What to record and where to write it (trace::configure, or the environment).
///
/// ```cpp
/// cascade::trace::configure({.trace_path = "run.json", .dag_path = "run.dot"});
/// cascade::Communicator comm;        // then pools, taskflows, ...
/// // ... the files are written when the Communicator is destroyed (or at exit)
/// ```
struct Options {
    std::string trace_path;  ///< Chrome trace-event JSON ("" : none); CASCADE_TRACE
    std::string dag_path;    ///< Graphviz DOT of the promise edges taken ("" : none); CASCADE_DAG
    std::size_t events_per_thread = std::size_t(1) << 17;  ///< CASCADE_TRACE_EVENTS
};

// Bounds of Options::events_per_thread (and CASCADE_TRACE_EVENTS).
inline constexpr std::size_t kMinEventsPerThread = settings::kTraceEventsMin;
inline constexpr std::size_t kMaxEventsPerThread = settings::kTraceEventsMax;

namespace detail {
inline std::atomic<bool> g_recording{false};
inline std::atomic<bool> g_edges{false};
// Registers init_from_env with the core (set_observer_setup), so that pools and taskflows
// read CASCADE_TRACE when they are created. Run by every program that includes this header,
// which also makes sure the recorder is linked in.
bool install_setup() noexcept;
inline const bool g_setup_installed = install_setup();
}  // namespace detail

/// True when events are recorded. Cheap: one relaxed load.
inline bool recording() noexcept {
    return detail::g_recording.load(std::memory_order_relaxed);
}
// True when promise edges are recorded too: only when the task graph is asked for
// (CASCADE_DAG, Options::dag_path, on rank 0), since a 4-dependency task would otherwise
// record four edges beside its own event.
inline bool recording_edges() noexcept {
    return detail::g_edges.load(std::memory_order_relaxed);
}

/// Reads CASCADE_TRACE, CASCADE_DAG and CASCADE_TRACE_EVENTS once (later calls do nothing).
/// Pools, taskflows and communicators have it called when they are created.
void init_from_env();
/// Turns recording on or off (installs or removes the core observer), keeping the outputs.
void set_recording(bool on) noexcept;
// Whether promise edges are recorded (set from the outputs; the communicator makes every
// rank follow rank 0).
void set_recording_edges(bool on) noexcept;
/// Sets the outputs by program instead of the environment; call before creating pools.
void configure(Options opts);
/// The outputs in force.
const Options& options();

// ---- used by the layers that record (the core's observer, the communicator) -------------

// The calling thread's buffer: its pool worker's, or one created on first use (label
// "thread N", the first one "main"). Null when not recording.
Buffer* this_thread();
// Workers: bind the calling thread to its pool's buffer (null: unbind).
void set_this_thread(Buffer* b) noexcept;
// A buffer owned by the recorder (pools get one per worker).
Buffer* new_buffer(std::string label);
// Names the calling thread's buffer as the one that drives MPI (once).
void mark_progress_thread();

// How the name of a task kind splits into taskflow name and key (registered by Taskflow<K>).
using PartsFn = void (*)(const unsigned char* payload, std::string& flow, std::string& key);
void register_kind(const TaskVTable* vt, PartsFn parts);
// A Taskflow is going away: name every recorded event that refers to it now.
void resolve_owner(const TaskVTable* vt, const void* owner);

// fulfill_promise(k) on the calling thread: an edge from its current task (or handler) to
// the task described by (vt, payload). Called only when recording_edges().
void record_edge(const TaskVTable* vt, const void* payload, std::size_t bytes) noexcept;

// Sets a named counter of this rank (e.g. "broadcast.root_messages"); the trace file lists
// every rank's counters and `cascade-trace summary` prints them. Thread-safe, not per event.
void set_counter(const std::string& name, std::uint64_t value);

// ---- used by the exporter --------------------------------------------------------------------
// Names every event not named yet (the taskflows it refers to must be alive).
void resolve_all();
std::vector<Buffer*> buffers();
std::vector<std::string> strings();  // a copy of the interned strings, by id
std::uint32_t intern(const std::string& s);
std::vector<std::pair<std::string, std::uint64_t>> counters();  // by name
/// Converts stamp() values of this process to steady_clock nanoseconds (a linear fit
/// between the first sample, taken when recording started, and one taken now).
struct StampClock {
    std::int64_t tick0 = 0;  ///< stamp() of the first sample.
    std::int64_t ns0 = 0;    ///< steady_clock nanoseconds of the first sample.
    double ns_per_tick = 1;  ///< Slope of the fit.
    /// Stamp `t` in steady_clock nanoseconds.
    std::int64_t operator()(std::int64_t t) const noexcept {
        return ns0 + static_cast<std::int64_t>(static_cast<double>(t - tick0) * ns_per_tick);
    }
};
StampClock stamp_clock();
// Offset (ns) to add to this process's steady_clock to get rank 0's (set when the Communicator
// starts).
void set_clock_offset(std::int64_t ns) noexcept;
std::int64_t clock_offset() noexcept;
// Whether the process-exit writer still has to write (false once a Communicator wrote).
void set_written(bool w) noexcept;
bool written() noexcept;

}  // namespace cascade::trace
