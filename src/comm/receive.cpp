// The receive path: pre-posted receives tested in order, frames decoded and run (one
// rank's messages in the order sent, also under nested progress), big messages and large
// bodies received.
#include "cascade/comm/communicator.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "internal.hpp"

namespace cascade {

using namespace comm_detail;

void Communicator::receive_large(int source, ActiveMsgBase& am, void* dest, std::size_t bytes,
                                 std::size_t chunk, std::vector<char> args, int tag) {
    // Both come from the sender's header: bounded before anything is posted, and cut into
    // the pieces the sender posted (0: the default chunk, as on the sending side).
    if (chunk > kDefaultChunk)
        throw WireError("body chunk of " + std::to_string(chunk) + " bytes (at most " +
                        std::to_string(kDefaultChunk) + ")");
    (void)detail::body_elements(bytes, 1);
    chunk = detail::piece_bytes(bytes, chunk, kDefaultChunk);
    PendingRecv r{&am, source, {}, std::move(args)};
    r.seq = cur_seq_;
    r.bytes = bytes;
    if (trace::recording()) r.t0 = trace::stamp();
    for (std::size_t off = 0; off < bytes; off += chunk) {
        const int n = static_cast<int>(std::min(chunk, bytes - off));
        MPI_Request req;
        check_mpi(MPI_Irecv(static_cast<char*>(dest) + off, n, MPI_BYTE, source,
                            tag < 0 ? TAG_BODY : tag, comm_, &req),
                  "MPI_Irecv");
        r.reqs.push_back(req);
    }
    large_recvs_.push_back(std::move(r));
}

void Communicator::receive_body(int source, ActiveMsgBase& am, void* dest, std::size_t bytes,
                                std::size_t chunk, std::vector<char> args, int tag) {
    receive_large(source, am, dest, bytes, chunk, std::move(args), tag);
    large_recvs_.back().counted = false;
}

void Communicator::run_message(int source, const char* data, std::size_t size) {
    const auto src = static_cast<std::size_t>(source);
    ++open_[src];
    ++handlers_open_;
    run_frames(source, data, size);
    --handlers_open_;
    --open_[src];
    // Messages from this rank that nested progress received meanwhile, oldest first (their
    // handlers may nest again and append more).
    while (open_[src] == 0 && !deferred_[src].empty()) {
        detail::Bytes m = std::move(deferred_[src].front());
        deferred_[src].pop_front();
        ++open_[src];
        ++handlers_open_;
        run_frames(source, m.data(), m.size());
        --handlers_open_;
        --open_[src];
    }
}

void Communicator::run_frames(int source, const char* data, std::size_t size) {
    try {
        detail::for_each_frame(data, size,
                               [&](const detail::FrameRef& fr) { run_frame(source, fr); });
    } catch (const WireError& e) {
        abort_job("rank " + std::to_string(rank_) + ": malformed message from rank " +
                  std::to_string(source) + ": " + e.what());
    }
}

void Communicator::run_frame(int source, const detail::FrameRef& fr) {
    if (fr.id == detail::kAnnounce) {
        receive_big(source, fr);
        return;
    }
    if (fr.id >= ams_.size()) [[unlikely]]
        unknown_frame(source, fr);
    ActiveMsgBase& am = *ams_[fr.id];
    if (fr.sig != am.signature()) [[unlikely]]
        unknown_frame(source, fr);
    cur_seq_ = recv_seq_[static_cast<std::size_t>(source)]++;
    if (trace::recording()) [[unlikely]] {
        run_frame_traced(source, fr, am);
    } else {
        try {
            am.on_frame(source, fr.payload, fr.len);
        } catch (...) {
            frame_failed(source, am, std::current_exception());
        }
    }
    if (!am.is_large()) ++processed_;
}

// The same, recording the handler in the trace (the handler is the context of what it does:
// promises, sends).
void Communicator::run_frame_traced(int source, const detail::FrameRef& fr, ActiveMsgBase& am) {
    trace::Buffer* tb = trace::this_thread();
    std::uint64_t outer = trace::kNone;
    trace::Event* ev = nullptr;
    if (tb) {
        outer = tb->context;
        if ((ev = tb->reserve(trace::Kind::am_run))) {
            ev->t0 = trace::stamp();
            ev->peer = source;
            ev->am = fr.id;
            ev->a = cur_seq_;
            ev->b = fr.len;
            tb->context = tb->commit();
        }
    }
    try {
        am.on_frame(source, fr.payload, fr.len);
    } catch (...) {
        frame_failed(source, am, std::current_exception());
    }
    if (tb) {
        if (ev) ev->t1 = trace::stamp();
        tb->context = outer;
    }
}

void Communicator::unknown_frame(int source, const detail::FrameRef& fr) {
    if (fr.id >= ams_.size())
        abort_job("rank " + std::to_string(rank_) + " received active message #" +
                  std::to_string(fr.id) + " from rank " + std::to_string(source) + ", but only " +
                  std::to_string(ams_.size()) +
                  " are registered here; active messages must be created in the same "
                  "order on every rank");
    const ActiveMsgBase& am = *ams_[fr.id];
    char buf[64];
    std::snprintf(buf, sizeof buf, "0x%08x, here 0x%08x", fr.sig, am.signature());
    abort_job("rank " + std::to_string(rank_) + ": active message #" + std::to_string(fr.id) +
              " from rank " + std::to_string(source) + " has a different signature than '" +
              am.name() + "' here (" + buf + "; local types: " + std::string(am.types()) +
              "); active messages must be created in the same order with the same names "
              "and argument types on every rank");
    std::abort();  // not reached: abort_job does not return (a virtual call, not known here)
}

void Communicator::frame_failed(int source, const ActiveMsgBase& am, std::exception_ptr e) {
    try {
        std::rethrow_exception(e);
    } catch (const WireError& we) {
        abort_job("rank " + std::to_string(rank_) + ": malformed active message '" + am.name() +
                  "' from rank " + std::to_string(source) + ": " + we.what());
    } catch (...) {
        handler_failed(am, source, std::current_exception(), "handler");
    }
}

// A big message of frames follows this announce from the same rank: receive it without
// blocking (test_big_recvs), holding that rank's later messages back until it ran.
void Communicator::receive_big(int source, const detail::FrameRef& announce) {
    const std::size_t bytes = detail::announced_size(announce, kSmallMessage, kMpiMessageLimit);
    BigRecv b{source, buffers_.take_recv_buffer(bytes), MPI_REQUEST_NULL};
    check_mpi(
        MPI_Irecv(b.buf.data(), static_cast<int>(bytes), MPI_BYTE, source, TAG_BIG, comm_, &b.req),
        "MPI_Irecv");
    ++open_[static_cast<std::size_t>(source)];
    big_recvs_.push_back(std::move(b));
}

bool Communicator::test_big_recvs() {
    bool any = false;
    for (std::size_t i = 0; i < big_recvs_.size();) {
        int done = 0;
        MPI_Status st;
        check_mpi(MPI_Test(&big_recvs_[i].req, &done, &st), "MPI_Test");
        if (!done) {
            ++i;
            continue;
        }
        BigRecv b = std::move(big_recvs_[i]);
        big_recvs_.erase(big_recvs_.begin() + static_cast<std::ptrdiff_t>(i));
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        if (static_cast<std::size_t>(count) != b.buf.size())
            abort_job("rank " + std::to_string(rank_) + ": big message from rank " +
                      std::to_string(b.source) + ": announced " + std::to_string(b.buf.size()) +
                      " bytes, received " + std::to_string(count));
        const auto src = static_cast<std::size_t>(b.source);
        --open_[src];
        any = true;
        if (open_[src] > 0) {  // a handler of this rank runs (nested progress): after it
            deferred_[src].push_front(std::move(b.buf));
            continue;
        }
        run_message(b.source, b.buf.data(), b.buf.size());
        // Kept for the next one; beyond kKeptRecvBuffer only while big messages that fill it
        // keep coming (BufferCache::epoch_ended).
        buffers_.give_recv_buffer(b.buf);
    }
    return any;
}

bool Communicator::receive() {
    bool any = false;
    // Control messages first: once this epoch's SHUTDOWN is here, messages that ranks which
    // finished the epoch already sent for the next one wait for the next join().
    for (;;) {
        const int slot = ctrl_head_;
        int flag = 0;
        MPI_Status st;
        check_mpi(MPI_Test(&ctrl_req_[slot], &flag, &st), "MPI_Test");
        if (!flag) break;
        const CtrlMsg m = ctrl_buf_[slot];
        post_ctrl_slot(slot);
        ctrl_head_ = (ctrl_head_ + 1) % kCtrlSlots;
        on_ctrl(st.MPI_SOURCE, m);
        any = true;
    }
    // This epoch's messages, oldest posted receive first: it matches before any later one.
    const int parity = static_cast<int>(completion_.epoch() & 1);
    AmSlots& set = am_[parity];
    for (int i = 0; i < kMaxMessagesPerProgress && set.count > 0 && !completion_.shut_down(); ++i) {
        const int slot = set.order[set.head];
        int flag = 0;
        MPI_Status st;
        check_mpi(MPI_Test(&set.req[slot], &flag, &st), "MPI_Test");
        if (!flag) break;
        set.head = (set.head + 1) % kAmSlots;
        --set.count;
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        const char* data = reinterpret_cast<const char*>(set.buf[slot].get());
        const auto src = static_cast<std::size_t>(st.MPI_SOURCE);
        any = true;
        if (open_[src] > 0) {
            // Nested progress inside a handler of an earlier message from this rank: keep
            // this one until that handler returns (see deferred_).
            deferred_[src].emplace_back(data, data + count);
            post_am_slot(parity, slot);
            continue;
        }
        // Handlers may call progress() (e.g. blocking_send), which takes the next slots;
        // this one is posted again after its frames ran.
        run_message(st.MPI_SOURCE, data, static_cast<std::size_t>(count));
        // Work its handlers left for after them runs now, before this thread tests for more
        // messages (which would delay the reply it sends; see add_after_progress).
        run_after_progress();
        // What the handlers queued (replies, typically) leaves now, not one poll later, and
        // before the slot is posted again (an MPI_Irecv: the reply need not wait for it).
        flush();
        post_am_slot(parity, slot);
    }
    return any;
}

bool Communicator::test_large_recvs() {
    bool any = false;
    for (std::size_t i = 0; i < large_recvs_.size();) {
        PendingRecv& r = large_recvs_[i];
        int done = 1;
        std::size_t got = 0;
        if (!r.reqs.empty()) {
            statuses_.resize(r.reqs.size());
            check_mpi(MPI_Testall(static_cast<int>(r.reqs.size()), r.reqs.data(), &done,
                                  statuses_.data()),
                      "MPI_Testall");
            for (std::size_t k = 0; done && k < r.reqs.size(); ++k) {
                int n = 0;
                MPI_Get_count(&statuses_[k], MPI_BYTE, &n);
                got += static_cast<std::size_t>(n);
            }
        }
        if (!done) {
            ++i;
            continue;
        }
        if (got != r.bytes)  // a body matched to the wrong header: never run on it
            abort_job("rank " + std::to_string(rank_) + ": large active message '" + r.am->name() +
                      "' from rank " + std::to_string(r.source) + ": expected a body of " +
                      std::to_string(r.bytes) + " bytes, received " + std::to_string(got));
        PendingRecv finished = std::move(r);
        large_recvs_.erase(large_recvs_.begin() + static_cast<std::ptrdiff_t>(i));
        trace::Buffer* tb = trace::recording() ? trace::this_thread() : nullptr;
        std::uint64_t outer = trace::kNone;
        trace::Event* ev = nullptr;
        if (tb) [[unlikely]] {  // the transfer, then on_arrival as a handler of that message
            outer = tb->context;
            const std::int64_t now = trace::stamp();
            if (trace::Event* e = tb->reserve(trace::Kind::large_recv)) {
                e->t0 = finished.t0;
                e->t1 = now;
                e->peer = finished.source;
                e->am = finished.am->id();
                e->a = finished.seq;
                e->b = finished.bytes;
                tb->commit();
            }
            if ((ev = tb->reserve(trace::Kind::am_run))) {
                ev->t0 = now;
                ev->peer = finished.source;
                ev->am = finished.am->id();
                ev->a = finished.seq;
                ev->b = finished.bytes;
                tb->context = tb->commit();
            }
        }
        try {
            finished.am->on_body_arrived(finished.args.data(), finished.args.size());
        } catch (...) {
            handler_failed(*finished.am, finished.source, std::current_exception(), "on_arrival");
        }
        if (tb) [[unlikely]] {
            if (ev) ev->t1 = trace::stamp();
            tb->context = outer;
        }
        if (finished.counted) ++processed_;
        any = true;
    }
    return any;
}

std::size_t Communicator::drop_body_receives() {
    std::size_t dropped = 0;
    for (std::size_t i = 0; i < large_recvs_.size();) {
        PendingRecv& r = large_recvs_[i];
        if (r.counted) {  // a large AM's own body: left to its sender
            ++i;
            continue;
        }
        for (auto& q : r.reqs) {
            MPI_Cancel(&q);
            MPI_Request_free(&q);
        }
        PendingRecv dead = std::move(r);
        large_recvs_.erase(large_recvs_.begin() + static_cast<std::ptrdiff_t>(i));
        try {
            dead.am->on_body_arrived(dead.args.data(), dead.args.size());
        } catch (...) {
        }
        ++dropped;
    }
    return dropped;
}

}  // namespace cascade
