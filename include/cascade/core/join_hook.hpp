// JoinHook: how a layer above the core takes part in Threadpool::join() without the core
// knowing it. The communicator implements it: the thread in join() polls the hook, which
// drives MPI progress and decides, from the pool's local idleness and the distributed
// completion protocol, when join() may return.
#pragma once

#include <exception>
#include <string>

namespace cascade {

class Threadpool;

/// What a JoinHook poll found: nothing moved (idle), something moved (active), this pool has
/// no work and waits for others (waiting: the joiner naps only briefly, it disturbs no
/// worker), or join() may return (done).
enum class PollResult { idle, active, waiting, done };

/// Lets a higher layer take part in join() (see the top of this file). A pool constructed
/// with a hook, `Threadpool tp(n, &hook)`, calls `hook.attach(tp)` once, polls it from
/// join(), and calls `detach(tp)` when it is destroyed.
///
/// ```cpp
/// cascade::Communicator comm;           // a JoinHook
/// cascade::Threadpool tp(2, &comm);     // tp.join() now also waits for every rank
/// ```
class JoinHook {
  public:
    virtual ~JoinHook() = default;
    /// A pool was created with this hook (from the pool's constructor).
    virtual void attach(Threadpool& tp) = 0;
    /// Called by the thread in join(); decides whether join() may return.
    virtual PollResult poll(Threadpool& tp) = 0;
    /// Re-checked after the joiner announced it will sleep: true if it must not (work queued
    /// for the communication thread since the last poll).
    virtual bool wants_progress() const = 0;
    /// Called by the joining thread between the tasks it runs (ThreadpoolOptions::joiner_works)
    /// when wants_progress() says work waits: hands it on without a whole poll. True when
    /// nothing is left waiting (the joiner runs its next task), false to poll first (the
    /// default).
    virtual bool hand_on_queued() { return false; }
    /// How a thread outside the pool waits for the workers to take the tasks it queued (see
    /// Threadpool::push).
    enum class Waiting {
        never,    ///< not at all (the communicator: its thread inside a handler)
        driving,  ///< calling help_while_waiting() (the communicator: its thread otherwise)
        napping,  ///< sleeping (any other thread, and the default)
    };
    /// How the calling thread waits (see Waiting): a thread the workers may be waiting for
    /// must not nap.
    virtual Waiting how_to_wait() const noexcept { return Waiting::napping; }
    /// One step of what only this hook can do for the workers while the calling thread waits
    /// for them (how_to_wait() said driving); whether anything moved.
    virtual bool help_while_waiting() { return false; }
    /// The pool is being destroyed: forget it.
    virtual void detach(Threadpool& tp) noexcept = 0;
    /// For diagnostics (watchdog, errors): this process's rank (-1: none).
    virtual int rank() const noexcept { return -1; }
    /// This process's index among the processes of its node (worker pinning: pin_offset).
    virtual int node_rank() const noexcept { return 0; }
    /// For diagnostics: what this process waits for (messages in flight, completion-protocol
    /// state); empty by default.
    virtual std::string describe_state() const { return {}; }
    /// Ends the whole job (the watchdog fired): prints `what` and exits non-zero.
    [[noreturn]] virtual void abort_job(const std::string& what);
    /// Without a hook (or by default): print and _Exit(3).
    [[noreturn]] static void abort_job_default(const std::string& what);

  protected:
    /// Records an error of the hook's own (e.g. a failed message handler) for `tp`'s join()
    /// to rethrow; further queued tasks are discarded.
    static void fail(Threadpool& tp, std::exception_ptr e) noexcept;
    /// `tp` forgets its hook (the hook is going away before the pool).
    static void unhook(Threadpool& tp) noexcept;
};

}  // namespace cascade
