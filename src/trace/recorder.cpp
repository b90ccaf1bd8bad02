#include "cascade/trace/recorder.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "cascade/core/errors.hpp"
#include "cascade/core/settings.hpp"
#include "cascade/trace/export.hpp"

namespace cascade::trace {

namespace {

// Everything the recorder owns, behind one mutex (taken when a thread gets its buffer, when
// names are resolved and when the trace is written; never per event).
struct State {
    std::mutex mutex;
    Options opts;
    bool initialized = false;
    std::vector<std::unique_ptr<Buffer>> buffers;
    std::vector<std::string> strings{std::string()};
    std::unordered_map<std::string, std::uint32_t> ids{{std::string(), 0}};
    std::unordered_map<const TaskVTable*, PartsFn> kinds;
    std::map<std::string, std::uint64_t> counters;
    int external_threads = 0;
    std::atomic<std::int64_t> offset{0};
    std::int64_t tick0 = 0, ns0 = 0;  // first stamp()/steady_clock sample
    std::atomic<bool> written{false};
};

State& state() {
    static State* s = new State;  // never destroyed: the exit writer and late threads use it
    return *s;
}

thread_local Buffer* tls_buffer = nullptr;
thread_local bool tls_progress_marked = false;

std::uint32_t intern_locked(State& s, const std::string& str) {
    auto [it, inserted] = s.ids.emplace(str, static_cast<std::uint32_t>(s.strings.size()));
    if (inserted) s.strings.push_back(str);
    return it->second;
}

// Names a task or edge event from its identity (the taskflow it refers to must be alive).
void resolve_locked(State& s, Event& e) {
    if (e.flags & Event::kResolved) return;
    if ((e.kind != Kind::task && e.kind != Kind::edge) || e.vt == nullptr) {
        e.flags |= Event::kResolved;
        return;
    }
    Task t;
    t.vt = e.vt;
    std::memcpy(t.payload, e.payload, sizeof t.payload);
    std::string name = t.describe();
    if (name.size() >= 2 && name.front() == '\'' && name.back() == '\'')
        name = name.substr(1, name.size() - 2);
    std::string flow, key;
    if (auto it = s.kinds.find(e.vt); it != s.kinds.end()) it->second(e.payload, flow, key);
    e.name = intern_locked(s, name);
    e.flow = intern_locked(s, flow);
    e.key = intern_locked(s, key);
    e.flags |= Event::kResolved;
}

// The trace as the core's Observer (core/observer.hpp): pools and taskflows report to it
// while recording is on. A worker is identified by its Buffer.
class Recorder final : public Observer {
  public:
    void* on_worker_created(const std::string& label, int) override { return new_buffer(label); }
    void on_worker_start(void* w) noexcept override { set_this_thread(static_cast<Buffer*>(w)); }
    void on_worker_stop(void*) noexcept override { set_this_thread(nullptr); }
    std::uint64_t on_task_begin(void* w, const Task& t) noexcept override {
        return static_cast<Buffer*>(w)->begin_task(t);
    }
    void on_task_end(void* w, std::uint64_t outer) noexcept override {
        static_cast<Buffer*>(w)->end_task(outer);
    }
    void on_steal(void* w, int victim) noexcept override {
        Buffer* b = static_cast<Buffer*>(w);
        if (Event* e = b->reserve(Kind::steal)) {
            e->t0 = stamp();
            e->peer = victim;
            b->commit();
        }
    }
    std::int64_t now() noexcept override { return stamp(); }
    void on_idle(void* w, std::int64_t since) noexcept override {
        static_cast<Buffer*>(w)->slice(Kind::idle, since);
    }
    void on_taskflow_created(const TaskVTable* vt, PartsFn parts) override {
        register_kind(vt, parts);
    }
    void on_taskflow_destroyed(const TaskVTable* vt, const void* owner) override {
        resolve_owner(vt, owner);
    }
    void on_promise(const TaskVTable* vt, const void* payload,
                    std::size_t bytes) noexcept override {
        record_edge(vt, payload, bytes);
    }
    void edges(bool on) noexcept { set_wants_promises(on); }
};

Recorder& recorder() {
    static Recorder* r = new Recorder;  // never destroyed: threads may report during exit
    return *r;
}

void apply(State& s, Options o) {
    s.opts = std::move(o);
    const bool on = !s.opts.trace_path.empty() || !s.opts.dag_path.empty();
    if (on && !s.initialized) std::atexit([] { write_at_exit(); });
    if (s.tick0 == 0) {
        s.tick0 = stamp();
        s.ns0 = now_ns();
    }
    s.initialized = true;
    set_recording_edges(!s.opts.dag_path.empty());
    set_recording(on);
}

}  // namespace

void set_recording_edges(bool on) noexcept {
    detail::g_edges.store(on, std::memory_order_seq_cst);
    recorder().edges(on);
}

void set_recording(bool on) noexcept {
    detail::g_recording.store(on, std::memory_order_seq_cst);
    set_observer(on ? &recorder() : nullptr);
}

bool detail::install_setup() noexcept {
    set_observer_setup(&init_from_env);
    return true;
}

void init_from_env() {
    State& s = state();
    std::lock_guard<std::mutex> g(s.mutex);
    if (s.initialized) return;
    Options o;
    o.trace_path = settings::path("CASCADE_TRACE");
    o.dag_path = settings::path("CASCADE_DAG");
    o.events_per_thread = settings::count("CASCADE_TRACE_EVENTS", o.events_per_thread,
                                          kMinEventsPerThread, kMaxEventsPerThread);
    apply(s, std::move(o));
}

void configure(Options opts) {
    State& s = state();
    std::lock_guard<std::mutex> g(s.mutex);
    if (opts.events_per_thread < kMinEventsPerThread) opts.events_per_thread = kMinEventsPerThread;
    if (opts.events_per_thread > kMaxEventsPerThread)
        throw UsageError("trace::configure: events_per_thread " +
                         std::to_string(opts.events_per_thread) + " is above the limit " +
                         std::to_string(kMaxEventsPerThread));
    apply(s, std::move(opts));
}

const Options& options() {
    return state().opts;
}

Buffer* new_buffer(std::string label) {
    State& s = state();
    std::lock_guard<std::mutex> g(s.mutex);
    s.buffers.push_back(std::make_unique<Buffer>(static_cast<std::uint32_t>(s.buffers.size()),
                                                 std::move(label), s.opts.events_per_thread));
    return s.buffers.back().get();
}

Buffer* this_thread() {
    if (tls_buffer || !recording()) return tls_buffer;
    State& s = state();
    std::string label;
    {
        std::lock_guard<std::mutex> g(s.mutex);
        const int n = s.external_threads++;
        label = n == 0 ? "main" : "thread " + std::to_string(n);
    }
    tls_buffer = new_buffer(std::move(label));
    return tls_buffer;
}

void set_this_thread(Buffer* b) noexcept {
    tls_buffer = b;
}

void mark_progress_thread() {
    if (tls_progress_marked) return;
    tls_progress_marked = true;
    if (Buffer* b = this_thread()) b->progress_thread = true;
}

void register_kind(const TaskVTable* vt, PartsFn parts) {
    State& s = state();
    std::lock_guard<std::mutex> g(s.mutex);
    s.kinds[vt] = parts;
}

void resolve_owner(const TaskVTable* vt, const void* owner) {
    State& s = state();
    std::lock_guard<std::mutex> g(s.mutex);
    for (auto& b : s.buffers) {
        const std::size_t n = b->count();
        for (std::size_t i = 0; i < n; ++i) {
            Event& e = (*b)[i];
            if (e.vt != vt || (e.flags & Event::kResolved)) continue;
            const void* tf = nullptr;
            std::memcpy(&tf, e.payload, sizeof tf);  // Taskflow payloads start with the owner
            if (tf == owner) resolve_locked(s, e);
        }
    }
}

void resolve_all() {
    State& s = state();
    std::lock_guard<std::mutex> g(s.mutex);
    for (auto& b : s.buffers) {
        const std::size_t n = b->count();
        for (std::size_t i = 0; i < n; ++i)
            resolve_locked(s, (*b)[i]);
    }
}

void record_edge(const TaskVTable* vt, const void* payload, std::size_t bytes) noexcept {
    Buffer* b = nullptr;
    try {
        b = this_thread();
    } catch (...) {
        return;  // no memory for a buffer: the edge is not recorded
    }
    if (!b) return;
    if (Event* e = b->reserve(Kind::edge)) {  // no time stamp: the graph does not need one
        e->vt = vt;
        std::memset(e->payload, 0, sizeof e->payload);
        std::memcpy(e->payload, payload, bytes < sizeof e->payload ? bytes : sizeof e->payload);
        b->commit();
    }
}

std::vector<Buffer*> buffers() {
    State& s = state();
    std::lock_guard<std::mutex> g(s.mutex);
    std::vector<Buffer*> out;
    for (auto& b : s.buffers)
        out.push_back(b.get());
    return out;
}

void set_counter(const std::string& name, std::uint64_t value) {
    State& s = state();
    std::lock_guard<std::mutex> g(s.mutex);
    s.counters[name] = value;
}

std::vector<std::pair<std::string, std::uint64_t>> counters() {
    State& s = state();
    std::lock_guard<std::mutex> g(s.mutex);
    return {s.counters.begin(), s.counters.end()};
}

std::vector<std::string> strings() {
    State& s = state();
    std::lock_guard<std::mutex> g(s.mutex);
    return s.strings;
}

std::uint32_t intern(const std::string& str) {
    State& s = state();
    std::lock_guard<std::mutex> g(s.mutex);
    return intern_locked(s, str);
}

StampClock stamp_clock() {
    State& s = state();
    std::int64_t tick0, ns0;
    {
        std::lock_guard<std::mutex> g(s.mutex);
        if (s.tick0 == 0) {
            s.tick0 = stamp();
            s.ns0 = now_ns();
        }
        tick0 = s.tick0;
        ns0 = s.ns0;
    }
    // A fit over at least 20 ms keeps the rate within a few parts per million.
    while (now_ns() - ns0 < 20'000'000)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const std::int64_t tick1 = stamp(), ns1 = now_ns();
    StampClock c;
    c.tick0 = tick0;
    c.ns0 = ns0;
    c.ns_per_tick =
        tick1 != tick0 ? static_cast<double>(ns1 - ns0) / static_cast<double>(tick1 - tick0) : 1.0;
    return c;
}

Buffer::Buffer(std::uint32_t id, std::string label, std::size_t capacity)
    : capacity_(capacity), id_(id), label_(std::move(label)) {
    constexpr std::size_t kHuge = std::size_t(2) << 20;
    // Bounded so the size below cannot wrap around (a wrapped size would be a small buffer
    // written as if it held `capacity` events).
    if (capacity == 0 || capacity > kMaxEventsPerThread)
        throw UsageError("trace: " + std::to_string(capacity) +
                         " events per thread (CASCADE_TRACE_EVENTS) is outside [1, " +
                         std::to_string(kMaxEventsPerThread) + "]");
    const std::size_t bytes = (capacity * sizeof(Event) + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, bytes);
    if (!p) throw std::bad_alloc();
#if defined(__linux__)
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    volatile char* c = static_cast<char*>(p);
    for (std::size_t off = 0; off < bytes; off += 4096)
        c[off] = 0;
    events_.reset(static_cast<Event*>(p));
}

void Buffer::Free::operator()(Event* p) const noexcept {
    std::free(p);
}

void set_clock_offset(std::int64_t ns) noexcept {
    state().offset.store(ns);
}
std::int64_t clock_offset() noexcept {
    return state().offset.load();
}
void set_written(bool w) noexcept {
    state().written.store(w);
}
bool written() noexcept {
    return state().written.load();
}

}  // namespace cascade::trace
