// Closures as tasks (Threadpool::insert): a trivially copyable callable that fits the task's
// payload is stored inline; any other is boxed on the heap and freed after it ran (or when
// the task is discarded).
#pragma once

#include <memory>
#include <string>

#include "cascade/core/task.hpp"

namespace cascade::detail {

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

}  // namespace cascade::detail
