// to_future(t): a device task's completion as a cascade::future<void>, so that device work
// composes with the futures layer: then(), when_all() beside async() results, get() on a pool
// worker (which runs other tasks while it waits), a continuation that fulfils a Taskflow
// promise.
//
// The device layer sits on the core alone and has no MPI (the machines with a GPU may have
// none); futures sit on the communicator. Neither layer moves: this header is the one file of
// the futures layer that may include the device layer (tools/check-layers names it), and it is
// header-only, so neither library links the other. A program that includes it links both
// Cascade::device and the futures layer (Cascade::cascade).
//
// How: the device task's on_done() continuation (a pool task, run whether the device task
// failed or not) sets a promise<void> with the task's exception or without one. A thread never
// waits on the device for it: the device runtime polls the device, and the continuation runs
// as an ordinary pool task when the task finished.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "cascade/core/errors.hpp"
#include "cascade/core/threadpool.hpp"
#include "cascade/device/task.hpp"
#include "cascade/futures/futures.hpp"

namespace cascade {

/// A future<void> of device task `t`: ready once `t` finished; get() rethrows `t`'s exception
/// if it failed. Each call makes a new future (a future has one reader). The current
/// `Futures` must run over the pool of `t`'s `Devices` (its continuations run there, and a
/// worker of that pool that calls get() runs other tasks while it waits); otherwise, and for
/// an empty or an unsubmitted task, it throws UsageError.
///
/// ```cpp
/// cascade::Threadpool tp(2);
/// cascade::Futures fx(tp);
/// cascade::Devices devs(tp, {.sim = 1});
/// cascade::DeviceTask t = devs.submit(kernel, cascade::readwrite(y), n,
///                                     cascade::Launch{.threads = {n}});
/// auto both = cascade::when_all(cascade::to_future(t), cascade::async(cascade::here, f));
/// cascade::to_future(t).then([&] { tf.fulfill_promise(k); });  // feeds a task graph
/// ```
inline future<void> to_future(const DeviceTask& t) {
    if (!t.valid()) throw UsageError("to_future(): an empty DeviceTask");
    Futures* fx = Futures::current();
    if (!fx || &fx->pool() != &t.pool())
        throw UsageError("to_future(): device task '" + t.name() + "' needs a cascade::Futures " +
                         (fx ? "over the pool of its Devices (the current one runs on another "
                               "pool)"
                             : "over the pool of its Devices (none exists: construct "
                               "cascade::Futures fx(tp))"));
    auto p = std::make_shared<promise<void>>();
    future<void> f = p->get_future();
    // Throws UsageError for a task that was prepared but not submitted (p then breaks, unread).
    t.on_done([p](std::exception_ptr e) {
        if (e)
            p->set_exception(std::move(e));
        else
            p->set_value();
    });
    return f;
}

}  // namespace cascade
