// The Communicator's life cycle (MPI set-up and shutdown, registry of active messages,
// pre-posted receives) and its progress engine; the send path is in send.cpp, the receive
// path in receive.cpp, completion detection in completion.cpp.
#include "cascade/comm/communicator.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

#include "cascade/comm/detail/trace_gather.hpp"
#include "cascade/comm/device_support.hpp"
#include "cascade/comm/node.hpp"
#include "cascade/core/detail/watchdog.hpp"
#include "cascade/core/errors.hpp"
#include "cascade/core/log.hpp"
#include "cascade/core/settings.hpp"
#include "cascade/trace/export.hpp"

#include "internal.hpp"

namespace cascade {

using namespace comm_detail;

namespace comm_detail {
thread_local const Communicator* tls_comm_thread = nullptr;
}  // namespace comm_detail

namespace {
const char* thread_level_name(int level) {
    switch (level) {
        case MPI_THREAD_SINGLE:
            return "MPI_THREAD_SINGLE";
        case MPI_THREAD_FUNNELED:
            return "MPI_THREAD_FUNNELED";
        case MPI_THREAD_SERIALIZED:
            return "MPI_THREAD_SERIALIZED";
        case MPI_THREAD_MULTIPLE:
            return "MPI_THREAD_MULTIPLE";
        default:
            return "an unknown thread level";
    }
}
}  // namespace

Communicator::Communicator(MPI_Comm comm, CommunicatorOptions opts) : opts_(opts) {
    world_.open(comm, opts_.thread_level);
    {
        int world_rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
        log::set_rank(world_rank);
    }
    // Whoever initialized MPI, the thread in join() calls it while workers run: Cascade needs
    // at least MPI_THREAD_FUNNELED (the level it asks for when it initializes MPI itself).
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_FUNNELED)
        log::warn(std::string("MPI provides ") + thread_level_name(provided) +
                  ", Cascade needs at least MPI_THREAD_FUNNELED (the thread in join() calls MPI "
                  "while workers run); initialize MPI with MPI_Init_thread(..., " +
                  thread_level_name(opts_.thread_level) + ", ...) or let Communicator do it");
    completion_ = detail::Completion(
        world_.rank, world_.size,
        [](void* self, int dest, const CtrlMsg& m) {
            static_cast<Communicator*>(self)->send_ctrl(dest, m);
        },
        this,
        [](void* self, std::uint64_t* sent, std::uint64_t* processed) {
            return static_cast<Communicator*>(self)->channel_counts(sent, processed);
        });
    outbox_.reset(new Outbox[world_.size]);
    order_.reset(world_.size);
    tls_comm_thread = this;
    detail::trace_start(world_.comm);  // collective: every rank follows rank 0's CASCADE_TRACE
    slots_.post_all(world_.comm);
    bcast_ = comm_detail::make_broadcasts(*this);  // reads CASCADE_BCAST
    // An error of a task or handler of one rank, told to the others (poll_once).
    error_am_ = make_active_msg(
        [this](int& rank, int& thread, std::string& task, std::string& what) {
            on_peer_error(rank, thread, std::move(task), std::move(what));
        },
        "cascade.error");
    error_am_->set_broadcast_detection(false);
    if (opts_.broadcast_detection) bcast_->set_detection(*opts_.broadcast_detection);
}

Communicator::~Communicator() {
    if (tp_) unhook(*tp_);
    // An exception unwound past this rank's pool (or is unwinding now): the other ranks wait
    // in join() for this one, and MPI_Finalize would wait for them. End the job instead;
    // unless the exception is the error every rank's last join() threw (and nothing moved
    // since): every rank is in the same place, and the communicator ends as usual.
    const bool after_job_error = job_.after_job_error(queued(), counts_.processed());
    if (world_.size > 1 &&
        (job_.abandoned() || (std::uncaught_exceptions() > 0 && !after_job_error)))
        abort_job("rank " + std::to_string(world_.rank) +
                  (job_.abandoned()
                       ? ": an exception unwound past this rank's Threadpool before its "
                         "join() finished"
                       : ": the Communicator is destroyed by an exception") +
                  "; the other ranks would wait for this one forever, so the job ends here");
    // Complete what is in flight so MPI can shut down cleanly (a peer that never receives it
    // is the watchdog's).
    const auto since = std::chrono::steady_clock::now();
    {
        std::vector<MPI_Request>& reqs = sends_.requests();
        int done = reqs.empty();
        while (!done) {
            if (MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done,
                            MPI_STATUSES_IGNORE) != MPI_SUCCESS)
                break;
            if (!done) {
                check_stall("~Communicator, completing sends", since);
                std::this_thread::yield();
            }
        }
    }
    large_.cancel_all();
    // A posted receive that got a message instead of being cancelled holds active messages
    // sent after this rank's last join(): nobody will run them, so say so.
    const int unrun = slots_.cancel_all();
    if (unrun > 0)
        log::warn(std::to_string(unrun) +
                  " message(s) of active messages arrived after this rank's last join() and "
                  "were not run (sent after the ranks' last join()?)");
    if (trace::recording() && world_.comm != MPI_COMM_NULL && !std::uncaught_exceptions()) {
        try {  // collective: rank 0 gathers every rank's events and writes the files
            std::vector<std::string> names;
            for (auto& am : ams_)
                names.push_back(am->name());
            const BroadcastStats b = bcast_->stats();
            trace::set_counter("broadcast.broadcasts", b.broadcasts);
            trace::set_counter("broadcast.detected", b.detected);
            trace::set_counter("broadcast.detected_sends", b.detected_sends);
            trace::set_counter("broadcast.recipients", b.recipients);
            trace::set_counter("broadcast.root_messages", b.root_messages);
            trace::set_counter("broadcast.forwarded", b.forwarded);
            trace::set_counter("broadcast.bodies_received", b.bodies_received);
            detail::trace_finish(world_.comm, names);
        } catch (const std::exception& e) {
            log::error(std::string("trace: could not write the trace: ") + e.what());
        }
    }
    if (tls_comm_thread == this) tls_comm_thread = nullptr;
    world_.close();
}

std::string Communicator::processor_name() const {
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    return std::string(name, static_cast<std::size_t>(len));
}

bool Communicator::on_comm_thread() const noexcept {
    return tls_comm_thread == this;
}

ActiveMsgBase* Communicator::register_am(std::unique_ptr<ActiveMsgBase> am, std::string name) {
    am->comm_ = this;
    am->id_ = static_cast<std::uint32_t>(ams_.size());
    am->name_ = name.empty() ? "am#" + std::to_string(am->id_) : std::move(name);
    // Name and types: two AMs of the same types registered in different orders are told
    // apart too.
    am->sig_ = wire::signature_of(am->name_, am->types()) ^ (am->is_large() ? 0x9e3779b9u : 0u);
    ams_.push_back(std::move(am));
    return ams_.back().get();
}

bool Communicator::progress() {
    detail::run_task_epilogue();  // sends a handler held back (broadcast detection) leave first
    const bool was = on_comm_thread();
    tls_comm_thread = this;
    const std::int64_t t0 = trace::recording() ? trace::stamp() : 0;
    const std::uint64_t before = counts_.moved();
    const std::size_t sends_before = sends_.live();
    struct Depth {
        detail::SourceOrder& o;
        explicit Depth(detail::SourceOrder& x) : o(x) { o.enter_progress(); }
        ~Depth() { o.leave_progress(); }
    } depth(order_);
    if (progress_fault_) [[unlikely]]
        progress_fault_();
    if (outbox_pending_.load(std::memory_order_acquire) != 0) flush();
    // Receives first: their test drives MPI's progress engine, after which the sends just
    // handed to MPI are often complete, and testing them needs no second pass of it.
    bool any = receive();
    if (sends_.live() != 0) test_sends();
    if (!large_.empty()) {
        any |= test_big_recvs();
        if (test_large_recvs()) {
            any = true;
            flush();  // what their handlers sent leaves now, not one poll later
        }
    }
    any |= run_after_progress();
    if (!was) tls_comm_thread = nullptr;
    any = any || counts_.moved() != before || sends_.live() != sends_before;
    if (t0 != 0 && any) [[unlikely]] {
        trace::mark_progress_thread();
        if (trace::Buffer* tb = trace::this_thread()) tb->slice(trace::Kind::progress, t0);
    }
    return any;
}

bool Communicator::run_after_progress() {
    if (after_.empty() || order_.handler_running()) return false;
    // Again while one of them did something: work it ran may have left work for a function
    // called before it (a remote call run here that invokes an object), which must not wait
    // past this progress() call.
    const bool ran = after_.call_until_quiet();
    // What they queued (replies, typically) leaves now, not one poll later.
    if (ran) flush();
    return ran;
}

bool Communicator::add_after_progress(AfterProgress fn, void* ctx) noexcept {
    return after_.add(fn, ctx);
}

void Communicator::remove_after_progress(AfterProgress fn, void* ctx) noexcept {
    after_.remove(fn, ctx);
}

bool Communicator::has_after_progress(AfterProgress fn, void* ctx) const noexcept {
    return after_.contains(fn, ctx);
}

// A task or handler failed on this rank (the pool failed): every other rank's pool fails
// with the same error, so that every join() of this epoch throws it and returns normally.
void Communicator::tell_peers_of_error(std::exception_ptr e) {
    std::string task, what = detail::describe_error(e);
    int thread = -1, rank = world_.rank;
    try {
        std::rethrow_exception(e);
    } catch (const TaskError& te) {
        task = te.task();
        thread = te.thread();
        if (te.rank() >= 0) rank = te.rank();
        what = te.what();
    } catch (...) {
    }
    if (what.rfind("rank ", 0) != 0) what = "rank " + std::to_string(rank) + ": " + what;
    for (int r = 0; r < world_.size; ++r)
        if (r != world_.rank) error_am_->send_now(r, rank, thread, task, what);
}

void Communicator::on_peer_error(int rank, int thread, std::string task, std::string what) {
    if (rank < 0 || rank >= world_.size || rank != detail::tls_frame_source)
        throw WireError("an error report for rank " + std::to_string(rank));
    job_.error_from_peer();
    if (!tp_) return;
    auto original = std::make_exception_ptr(std::runtime_error(what));
    fail(*tp_, std::make_exception_ptr(TaskError::reported(std::move(what), std::move(task), thread,
                                                           rank, std::move(original))));
}

void Communicator::fail_pool(std::exception_ptr e) noexcept {
    if (!tp_) abort_job("rank " + std::to_string(world_.rank) + ": " + detail::describe_error(e));
    fail(*tp_, std::move(e));
}

bool Communicator::is_done() const {
    return outbox_pending_.load(std::memory_order_acquire) == 0 && sends_.live() == 0 &&
           large_.empty();
}

bool Communicator::wants_progress() const {
    return outbox_pending_.load(std::memory_order_seq_cst) != 0;
}

bool Communicator::hand_on_queued() {
    if (!on_comm_thread() || order_.handler_running()) return false;
    flush();
    return outbox_pending_.load(std::memory_order_seq_cst) == 0;
}

void Communicator::handler_failed(const ActiveMsgBase& am, int source, std::exception_ptr e,
                                  const char* which) {
    std::string task =
        "'" + am.name() + "' (" + which + ", from rank " + std::to_string(source) + ")";
    std::string msg = "rank " + std::to_string(world_.rank) + ": active message " + task +
                      " threw: " + detail::describe_error(e);
    if (!tp_) abort_job(msg);
    // Like a task's error: join() throws it here, and on every other rank (poll_once).
    fail(*tp_, std::make_exception_ptr(TaskError::reported(std::move(msg), std::move(task), -1,
                                                           world_.rank, std::move(e))));
}

void Communicator::attach(Threadpool& tp) {
    tp_ = &tp;  // the pool's constructor made this its hook
    if (log::enabled(log::Level::info)) banner(tp);
}

// One line per rank at CASCADE_LOG=info, when a pool attaches: where the rank runs, its
// workers, the MPI it uses and the settings given in the environment.
void Communicator::banner(const Threadpool& tp) const {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(lib, &len);
    std::string mpi(lib, static_cast<std::size_t>(std::max(0, len)));
    mpi = mpi.substr(0, mpi.find_first_of("\n,"));
    int provided = 0;
    MPI_Query_thread(&provided);
    std::string set;
    for (const settings::Variable& v : settings::variables())
        if (const auto value = settings::raw(v.name)) {
            if (!set.empty()) set += ' ';
            set.append(v.name).append("=").append(*value);
        }
    log::info("host " + processor_name() + " (node rank " + std::to_string(world_.node_rank) +
              " of " + std::to_string(world_.node_ranks) + "), " + std::to_string(world_.size) +
              " ranks; pool '" + tp.name() + "': " + tp.placement() + "; " + mpi + ", " +
              thread_level_name(provided) + " (device memory: " + mpi_device_support().why +
              "); settings: " + (set.empty() ? "defaults" : set));
}

void Communicator::detach(Threadpool& tp) noexcept {
    if (tp_ != &tp) return;
    tp_ = nullptr;
    // Destroyed while an exception unwinds, with work this rank never finished a join() for
    // (or none at all yet): the other ranks may be waiting for it in theirs.
    if (std::uncaught_exceptions() > 0 && !job_.settled(queued(), counts_.processed()))
        job_.abandon();
}

void Communicator::sent_from_outside(const ActiveMsgBase& am) {
    const std::string msg =
        "rank " + std::to_string(world_.rank) + ": active message '" + am.name() +
        "' sent from a thread outside the pool while join() runs; the completion protocol "
        "counts only messages sent by tasks, handlers and the thread in join() (a later one "
        "could arrive after every rank agreed that all was done): send from a task, or before "
        "join() / after it returns";
    fail(*tp_, std::make_exception_ptr(UsageError(msg)));
    throw UsageError(msg);
}

void Communicator::progress_failed(const char* where, std::exception_ptr e) {
    Communicator::abort_job("rank " + std::to_string(world_.rank) + ": " + where +
                            " failed: " + detail::describe_error(e));
}

std::string Communicator::describe_state() const {
    std::ostringstream os;
    os << "messages: " << queued() << " active messages queued here, " << counts_.processed()
       << " processed here; " << outbox_pending_.load() << " destination(s) with unsent messages, "
       << sends_.live() << " MPI send(s) in flight, " << large_.bodies() << " large bod(ies) and "
       << large_.big_messages() << " big message(s) being received";
    // Sends held behind a broadcast's fence until the rank it reached through another rank
    // acknowledges it.
    bool any_fence = false;
    for (int d = 0; d < world_.size; ++d)
        if (const int f = outbox_[static_cast<std::size_t>(d)].fences.load(); f > 0) {
            os << (any_fence ? ", " : "; held for acknowledgements of broadcasts: ") << "rank " << d
               << " (" << f << ")";
            any_fence = true;
        }
    if (bcast_)
        if (const std::string w = bcast_->describe_waits(); !w.empty()) os << "; " << w;
    os << "; completion: " << completion_.describe();
    return os.str();
}

void Communicator::abort_job(const std::string& what) {
    log::error("fatal: " + what);
    if (trace::recording() && world_.comm != MPI_COMM_NULL) {
        // What led here stays on disk: this rank's events, and those of every rank that
        // answers in time (they write theirs when told, see on_ctrl).
        write_trace_of_rank();
        if (on_comm_thread()) tell_peers_of_abort();
    }
    // The launcher forwards what this rank printed through a pipe, and may kill the job
    // before reading it: leave it a moment. Then MPI_COMM_WORLD: aborting our duplicate of it
    // can hang (MPICH) when the other ranks have already entered MPI_Finalize.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();
}

void Communicator::check_stall(const char* what, std::chrono::steady_clock::time_point since) {
    const double limit = detail::watchdog_limit_from_env();
    if (limit <= 0) return;
    const double quiet =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
    if (quiet < limit) return;
    abort_job("rank " + std::to_string(world_.rank) + ": watchdog: " + what +
              " made no progress for " + std::to_string(static_cast<long>(quiet)) +
              " s (CASCADE_WATCHDOG=" + std::to_string(static_cast<long>(limit)) + "); " +
              describe_state());
}

std::vector<std::string> Communicator::am_names() const {
    std::vector<std::string> names;
    for (auto& am : ams_)
        names.push_back(am->name());
    return names;
}

void Communicator::write_trace_of_rank() noexcept {
    if (!job_.first_trace_write()) return;
    try {
        trace::write_rank(world_.rank, am_names());
    } catch (...) {
    }
}

// Sends ABORT to every other rank and waits (at most kAbortWait) for their ABORT_ACK, which
// they send after writing their events.
void Communicator::tell_peers_of_abort() noexcept {
    std::vector<CtrlMsg> msgs(static_cast<std::size_t>(world_.size),
                              CtrlMsg{CtrlMsg::ABORT, completion_.epoch(), 0, 0, 0, {}});
    std::vector<MPI_Request> reqs;
    for (int r = 0; r < world_.size; ++r) {
        if (r == world_.rank) continue;
        MPI_Request q;
        if (MPI_Isend(&msgs[static_cast<std::size_t>(r)], sizeof(CtrlMsg), MPI_BYTE, r, TAG_CTRL,
                      world_.comm, &q) == MPI_SUCCESS)
            reqs.push_back(q);
    }
    int acks = 0;
    const auto end = std::chrono::steady_clock::now() + kAbortWait;
    while (acks < world_.size - 1 && std::chrono::steady_clock::now() < end) {
        CtrlMsg m{};
        MPI_Status st;
        bool got = false;
        try {
            got = slots_.test_ctrl(world_.comm, m, st);
        } catch (...) {
            break;
        }
        if (!got) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
        }
        if (m.type == CtrlMsg::ABORT_ACK) ++acks;
    }
    for (auto& q : reqs) {  // whatever was not delivered stays behind (MPI_Abort follows)
        int done = 0;
        MPI_Test(&q, &done, MPI_STATUS_IGNORE);
    }
}

}  // namespace cascade
