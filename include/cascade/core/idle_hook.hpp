// IdleHook: how a layer above the core acts when a pool's worker finds nothing to do, without
// the core knowing it (the balancing layer asks other ranks for work then). Only the idle
// path reads it: a worker that finds tasks never looks at it.
//
//   struct AskForWork : cascade::IdleHook {
//       long on_idle(cascade::Threadpool&, int) override { send_request(); return 0; }
//   };
//   AskForWork ask;
//   tp.set_idle_hook(&ask);     // and set_idle_hook(nullptr) before `ask` goes away
#pragma once

namespace cascade {

class Threadpool;

/// What a pool's idle workers call (see the top of this file); set with
/// Threadpool::set_idle_hook. Called concurrently by several idle workers.
class IdleHook {
  public:
    virtual ~IdleHook() = default;
    /// Worker `worker` of `tp` found no task (after its short spin, before it sleeps). It may
    /// queue tasks and send messages. Returns the microseconds after which it wants to be
    /// called again if the worker stays idle; the worker then counts as busy until that call
    /// (join() waits: the hook has something left to do). 0: the worker is idle, and the
    /// hook is called again only after its next task. A worker is called once per idle
    /// stretch that follows a task (and once after set_idle_hook installs a hook), never
    /// because it woke from sleep; the pool does not count as idle until every call owed was
    /// made, so what a hook sends belongs to the epoch join() is completing.
    virtual long on_idle(Threadpool& tp, int worker) = 0;
};

}  // namespace cascade
