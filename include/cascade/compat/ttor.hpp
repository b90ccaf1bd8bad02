// TaskTorrent compatibility: code written against TaskTorrent's API compiles and runs with
// `using namespace ttor;` (or through <tasktorrent/tasktorrent.hpp>), with the same meaning:
// Communicator, Threadpool / Threadpool_shared, Taskflow<K>, active messages (small, large,
// blocking), Task and Threadpool_shared::insert(Task*, ...), Logger / DepsLogger and
// set_logger, Serializer, and the helpers (comm_rank, wctime, elapsed, ...). TaskTorrent's
// own tutorial, tests, dense Cholesky and GEMM miniapps and micro-benchmarks compile
// unchanged (tools/ttor-compat-check).
//
// One difference: a Communicator is made and destroyed by every rank of its MPI communicator
// together (Cascade duplicates the communicator), where TaskTorrent's constructor was local;
// code that makes a Communicator on some ranks only waits there.
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
#include <cstdint>
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
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cascade/cascade.hpp"
#include "cascade/compat/serializer.hpp"
#include "cascade/compat/ttor_log.hpp"

namespace ttor {

using cascade::view;

// ---- active messages --------------------------------------------------------------------

/// What every TaskTorrent active message has: an id, the same on every rank.
class ActiveMsgBase {
  public:
    virtual ~ActiveMsgBase() = default;
    /// The id (registration order) of the Cascade message underneath.
    std::size_t get_id() const { return msg().id(); }
    /// The Cascade message underneath (for Cascade's own settings, e.g. its name in traces).
    virtual cascade::ActiveMsgBase& msg() const = 0;
};

/// TaskTorrent's active message: one object for both forms. Made by make_active_msg(fun) or
/// make_large_active_msg(fun, where, complete); either way it offers
///   send(dest, ps...)                    ps travel; fun(ps...) runs on dest
///   send_large(dest, view<T> body, ps...) ps and the body (any element type T: it travels
///                                        as bytes) travel; on dest the body lands where
///                                        where(ps...) says, then fun(ps...) runs; here
///                                        complete(ps...) runs once the body may be reused
///   blocking_send, blocking_send_large   the same, returning once the message has left
///                                        (communication thread only)
/// On a message made by make_large_active_msg, send() is a send_large with an empty body:
/// where(ps...) still runs on dest and complete(ps...) here, as in TaskTorrent. On one made by
/// make_active_msg there is nowhere to put a body: send_large with an empty body is a send(),
/// with a non-empty one throws cascade::UsageError.
template <class... Ps>
class ActiveMsg : public ActiveMsgBase {
  public:
    /// (Communicator::make_active_msg makes them.)
    explicit ActiveMsg(cascade::ActiveMsg<Ps...>* small) : small_(small) {}
    /// (Communicator::make_large_active_msg makes them.)
    explicit ActiveMsg(cascade::LargeActiveMsg<char, Ps...>* large) : large_(large) {}

    /// Queues ps for rank dest (any rank, this one included). Thread-safe.
    void send(int dest, const Ps&... ps) {
        if (small_)
            small_->send(dest, ps...);
        else
            large_->send_large(dest, view<char>(), ps...);
    }
    /// Sends ps to rank dest and returns once they have left (communication thread).
    void blocking_send(int dest, const Ps&... ps) {
        if (small_)
            small_->blocking_send(dest, ps...);
        else
            large_->blocking_send_large(dest, view<char>(), ps...);
    }
    /// Queues ps and `body` for rank dest; body must stay valid until complete(ps...) ran.
    template <class T>
    void send_large(int dest, view<T> body, const Ps&... ps) {
        if (large_)
            large_->send_large(dest, bytes_of(body), ps...);
        else {
            no_body(body);
            small_->send(dest, ps...);
        }
    }
    /// send_large, returning once the header has left (communication thread); reuse the
    /// body's buffer after complete(ps...).
    template <class T>
    void blocking_send_large(int dest, view<T> body, const Ps&... ps) {
        if (large_)
            large_->blocking_send_large(dest, bytes_of(body), ps...);
        else {
            no_body(body);
            small_->blocking_send(dest, ps...);
        }
    }
    /// Cascade's broadcast: every rank in dests runs the handler once (see README).
    void send(std::span<const int> dests, const Ps&... ps) {
        if (small_)
            small_->send(dests, ps...);
        else
            large_->send_large(dests, view<char>(), ps...);
    }
    /// Cascade's broadcast of one body: every rank in dests receives it once.
    template <class T>
    void send_large(std::span<const int> dests, view<T> body, const Ps&... ps) {
        if (large_)
            large_->send_large(dests, bytes_of(body), ps...);
        else {
            no_body(body);
            small_->send(dests, ps...);
        }
    }
    cascade::ActiveMsgBase& msg() const override {
        if (small_) return *small_;
        return *large_;
    }

  private:
    template <class T>
    static view<char> bytes_of(view<T> body) {
        using E = std::remove_cv_t<T>;
        return view<char>(static_cast<char*>(static_cast<void*>(const_cast<E*>(body.data()))),
                          body.size() * sizeof(T));
    }
    template <class T>
    void no_body(view<T> body) const {
        if (body.size() != 0)
            throw cascade::UsageError(
                "ttor::ActiveMsg::send_large: a " + std::to_string(body.size() * sizeof(T)) +
                "-byte body on an active message made by make_active_msg, which has no place "
                "to put it (make it with make_large_active_msg)");
    }
    cascade::ActiveMsg<Ps...>* small_ = nullptr;
    cascade::LargeActiveMsg<char, Ps...>* large_ = nullptr;
};

/// Cascade's earlier name for an active message with a body; T is not part of the type in
/// TaskTorrent (any body element type may be sent).
template <class T, class... Ps>
using LargeActiveMsg = ActiveMsg<Ps...>;

namespace detail {
template <class Tuple>
struct msg_of;
template <class... Ps>
struct msg_of<std::tuple<Ps...>> {
    using fn = std::function<void(Ps&...)>;
};
// An integer that is not an MPI_Comm: a verbosity (Communicator comm(verb)).
template <class I>
concept verbosity = std::is_integral_v<I> && !std::is_convertible_v<I, MPI_Comm>;
// A where function returning any pointer, as one returning char*.
template <class P, class... Ps>
std::function<char*(Ps&...)> as_bytes_where(std::function<P*(Ps&...)> where) {
    return [where = std::move(where)](Ps&... ps) -> char* {
        using E = std::remove_cv_t<P>;
        return static_cast<char*>(static_cast<void*>(const_cast<E*>(where(ps...))));
    };
}
}  // namespace detail

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
    /// `Communicator comm(verb)`: MPI_COMM_WORLD with that verbosity. (Where MPI_Comm is an
    /// integer, as in MPICH, an integer is taken as the communicator, as TaskTorrent does.)
    template <detail::verbosity I>
    explicit Communicator(I verb) : Communicator(MPI_COMM_WORLD, static_cast<int>(verb)) {}

    /// Registers an active message running fun(ps...) on the receiver (a non-generic callable
    /// taking its arguments by reference). Same order on every rank; the Communicator owns it.
    template <class F>
    auto* make_active_msg(F&& fun, std::string name = "") {
        using Args = typename cascade::detail::callable_args<std::decay_t<F>>::tuple;
        return register_small(typename detail::msg_of<Args>::fn(std::forward<F>(fun)),
                              std::move(name));
    }
    /// The same from a std::function.
    template <class... Ps>
    ActiveMsg<Ps...>* make_active_msg(std::function<void(Ps&...)> fun, std::string name = "") {
        return register_small(std::move(fun), std::move(name));
    }
    /// Registers an active message with a body: where(ps...) -> T* on the receiver says where
    /// the body goes, fun(ps...) runs there once it arrived, complete(ps...) runs on the
    /// sender once the body may be reused.
    template <class F, class G, class H>
    auto* make_large_active_msg(F&& fun, G&& where, H&& complete, std::string name = "") {
        using Args = typename cascade::detail::callable_args<std::decay_t<F>>::tuple;
        using Fn = typename detail::msg_of<Args>::fn;
        using Ptr = std::invoke_result_t<decltype(std::apply<G&, Args&>), G&, Args&>;
        static_assert(std::is_pointer_v<Ptr>, "make_large_active_msg: where must return a pointer");
        return register_large(Fn(std::forward<F>(fun)),
                              detail::as_bytes_where(as_where<std::remove_pointer_t<Ptr>>(
                                  std::forward<G>(where), static_cast<Args*>(nullptr))),
                              Fn(std::forward<H>(complete)), std::move(name));
    }

    /// This rank (TaskTorrent's spelling of cascade::Communicator::rank()).
    int comm_rank() const noexcept { return rank(); }
    /// The number of ranks (TaskTorrent's spelling of cascade::Communicator::ranks()).
    int comm_size() const noexcept { return ranks(); }

    /// Waits until a message has been received and processed (TaskTorrent's blocking
    /// receive). Each call accounts for one message: the k-th call since the last progress()
    /// returns once k messages were processed, so calling it once per expected message
    /// processes them all, also when several arrive in one MPI message or a blocking_send
    /// received some while it waited.
    void recv_process() {
        auto since = std::chrono::steady_clock::now();
        while (processed() <= consumed_) {
            if (cascade::Communicator::progress())
                since = std::chrono::steady_clock::now();
            else
                check_stall("ttor::Communicator::recv_process, waiting for a message", since);
        }
        ++consumed_;
    }
    /// Moves messages (see cascade::Communicator::progress); what it processes is not waited
    /// for by a later recv_process.
    bool progress() {
        const bool moved = cascade::Communicator::progress();
        consumed_ = processed();
        return moved;
    }
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
    template <class... Ps>
    ActiveMsg<Ps...>* register_small(std::function<void(Ps&...)> fun, std::string name) {
        auto* am = cascade::Communicator::make_active_msg(std::move(fun), std::move(name));
        return keep(std::make_unique<ActiveMsg<Ps...>>(am));
    }
    template <class... Ps>
    ActiveMsg<Ps...>* register_large(std::function<void(Ps&...)> fun,
                                     std::function<char*(Ps&...)> where,
                                     std::function<void(Ps&...)> complete, std::string name) {
        auto* am = cascade::Communicator::make_large_active_msg(
            std::move(fun), std::move(where), std::move(complete), std::move(name));
        return keep(std::make_unique<ActiveMsg<Ps...>>(am));
    }
    template <class T, class G, class... Ps>
    static std::function<T*(Ps&...)> as_where(G&& where, std::tuple<Ps...>*) {
        return std::function<T*(Ps & ...)>(std::forward<G>(where));
    }
    template <class M>
    M* keep(std::unique_ptr<M> m) {
        M* raw = m.get();
        msgs_.push_back(std::move(m));
        return raw;
    }
    std::vector<std::unique_ptr<ActiveMsgBase>> msgs_;
    std::uint64_t consumed_ = 0;  // messages recv_process and progress accounted for
    Logger* logger_ = nullptr;
};

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
    /// Number of workers (TaskTorrent's spelling of cascade::Threadpool::workers()).
    int size() const noexcept { return workers(); }
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
