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
    detail::PendingRecv r{&am, source, {}, std::move(args)};
    r.seq = order_.current_seq();
    r.bytes = bytes;
    if (trace::recording()) r.t0 = trace::stamp();
    large_.post_body(world_.comm, std::move(r), dest, chunk, tag < 0 ? TAG_BODY : tag);
}

void Communicator::receive_body(int source, ActiveMsgBase& am, void* dest, std::size_t bytes,
                                std::size_t chunk, std::vector<char> args, int tag) {
    // Checked and posted as a large AM's body, but not counted as a message of its own.
    receive_large(source, am, dest, bytes, chunk, std::move(args), tag);
    large_.last_body().counted = false;
}

void Communicator::run_message(int source, const char* data, std::size_t size) {
    // Then the messages from this rank that nested progress received meanwhile.
    order_.run(source, data, size, [&](const char* d, std::size_t n) { run_frames(source, d, n); });
}

void Communicator::run_frames(int source, const char* data, std::size_t size) {
    try {
        detail::for_each_frame(data, size,
                               [&](const detail::FrameRef& fr) { run_frame(source, fr); });
    } catch (const WireError& e) {
        abort_job("rank " + std::to_string(world_.rank) + ": malformed message from rank " +
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
    order_.next_frame(source);
    if (trace::recording()) [[unlikely]] {
        run_frame_traced(source, fr, am);
    } else {
        try {
            am.on_frame(source, fr.payload, fr.len);
        } catch (...) {
            frame_failed(source, am, std::current_exception());
        }
    }
    if (!am.is_large()) counts_.processed_one();
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
            ev->a = order_.current_seq();
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
        abort_job("rank " + std::to_string(world_.rank) + " received active message #" +
                  std::to_string(fr.id) + " from rank " + std::to_string(source) + ", but only " +
                  std::to_string(ams_.size()) +
                  " are registered here; active messages must be created in the same "
                  "order on every rank");
    const ActiveMsgBase& am = *ams_[fr.id];
    char buf[64];
    std::snprintf(buf, sizeof buf, "0x%08x, here 0x%08x", fr.sig, am.signature());
    abort_job("rank " + std::to_string(world_.rank) + ": active message #" + std::to_string(fr.id) +
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
        abort_job("rank " + std::to_string(world_.rank) + ": malformed active message '" +
                  am.name() + "' from rank " + std::to_string(source) + ": " + we.what());
    } catch (...) {
        handler_failed(am, source, std::current_exception(), "handler");
    }
}

// A big message of frames follows this announce from the same rank: receive it without
// blocking (test_big_recvs), holding that rank's later messages back until it ran.
void Communicator::receive_big(int source, const detail::FrameRef& announce) {
    const std::size_t bytes = detail::announced_size(announce, kSmallMessage, kMpiMessageLimit);
    large_.post_big(world_.comm, source, buffers_.take_recv_buffer(bytes), TAG_BIG);
    order_.hold(source);
}

bool Communicator::test_big_recvs() {
    return large_.test_big([this](detail::BigRecv& b, int count) {
        if (static_cast<std::size_t>(count) != b.buf.size())
            abort_job("rank " + std::to_string(world_.rank) + ": big message from rank " +
                      std::to_string(b.source) + ": announced " + std::to_string(b.buf.size()) +
                      " bytes, received " + std::to_string(count));
        // A handler of this rank runs (nested progress): after it.
        if (order_.unhold_or_defer(b.source, b.buf)) return;
        run_message(b.source, b.buf.data(), b.buf.size());
        // Kept for the next one; beyond kKeptRecvBuffer only while big messages that fill it
        // keep coming (BufferCache::epoch_ended).
        buffers_.give_recv_buffer(b.buf);
    });
}

bool Communicator::receive() {
    bool any = false;
    // Control messages first: once this epoch's SHUTDOWN is here, messages that ranks which
    // finished the epoch already sent for the next one wait for the next join().
    // The first test looks at the oldest AM receive of this epoch too, in the same MPI call.
    CtrlMsg m;
    MPI_Status st;
    const int parity = static_cast<int>(completion_.epoch() & 1);
    bool am_tested = false;
    if (slots_.test_ctrl_and_am(world_.comm, parity, m, st, am_tested)) {
        do {
            on_ctrl(st.MPI_SOURCE, m);
        } while (slots_.test_ctrl(world_.comm, m, st));
        any = true;
    }
    // Nothing more to test when that test found no AM message.
    if (am_tested && !slots_.am_waiting(parity)) return any;
    // One message of this epoch, from the oldest posted receive (it matches before any later
    // one). The next receive is tested by the next poll, not now: a message mostly comes
    // alone (a rank hands this one all the frames it queued for it at once), so a test now
    // would mostly find nothing and cost a pass of MPI's progress engine, and when the next
    // message is in already, the next poll's combined test finds it without one.
    int slot = 0;
    if (completion_.shut_down() || !slots_.test_am(parity, slot, st)) return any;
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    const char* data = slots_.am_data(parity, slot);
    if (order_.is_open(st.MPI_SOURCE)) {
        // Nested progress inside a handler of an earlier message from this rank: keep this
        // one until that handler returns (see SourceOrder).
        order_.defer(st.MPI_SOURCE, detail::Bytes(data, data + count));
        slots_.repost_am(world_.comm, parity, slot);
        return true;
    }
    // Handlers may call progress() (e.g. blocking_send), which takes the next slots; this
    // one is posted again after its frames ran.
    run_message(st.MPI_SOURCE, data, static_cast<std::size_t>(count));
    // Work its handlers left for after them runs now, before this thread polls again (which
    // would delay the reply it sends; see add_after_progress).
    run_after_progress();
    // What the handlers queued (replies, typically) leaves now, not one poll later, and
    // before the slot is started again (the reply need not wait for it).
    flush();
    slots_.repost_am(world_.comm, parity, slot);
    return true;
}

bool Communicator::test_large_recvs() {
    return large_.test_bodies([this](detail::PendingRecv& finished, std::size_t got) {
        if (got != finished.bytes)  // a body matched to the wrong header: never run on it
            abort_job("rank " + std::to_string(world_.rank) + ": large active message '" +
                      finished.am->name() + "' from rank " + std::to_string(finished.source) +
                      ": expected a body of " + std::to_string(finished.bytes) +
                      " bytes, received " + std::to_string(got));
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
        if (finished.counted) counts_.processed_one();
    });
}

std::size_t Communicator::drop_body_receives() {
    return large_.drop_attached([](detail::PendingRecv& dead) {
        try {
            dead.am->on_body_arrived(dead.args.data(), dead.args.size());
        } catch (...) {
        }
    });
}

}  // namespace cascade
