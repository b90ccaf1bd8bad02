// Task: the unit the Threadpool schedules. A Task is a 64-byte value (no heap allocation):
// a pointer to a small static table of functions and an inline payload that the producer
// (a Taskflow, or Threadpool::insert for closures) fills and interprets.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

namespace cascade {

struct Task;

/// Per-kind behaviour of a task, shared by all tasks of that kind (one static instance).
struct TaskVTable {
    void (*run)(Task&);                    ///< Executes the task (may throw).
    std::string (*describe)(const Task&);  ///< A human-readable name for diagnostics.
    void (*discard)(Task&);                ///< Releases the payload without running (may be null).
};

/// A task as the pool queues it: 64 bytes, no allocation. Producers define a kind (a static
/// TaskVTable) and fill the payload; most code uses Taskflow or Threadpool::insert instead.
///
/// ```cpp
/// struct Hello {
///     int n;
///     static void run(cascade::Task& t) { std::printf("hello %d\n", t.as<Hello>().n); }
///     static std::string describe(const cascade::Task&) { return "hello"; }
///     static constexpr cascade::TaskVTable vtable{&run, &describe, nullptr};
/// };
/// cascade::Task t;
/// t.vt = &Hello::vtable;
/// t.emplace<Hello>(Hello{42});
/// tp.push(t, 0, false);  // worker 0, stealable
/// ```
struct alignas(64) Task {
    /// Bytes of inline payload.
    static constexpr std::size_t payload_size = 48;

    /// The task's kind: what runs, describes and discards it.
    const TaskVTable* vt = nullptr;
    /// Scheduling priority: higher runs first among a worker's ready tasks.
    double priority = 0;
    /// The producer's data (see emplace / as).
    alignas(8) unsigned char payload[payload_size];

    /// Runs it (may throw).
    void run() { vt->run(*this); }
    /// Its name for diagnostics ("<task>" if its kind has no describe).
    std::string describe() const { return vt->describe ? vt->describe(*this) : "<task>"; }
    /// Releases it without running (a queued task that will never run).
    void discard() {
        if (vt->discard) vt->discard(*this);
    }

    /// Payload access: the payload holds a T constructed in place. T must be trivially
    /// destructible and relocatable by memcpy (tasks move by value inside ready queues).
    template <class T>
    static constexpr bool fits_inline = sizeof(T) <= payload_size &&
                                        alignof(T) <= 8 && std::is_trivially_destructible_v<T>;

    /// Constructs a T from `args` in the payload; returns it.
    template <class T, class... Args>
    T& emplace(Args&&... args) {
        static_assert(fits_inline<T>, "payload type too large or not trivially destructible");
        return *::new (static_cast<void*>(payload)) T(std::forward<Args>(args)...);
    }
    /// The T constructed in the payload by emplace.
    template <class T>
    T& as() noexcept {
        return *std::launder(reinterpret_cast<T*>(payload));
    }
    /// The T constructed in the payload by emplace (read-only).
    template <class T>
    const T& as() const noexcept {
        return *std::launder(reinterpret_cast<const T*>(payload));
    }
};
static_assert(sizeof(Task) == 64, "Task should fill one cache line");

}  // namespace cascade
