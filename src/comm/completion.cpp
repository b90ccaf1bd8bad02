// Distributed completion detection: TaskTorrent's COUNT / REQUEST / CONFIRMATION / SHUTDOWN
// protocol, one epoch per join(). docs/completion.md states the protocol and why it is
// correct; this file follows its steps.
#include "cascade/comm/communicator.hpp"
#include "cascade/core/log.hpp"

#include <algorithm>
#include <iostream>
#include <string>
#include <thread>

#include "cascade/core/errors.hpp"

#include "internal.hpp"

namespace cascade {

using namespace comm_detail;

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
    if (dest == rank_) {
        on_ctrl(rank_, m);
        return;
    }
    PendingSend ps;
    ps.buf.resize(sizeof m);
    std::memcpy(ps.buf.data(), &m, sizeof m);
    MPI_Request req;
    check_mpi(MPI_Isend(ps.buf.data(), sizeof m, MPI_BYTE, dest, TAG_CTRL, comm_, &req),
              "MPI_Isend");
    ps.reqs.push_back(req);
    track_send(std::move(ps));
}

void Communicator::on_ctrl(int source, const CtrlMsg& m) {
    if (trace::recording()) [[unlikely]]
        trace_ctrl(source, m, true);
    if (m.type == ABORT) {  // rank `source` ends the job: leave this rank's events on disk
        write_trace_of_rank();
        CtrlMsg ack{ABORT_ACK, epoch_, 0, 0, 0};
        MPI_Send(&ack, sizeof ack, MPI_BYTE, source, TAG_CTRL, comm_);
        return;
    }
    if (m.type == ABORT_ACK) return;
    if (m.epoch != epoch_) {
        // A message of a later epoch (its sender finished this one first) is kept for then;
        // one of an earlier epoch cannot matter any more.
        if (static_cast<std::int32_t>(m.epoch - epoch_) > 0) {
            early_ctrl_.emplace_back(source, m);
        } else if (opts_.verb > 0 || log::enabled(log::Level::debug)) {
            log::write(opts_.verb > 0 ? log::Level::warn : log::Level::debug,
                       "ignoring control message " + std::to_string(m.type) + " of epoch " +
                           std::to_string(m.epoch) + " (now " + std::to_string(epoch_) + ")");
        }
        return;
    }
    switch (m.type) {
        case COUNT:  // rank 0: latest counts of `source`; counts only grow
            if (!reported_[source]) {
                reported_[source] = true;
                ++n_reported_;
            }
            cnt_q_[source] = std::max(cnt_q_[source], m.a);
            cnt_p_[source] = std::max(cnt_p_[source], m.b);
            counts_changed_ = true;
            break;
        case REQUEST:  // keep only the latest
            if (m.c > req_tag_) {
                have_request_ = true;
                req_q_ = m.a;
                req_p_ = m.b;
                req_tag_ = m.c;
            }
            break;
        case CONFIRM:
            confirmed_[source] = std::max(confirmed_[source], m.a);
            break;
        case SHUTDOWN:
            shutdown_ = true;
            break;
        default:
            abort_job("rank " + std::to_string(rank_) + ": unknown control message " +
                      std::to_string(m.type) + " from rank " + std::to_string(source));
    }
}

bool Communicator::locally_idle(Threadpool& tp) const {
    // Order matters: once the pool is idle no worker can queue more, so what we read next
    // (queues, counts) is stable until this thread runs a handler.
    return tp.idle() && outbox_pending_.load(std::memory_order_seq_cst) == 0 &&
           large_recvs_.empty() && big_recvs_.empty() && pending_large_sends_ == 0;
}

bool Communicator::completion_step(Threadpool& tp) {
    const bool idle = locally_idle(tp);
    const auto now = std::chrono::steady_clock::now();
    if (!idle) {
        idle_since_.reset();
    } else if (!idle_since_) {
        idle_since_ = now;
    }
    if (idle) {
        const std::uint64_t q = queued(), p = processed_;
        // Step 1: report changed counts to rank 0: the first time in this epoch at once (an
        // epoch with little work ends a round trip sooner), later ones once the rank has
        // stayed idle a moment, so that short gaps between tasks do not flood rank 0.
        const bool first = last_q_ == ~0ull;
        if ((q != last_q_ || p != last_p_) && (first || now - *idle_since_ >= count_delay_)) {
            // Each further COUNT in this epoch means the last one was premature: wait
            // longer next time (a busy application idles briefly and often).
            if (!first)
                count_delay_ =
                    std::min<std::chrono::steady_clock::duration>(count_delay_ * 2, kMaxCountDelay);
            last_q_ = q;
            last_p_ = p;
            send_ctrl(0, CtrlMsg{COUNT, epoch_, q, p, 0});
        }
        if (have_request_ && q == req_q_ && p == req_p_) {  // step 3: unchanged since t-
            have_request_ = false;
            send_ctrl(0, CtrlMsg{CONFIRM, epoch_, req_tag_, 0, 0});
        }
    }
    if (rank_ == 0 && !shutdown_) {
        if (n_reported_ == size_ && counts_changed_) {  // step 2: balanced counts -> REQUEST
            std::uint64_t sq = 0, sp = 0;
            for (int r = 0; r < size_; ++r) {
                sq += cnt_q_[r];
                sp += cnt_p_[r];
            }
            if (sq == sp) {
                counts_changed_ = false;
                ++tag_;
                for (int r = 0; r < size_; ++r)
                    send_ctrl(r, CtrlMsg{REQUEST, epoch_, cnt_q_[r], cnt_p_[r], tag_});
            }
        }
        if (tag_ > 0 && !counts_changed_ &&
            std::all_of(confirmed_.begin(), confirmed_.end(),
                        [&](std::uint64_t t) { return t == tag_; })) {  // step 4: SHUTDOWN
            for (int r = 1; r < size_; ++r)
                send_ctrl(r, CtrlMsg{SHUTDOWN, epoch_, 0, 0, 0});
            shutdown_ = true;
        }
    }
    return shutdown_;
}

void Communicator::release_idle_buffers() {
    // A counter is reset while its epoch uses the buffer, so that epoch's end counts 1: the
    // buffer goes once kIdleEpochs epochs after it ended without using it.
    constexpr int kIdleEpochs = 2;
    // (x = {} would keep the capacity: it assigns an empty initializer list.)
    if (big_spare_.capacity() && ++big_spare_idle_epochs_ > kIdleEpochs)
        detail::Bytes().swap(big_spare_);
    if (recv_buf_.capacity() > kKeptRecvBuffer && ++recv_buf_idle_epochs_ > kIdleEpochs)
        detail::Bytes().swap(recv_buf_);
    for (std::size_t i = 0; i < big_outboxes_.size();) {
        Outbox& o = outbox_[big_outboxes_[i]];
        if (++o.big_idle_epochs <= kIdleEpochs) {
            ++i;
            continue;
        }
        detail::Bytes old;  // freed after the lock is released
        {
            std::lock_guard<Spinlock> g(o.lock);
            if (o.buf.empty()) std::swap(old, o.buf);  // else its frames leave at the next flush
        }
        o.big_idle_epochs = -1;
        big_outboxes_[i] = big_outboxes_.back();
        big_outboxes_.pop_back();
    }
}

void Communicator::reset_epoch() {
    release_idle_buffers();
    ++epoch_;
    idle_since_.reset();
    count_delay_ = kFirstCountDelay;
    last_q_ = last_p_ = ~0ull;
    have_request_ = false;
    shutdown_ = false;
    if (rank_ == 0) {
        std::fill(reported_.begin(), reported_.end(), false);
        n_reported_ = 0;
        counts_changed_ = false;
        std::fill(confirmed_.begin(), confirmed_.end(), 0);
    }
    std::vector<std::pair<int, CtrlMsg>> early;  // replay what arrived ahead of this epoch
    early.swap(early_ctrl_);
    for (auto& [source, m] : early)
        on_ctrl(source, m);
}

// join()'s poll. Fail-stop: an exception escaping the progress engine (a failed MPI call, no
// memory) would leave this rank's workers running and the other ranks waiting; with other
// ranks the job ends here with a message, alone join() rethrows it.
PollResult Communicator::poll(Threadpool& tp) {
    joining_.store(true, std::memory_order_relaxed);
    PollResult r;
    try {
        r = poll_once(tp);
    } catch (...) {
        if (size_ > 1) progress_failed("the progress engine (in join())", std::current_exception());
        fail(tp, std::current_exception());
        r = PollResult::done;
    }
    if (r == PollResult::done) {
        joining_.store(false, std::memory_order_relaxed);
        ++joins_done_;
        settled_q_ = queued();
        settled_p_ = processed_;
    }
    return r;
}

PollResult Communicator::poll_once(Threadpool& tp) {
    tls_comm_thread = this;
    if (tp.failed()) [[unlikely]] {
        if (size_ == 1) return PollResult::done;  // join() rethrows the error
        // The pool discards its tasks from now on. The others are told once (unless the
        // error came from one of them), and the epoch ends as usual: every join() throws.
        if (!error_told_) {
            error_told_ = true;
            if (!error_from_peer_) tell_peers_of_error(tp.error());
        }
    }
    const bool active = progress();
    if (completion_step(tp)) {
        // A message that ran but left work waiting for messages nobody sent was forged.
        if (std::string stranded = bcast_->stranded(); !stranded.empty())
            abort_job("rank " + std::to_string(rank_) + ": " + stranded);
        // Everything sent was processed somewhere. Start the next epoch now: while we finish
        // our sends below, other ranks that already got SHUTDOWN may send us control
        // messages of the next epoch, which must count there.
        // Only complete sends here: running handlers now would run messages of the next
        // epoch inside this one (ranks that finished first may have sent them already).
        reset_epoch();
        last_join_failed_ = error_told_ || error_from_peer_;
        error_told_ = false;
        error_from_peer_ = false;
        const auto since = std::chrono::steady_clock::now();
        while (live_sends_ > 0) {
            test_sends();
            if (live_sends_ > 0) {
                check_stall("join(), completing the last sends of an epoch", since);
                std::this_thread::yield();
            }
        }
        return PollResult::done;
    }
    // Transfers in flight need progress calls to move (rendezvous protocols): keep polling.
    // While this rank's workers are idle, hot for kHotInFlightPolls quiet polls (a transfer
    // of a few KiB ends within microseconds, and a yield's system call would sit in its
    // path), then yielding: that leaves the core to busy workers, or to ranks sharing it.
    const bool in_flight = !large_recvs_.empty() || !big_recvs_.empty() || pending_large_sends_ > 0;
    if (!active && in_flight) {
        if (!tp.idle() || quiet_in_flight_ == kHotInFlightPolls)
            std::this_thread::yield();
        else
            ++quiet_in_flight_;
    } else {
        quiet_in_flight_ = 0;
    }
    if (active || in_flight) return PollResult::active;
    return locally_idle(tp) ? PollResult::waiting : PollResult::idle;
}

}  // namespace cascade
