// join()'s side of the Communicator: each poll runs progress, then a step of the completion
// protocol (detail::Completion, completion.cpp), whose control messages travel here; at the
// end of an epoch, the buffers idle for kIdleEpochs epochs go back to the system.
#include "cascade/comm/communicator.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "cascade/core/errors.hpp"
#include "cascade/core/log.hpp"

#include "cascade/comm/detail/test_access.hpp"

#include "internal.hpp"

namespace cascade {

using namespace comm_detail;

namespace {
// poll_once with a transfer in flight and nothing moving: after kHotInFlightPolls hot polls
// (while the workers are idle), kYieldInFlightPolls yielding ones, then each one naps.
constexpr int kYieldInFlightPolls = 16;
constexpr auto kInFlightNap = std::chrono::microseconds(20);
std::atomic<std::uint64_t> g_in_flight_naps{0};  // CommTestAccess::in_flight_naps
}  // namespace

std::uint64_t detail::CommTestAccess::in_flight_naps() noexcept {
    return g_in_flight_naps.load(std::memory_order_relaxed);
}

void Communicator::trace_ctrl(int peer, const CtrlMsg& m, bool received) {
    trace::Buffer* tb = trace::this_thread();
    if (trace::Event* e = tb ? tb->reserve(trace::Kind::ctrl) : nullptr) {
        e->t0 = trace::stamp();
        e->peer = peer;
        e->a = m.type;
        e->b = received ? 1 : 0;
        e->c = m.epoch;
        tb->commit();
    }
}

void Communicator::send_ctrl(int dest, CtrlMsg m) {
    if (trace::recording()) [[unlikely]]
        trace_ctrl(dest, m, false);
    if (dest == world_.rank) {
        on_ctrl(world_.rank, m);
        return;
    }
    ++ctrl_sent_;
    const std::uint32_t slot = sends_.open();
    PendingSend& ps = sends_.at(slot);
    const std::size_t bytes = detail::ctrl_bytes(m, world_.size);
    buffers_.take_spare(ps.buf);  // a spare, if any, rather than a new buffer
    ps.buf.resize(bytes);
    std::memcpy(ps.buf.data(), &m, bytes);
    MPI_Request req;
    check_mpi(MPI_Isend(ps.buf.data(), static_cast<int>(bytes), MPI_BYTE, dest, TAG_CTRL,
                        world_.comm, &req),
              "MPI_Isend");
    ps.reqs.push_back(req);
    sends_.track(slot);
}

void Communicator::on_ctrl(int source, const CtrlMsg& m) {
    if (trace::recording()) [[unlikely]]
        trace_ctrl(source, m, true);
    if (m.type == CtrlMsg::ABORT) {  // rank `source` ends the job: leave this rank's events
        write_trace_of_rank();
        CtrlMsg ack{CtrlMsg::ABORT_ACK, completion_.epoch(), 0, 0, 0, {}};
        MPI_Send(&ack, sizeof ack, MPI_BYTE, source, TAG_CTRL, world_.comm);
        return;
    }
    if (m.type == CtrlMsg::ABORT_ACK) return;
    switch (completion_.on_ctrl(source, m)) {
        case detail::Completion::Received::taken:
        case detail::Completion::Received::later_epoch:
            return;
        case detail::Completion::Received::stale:
            if (opts_.verb > 0 || log::enabled(log::Level::debug))
                log::write(opts_.verb > 0 ? log::Level::warn : log::Level::debug,
                           "ignoring control message " + std::to_string(m.type) + " of epoch " +
                               std::to_string(m.epoch) + " (now " +
                               std::to_string(completion_.epoch()) + ")");
            return;
        case detail::Completion::Received::unknown:
            unknown_ctrl(source, m);
    }
}

void Communicator::unknown_ctrl(int source, const CtrlMsg& m) {
    abort_job("rank " + std::to_string(world_.rank) + ": unknown control message " +
              std::to_string(m.type) + " from rank " + std::to_string(source));
    std::abort();  // not reached: abort_job does not return (a virtual call, not known here)
}

// The counts per channel a COUNT carries, read at an idle time: what this rank queued for each
// rank (Outbox::seq grows with the queued count, under the outbox's lock) and the messages
// from each rank it began to run (SourceOrder). A message counts as processed once its
// handlers ran (a large one once its body is in), and each one began to run first, so when
// the totals match the queued and processed counts (they do at an idle time: no large body
// is pending), each rank's begun count is its processed count.
bool Communicator::channel_counts(std::uint64_t* sent, std::uint64_t* processed) const {
    std::uint64_t sum_sent = 0, sum_processed = 0;
    for (int r = 0; r < world_.size; ++r) {
        const auto i = static_cast<std::size_t>(r);
        {
            std::lock_guard<Spinlock> g(outbox_[i].lock);
            sent[i] = outbox_[i].seq;
        }
        processed[i] = order_.frames_from(r);
        sum_sent += sent[i];
        sum_processed += processed[i];
    }
    return sum_sent == queued() && sum_processed == counts_.processed();
}

bool Communicator::locally_idle(Threadpool& tp) const {
    // Order matters: once the pool is idle no worker can queue more, so what we read next
    // (queues, counts) is stable until this thread runs a handler. A pool that failed is idle
    // only once the other ranks were told (poll_once queues those messages at its next
    // poll): a rank that looked idle must not queue messages later without running one.
    return tp.idle() && outbox_pending_.load(std::memory_order_seq_cst) == 0 && large_.empty() &&
           pending_large_sends_ == 0 && !(tp.failed() && !job_.error_handled());
}

void Communicator::reset_epoch() {
    // Control messages of the new epoch that arrived ahead of it are taken now.
    if (const auto bad = completion_.next_epoch(queued(), counts_.processed())) [[unlikely]]
        unknown_ctrl(bad->first, bad->second);
}

// join()'s poll. Fail-stop: an exception escaping the progress engine (a failed MPI call, no
// memory) would leave this rank's workers running and the other ranks waiting; with other
// ranks the job ends here with a message, alone join() rethrows it.
PollResult Communicator::poll(Threadpool& tp) {
    job_.join_polled();
    PollResult r;
    try {
        r = poll_once(tp);
    } catch (...) {
        if (world_.size > 1)
            progress_failed("the progress engine (in join())", std::current_exception());
        fail(tp, std::current_exception());
        r = PollResult::done;
    }
    if (r == PollResult::done) {
        job_.join_done(queued(), counts_.processed());
    }
    return r;
}

PollResult Communicator::poll_once(Threadpool& tp) {
    tls_comm_thread = this;
    if (tp.failed()) [[unlikely]] {
        if (world_.size == 1) return PollResult::done;  // join() rethrows the error
        // The pool discards its tasks from now on. The others are told once (unless the
        // error came from one of them), and the epoch ends as usual: every join() throws.
        if (job_.tell_error()) tell_peers_of_error(tp.error());
    }
    const bool active = progress();
    const bool idle = locally_idle(tp);
    // The clock matters to the protocol only while this rank is idle.
    const auto now =
        idle ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (completion_.step(idle, queued(), counts_.processed(), now)) {
        // A message that ran but left work waiting for messages nobody sent was forged.
        if (std::string stranded = bcast_->stranded(); !stranded.empty())
            abort_job("rank " + std::to_string(world_.rank) + ": " + stranded);
        // Everything sent was processed somewhere. Start the next epoch now: while we finish
        // our sends below, other ranks that already got SHUTDOWN may send us control
        // messages of the next epoch, which must count there.
        // Only complete sends here: running handlers now would run messages of the next
        // epoch inside this one (ranks that finished first may have sent them already).
        reset_epoch();
        job_.epoch_ended();
        const auto since = std::chrono::steady_clock::now();
        while (sends_.live() > 0) {
            test_sends();
            if (sends_.live() > 0) {
                check_stall("join(), completing the last sends of an epoch", since);
                std::this_thread::yield();
            }
        }
        // Buffers idle for kIdleEpochs epochs go; counted once the epoch's sends completed
        // (an epoch can end while they are in flight, their buffers not yet back).
        buffers_.epoch_ended(outbox_.get());
        return PollResult::done;
    }
    // Transfers in flight need progress calls to move (rendezvous protocols): keep polling.
    // While this rank's workers are idle, hot for kHotInFlightPolls quiet polls (a transfer
    // of a few KiB ends within microseconds, and a yield's system call would sit in its
    // path), then yielding for kYieldInFlightPolls more: that leaves the core to busy
    // workers, or to ranks sharing it. A transfer still in flight after that waits for its
    // peer (a receive not posted yet, a busy or descheduled rank): then each quiet poll naps
    // kInFlightNap, off the run queue, instead of yielding again and again (a yield loop
    // keeps this thread runnable and takes the cores from the threads of the other ranks
    // on the same machine, the peer's included).
    const bool in_flight = !large_.empty() || pending_large_sends_ > 0;
    if (!active && in_flight) {
        if (tp.idle() && quiet_in_flight_ < kHotInFlightPolls) {
            ++quiet_in_flight_;
        } else if (quiet_in_flight_ < kHotInFlightPolls + kYieldInFlightPolls) {
            quiet_in_flight_ =
                static_cast<std::uint8_t>(std::max<int>(quiet_in_flight_, kHotInFlightPolls) + 1);
            std::this_thread::yield();
        } else {
            g_in_flight_naps.fetch_add(1, std::memory_order_relaxed);
            std::this_thread::sleep_for(kInFlightNap);
        }
    } else {
        quiet_in_flight_ = 0;
    }
    if (active || in_flight) return PollResult::active;
    return idle ? PollResult::waiting : PollResult::idle;
}

}  // namespace cascade
