// The send path: outboxes flushed into MPI messages (frames aggregated per destination,
// big ones announced), large bodies in chunks, completion of sends in flight.
#include "cascade/comm/communicator.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "internal.hpp"

namespace cascade {

using namespace comm_detail;

void Communicator::enqueue_large(int dest, ActiveMsgBase& am, const void* body, std::size_t bytes,
                                 std::vector<char> args) {
    const std::size_t chunk = large_chunk();
    enqueue(
        dest, am, 16 + args.size(),
        [&](char* out) {
            std::uint64_t b = bytes, c = chunk;
            std::memcpy(out, &b, 8);
            std::memcpy(out + 8, &c, 8);
            if (!args.empty()) std::memcpy(out + 16, args.data(), args.size());
            return out + 16 + args.size();
        },
        [&](Outbox& o) {
            o.larges.push_back(
                LargeSend{&am, static_cast<const char*>(body), bytes, std::move(args), chunk});
            o.body_bytes_queued += bytes;
            ++o.bodies_queued;
        });
    if (opts_.max_bytes_in_flight != 0 && room_left(dest) < 0) [[unlikely]]
        wait_for_room(dest);
}

void Communicator::too_many_argument_bytes(const ActiveMsgBase& am, std::size_t bytes) {
    throw UsageError("active message '" + am.name() + "': " + std::to_string(bytes) +
                     " bytes of arguments, more than the " +
                     std::to_string(detail::kMaxArgumentBytes) +
                     " one message carries; send big data as the body of a large active message");
}

void Communicator::enqueue_many(int dest, std::span<const HeldArgs> msgs) {
    if (msgs.empty()) return;
    if (trace::recording() || dest < 0 || dest >= world_.size) [[unlikely]] {
        // One send event per message in a trace, and enqueue()'s own checks and messages.
        for (const HeldArgs& m : msgs)
            enqueue(dest, *m.am, m.len, [&](char* out) {
                if (m.len) std::memcpy(out, m.data, m.len);
                return out + m.len;
            });
        return;
    }
    std::size_t total = 0;
    for (const HeldArgs& m : msgs) {
        if (m.len > detail::kMaxArgumentBytes) too_many_argument_bytes(*m.am, m.len);
        total += sizeof(Frame) + detail::round8(m.len);
    }
    Outbox& o = outbox_[dest];
    bool full = false;
    {
        std::lock_guard<Spinlock> g(o.lock);
        std::size_t at = o.buf.size();
        o.buf.resize(at + total);
        for (const HeldArgs& m : msgs) {
            char* frame = o.buf.data() + at;
            const Frame fr{m.am->id(), m.am->signature(), m.len};
            std::memcpy(frame, &fr, sizeof fr);
            if (m.len) std::memcpy(frame + sizeof(Frame), m.data, m.len);
            const std::size_t padded = detail::round8(m.len);
            std::memset(frame + sizeof(Frame) + m.len, 0, padded - m.len);
            at += sizeof(Frame) + padded;
        }
        o.seq += msgs.size();
        counts_.add_queued(msgs.size());
        if (!o.nonempty.exchange(true, std::memory_order_acq_rel))
            outbox_pending_.fetch_add(1, std::memory_order_release);
        const std::size_t cap = opts_.max_bytes_in_flight;
        full = cap != 0 &&
               o.buf.size() + o.frame_bytes_in_flight.load(std::memory_order_relaxed) > cap;
    }
    if (tp_ && !on_comm_thread()) tp_->wake_joiner();
    if (full) [[unlikely]]
        wait_for_room(dest);
}

void Communicator::attach_body(Outbox& o, ActiveMsgBase& am, const void* body, std::size_t bytes,
                               std::size_t chunk, std::vector<char> args) {
    attach_body(o, am, body, bytes, chunk, std::move(args), -1);
}

void Communicator::attach_body(Outbox& o, ActiveMsgBase& am, const void* body, std::size_t bytes,
                               std::size_t chunk, std::vector<char> args, int tag) {
    o.larges.push_back(
        LargeSend{&am, static_cast<const char*>(body), bytes, std::move(args), chunk, tag});
}

int Communicator::new_body_tag() {
    if (const auto tag = body_tags_.take()) return *tag;
    throw UsageError("rank " + std::to_string(world_.rank) + ": " +
                     std::to_string(detail::BodyTags::kCount) +
                     " broadcast bodies in flight from this rank; no MPI tag is free for another");
}

void Communicator::release_body_tag(int tag) noexcept {
    body_tags_.release(tag);
}

void Communicator::send_body_now(int dest, ActiveMsgBase& am, const void* body, std::size_t bytes,
                                 std::size_t chunk, std::vector<char> args, int tag) {
    post_large(dest, LargeSend{&am, static_cast<const char*>(body), bytes, std::move(args),
                               chunk == 0 ? kDefaultChunk : chunk, tag});
}

bool Communicator::raise_fence(int dest, std::uint64_t& after) {
    if (fence_hook_) [[unlikely]]
        fence_hook_(dest);
    Outbox& o = outbox_[dest];
    std::lock_guard<Spinlock> g(o.lock);
    if (o.fences.load(std::memory_order_relaxed) > 0) return false;
    o.fences.store(1, std::memory_order_release);
    o.fence_bytes = o.buf.size();
    o.fence_larges = o.larges.size();
    ++o.fence_stretch;
    after = o.seq;
    return true;
}

std::uint64_t Communicator::fence_stretch(int dest) const {
    Outbox& o = outbox_[dest];
    std::lock_guard<Spinlock> g(o.lock);
    return o.fences.load(std::memory_order_relaxed) > 0 ? o.fence_stretch : 0;
}

void Communicator::lower_fence(int dest) {
    if (dest < 0 || dest >= world_.size) throw WireError("fence of rank " + std::to_string(dest));
    Outbox& o = outbox_[dest];
    std::lock_guard<Spinlock> g(o.lock);
    if (o.fences.load(std::memory_order_relaxed) <= 0)
        throw WireError("rank " + std::to_string(dest) +
                        " acknowledged a delivery through another rank that this rank never made");
    if (o.fences.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        o.fence_bytes = 0;
        o.fence_larges = 0;
    }
}

bool Communicator::must_send_directly(int dest) const {
    const Outbox& o = outbox_[dest];
    return o.fences.load(std::memory_order_acquire) > 0 ||
           o.nonempty.load(std::memory_order_acquire) ||
           o.frame_bytes_in_flight.load(std::memory_order_acquire) > 0 ||
           o.body_bytes_in_flight.load(std::memory_order_acquire) > 0;
}

// Outbox d is fenced (under its lock): moves what was queued after the fence out of it, into
// `rest` and `rest_larges`, so that what was queued before leaves alone.
void Communicator::split_at_fence(Outbox& o, detail::Bytes& rest,
                                  std::vector<LargeSend>& rest_larges) {
    buffers_.take_spare(rest);
    rest.assign(o.buf.begin() + static_cast<std::ptrdiff_t>(o.fence_bytes), o.buf.end());
    o.buf.resize(o.fence_bytes);
    for (std::size_t i = o.fence_larges; i < o.larges.size(); ++i) {
        o.body_bytes_queued -= o.larges[i].bytes;
        --o.bodies_queued;
        rest_larges.push_back(std::move(o.larges[i]));
    }
    o.larges.resize(o.fence_larges);
    o.fence_bytes = 0;
    o.fence_larges = 0;
}

void Communicator::flush() {
    if (outbox_pending_.load(std::memory_order_acquire) == 0) return;
    held_ = 0;
    for (int d = 0; d < world_.size; ++d) {
        Outbox& o = outbox_[d];
        if (!o.nonempty.load(std::memory_order_acquire)) continue;
        // Back-pressure: enough large bodies are on their way to d; what is queued for it
        // (frames and bodies, in order) waits until some have arrived.
        if (opts_.max_bytes_in_flight != 0 &&
            o.body_bytes_in_flight.load(std::memory_order_relaxed) >= opts_.max_bytes_in_flight)
            [[unlikely]] {
            ++held_;
            continue;
        }
        detail::Bytes buf;
        std::vector<LargeSend> larges;
        bool fenced = false;
        {
            std::lock_guard<Spinlock> g(o.lock);
            // Under the lock, which raise_fence takes: nothing queued after a fence leaves
            // with what was queued before it.
            if (o.fences.load(std::memory_order_relaxed) > 0) [[unlikely]] {
                fenced = true;
                take_before_fence(o, buf, larges);
            } else {
                // The outbox's next buffer: for a burst bigger than a spare, the big spare (an
                // iterative code sends the same burst at every step); else a spare, if any.
                buffers_.swap_out(outbox_.get(), d, buf);
                std::swap(larges, o.larges);
                o.body_bytes_queued = 0;
                o.bodies_queued = 0;
                o.nonempty.store(false, std::memory_order_release);
                outbox_pending_.fetch_sub(1, std::memory_order_acq_rel);
            }
        }
        if (fenced) [[unlikely]]
            ++held_;
        send_frames(d, std::move(buf));
        for (auto& l : larges)
            post_large(d, std::move(l));
    }
}

// Hands the frames taken from outbox d to MPI: grouped into MPI messages, all of them when
// aggregating (up to kMpiMessageLimit bytes), one per frame otherwise; send_segment
// announces a message bigger than kSmallMessage. An empty buffer becomes a spare.
void Communicator::send_frames(int d, detail::Bytes buf) {
    if (buf.empty()) {
        buffers_.keep_spare(buf);
        return;
    }
    const std::uint32_t slot = sends_.open();
    PendingSend& ps = sends_.at(slot);
    ps.buf = std::move(buf);
    const std::size_t limit = opts_.aggregate ? kMpiMessageLimit : 0;
    std::size_t start = 0, off = 0;
    const std::size_t n = ps.buf.size();
    while (off < n) {
        Frame fr;
        std::memcpy(&fr, ps.buf.data() + off, sizeof fr);
        const std::size_t next = off + sizeof(Frame) + round8(fr.len);
        if (next - start > limit && off > start) {
            send_segment(ps, d, start, off);
            start = off;
        }
        off = next;
    }
    if (n > start) send_segment(ps, d, start, n);
    ps.serial = send_serial_++;
    ps.dest = d;
    ps.bytes = n;
    outbox_[d].frame_bytes_in_flight.fetch_add(n, std::memory_order_relaxed);
    sends_.track(slot);
}

// Outbox o is fenced (under its lock): the frame written last, at frame_at, and the bodies
// attached with it, from larges_at on, go right before the fence (they leave with what was
// queued before it).
void Communicator::move_before_fence(Outbox& o, std::size_t frame_at, std::size_t larges_at) {
    if (frame_at == o.fence_bytes) {
        o.fence_bytes = o.buf.size();
    } else {
        std::rotate(o.buf.begin() + static_cast<std::ptrdiff_t>(o.fence_bytes),
                    o.buf.begin() + static_cast<std::ptrdiff_t>(frame_at), o.buf.end());
        o.fence_bytes += o.buf.size() - frame_at;
    }
    if (larges_at == o.larges.size()) return;
    std::rotate(o.larges.begin() + static_cast<std::ptrdiff_t>(o.fence_larges),
                o.larges.begin() + static_cast<std::ptrdiff_t>(larges_at), o.larges.end());
    o.fence_larges += o.larges.size() - larges_at;
}

// Outbox o is fenced (under its lock): takes what was queued before the fence into `buf` and
// `larges`, leaving what was queued after it.
void Communicator::take_before_fence(Outbox& o, detail::Bytes& buf,
                                     std::vector<LargeSend>& larges) {
    if (o.fence_bytes == 0 && o.fence_larges == 0) return;
    detail::Bytes rest;
    std::vector<LargeSend> rest_larges;
    split_at_fence(o, rest, rest_larges);
    buf = std::move(o.buf);
    o.buf = std::move(rest);
    larges = std::move(o.larges);
    o.larges = std::move(rest_larges);
    if (o.buf.empty() && o.larges.empty()) {
        o.nonempty.store(false, std::memory_order_release);
        outbox_pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

void Communicator::post_large(int d, LargeSend l) {
    const std::uint32_t slot = sends_.open();
    PendingSend& ps = sends_.at(slot);
    const std::size_t chunk = detail::piece_bytes(l.bytes, l.chunk, kDefaultChunk);
    const int tag = l.tag < 0 ? TAG_BODY : l.tag;
    for (std::size_t off = 0; off < l.bytes; off += chunk) {
        const int n = static_cast<int>(std::min(chunk, l.bytes - off));
        MPI_Request req;
        check_mpi(MPI_Isend(l.body + off, n, MPI_BYTE, d, tag, world_.comm, &req), "MPI_Isend");
        ps.reqs.push_back(req);
    }
    outbox_[d].body_bytes_in_flight.fetch_add(l.bytes, std::memory_order_relaxed);
    ps.large = std::make_unique<LargeSend>(std::move(l));
    ps.dest = d;
    if (trace::recording()) ps.t0 = trace::stamp();
    ++pending_large_sends_;
    sends_.track(slot);
}

void Communicator::send_segment(PendingSend& ps, int dest, std::size_t begin, std::size_t end) {
    const std::size_t bytes = end - begin;
    MPI_Request req;
    if (bytes > kSmallMessage) {
        const Frame fr{detail::kAnnounce, 0, 8};
        auto& a = ps.announce.emplace_back();
        std::memcpy(a.data(), &fr, sizeof fr);
        a[2] = bytes;
        check_mpi(MPI_Isend(a.data(), sizeof a, MPI_BYTE, dest, am_tag(completion_.epoch()),
                            world_.comm, &req),
                  "MPI_Isend");
        ps.reqs.push_back(req);
    }
    check_mpi(
        MPI_Isend(ps.buf.data() + begin, static_cast<int>(bytes), MPI_BYTE, dest,
                  bytes > kSmallMessage ? TAG_BIG : am_tag(completion_.epoch()), world_.comm, &req),
        "MPI_Isend");
    ps.reqs.push_back(req);
    counts_.sent_one();
}

// Sends whose requests completed: their buffers are kept for reuse, a large body's on_sent
// runs (it may queue more sends, in new slots).
void Communicator::test_sends() {
    sends_.test();
    std::uint32_t slot = 0;
    while (PendingSend* finished = sends_.pop_done(slot)) {
        finish_send(*finished);
        sends_.release(slot);
    }
}

void Communicator::finish_send(PendingSend& finished) {
    if (finished.large) {
        --pending_large_sends_;
        LargeSend& l = *finished.large;
        outbox_[finished.dest].body_bytes_in_flight.fetch_sub(l.bytes, std::memory_order_release);
        if (trace::recording()) [[unlikely]] {
            trace::Buffer* tb = trace::this_thread();
            if (trace::Event* e = tb ? tb->reserve(trace::Kind::large_send) : nullptr) {
                e->t0 = finished.t0;
                e->t1 = trace::stamp();
                e->peer = finished.dest;
                e->am = l.am->id();
                e->b = l.bytes;
                tb->commit();
            }
        }
        try {
            l.am->on_body_sent(l.args.data(), l.args.size());
        } catch (...) {
            handler_failed(*l.am, world_.rank, std::current_exception(), "on_sent");
        }
        return;
    }
    if (finished.dest >= 0)
        outbox_[finished.dest].frame_bytes_in_flight.fetch_sub(finished.bytes,
                                                               std::memory_order_release);
    finished.announce.clear();
    buffers_.keep_sent(outbox_.get(), finished.dest, finished.buf);
}

void Communicator::flush_blocking() {
    // Wait for the messages queued so far while still receiving: a send to ourselves, or to a
    // rank that is itself blocked sending to us, completes only if we keep receiving. Large
    // bodies are not waited for (their on_sent says when): the receive of a body queued
    // behind the running handler is posted only after that handler returns.
    flush();
    const std::uint64_t upto = send_serial_;
    auto pending = [&] { return held_ > 0 || sends_.frames_in_flight_before(upto); };
    auto moved = std::chrono::steady_clock::now();
    while (pending()) {
        if (progress()) moved = std::chrono::steady_clock::now();
        if (pending()) {
            check_stall("flush_blocking (a blocking_send)", moved);
            std::this_thread::yield();
        }
    }
}

// One snapshot of what is queued for a destination or handed to MPI and not yet delivered.
Communicator::InFlight Communicator::in_flight(int dest, const char* what) const {
    if (dest < 0 || dest >= world_.size)
        throw UsageError(std::string(what) + ": rank " + std::to_string(dest) + " outside [0, " +
                         std::to_string(world_.size) + ")");
    Outbox& o = outbox_[dest];
    InFlight f;
    {
        std::lock_guard<Spinlock> g(o.lock);
        f.frames = o.buf.size();
        f.bodies = o.body_bytes_queued;
        f.bodies_queued = o.bodies_queued;
    }
    f.frames += o.frame_bytes_in_flight.load(std::memory_order_acquire);
    f.bodies_flying = o.body_bytes_in_flight.load(std::memory_order_acquire);
    f.bodies += f.bodies_flying;
    return f;
}

std::size_t Communicator::bytes_in_flight(int dest) const {
    return in_flight(dest, "bytes_in_flight").frames;
}

CommStats Communicator::stats() const {
    return CommStats{.queued = queued(),
                     .processed = counts_.processed(),
                     .mpi_messages_sent = counts_.mpi_sends(),
                     .control_messages_sent = ctrl_sent_,
                     .kept_buffer_bytes = kept_buffer_bytes()};
}

std::size_t Communicator::kept_buffer_bytes() const {
    return buffers_.kept_bytes(outbox_.get(), world_.size);
}

std::size_t Communicator::body_bytes_in_flight(int dest) const {
    return in_flight(dest, "body_bytes_in_flight").bodies;
}

// Back-pressure (CommunicatorOptions::max_bytes_in_flight): negative when the frames queued
// for a destination and those MPI still holds pass the limit, or the bodies queued and in
// flight do (one body alone always goes, whatever its size).
std::ptrdiff_t Communicator::room_left(int dest) const {
    const std::size_t cap = opts_.max_bytes_in_flight;
    const InFlight f = in_flight(dest, "send");
    if (f.frames > cap) return -1;
    if (f.bodies > cap && (f.bodies_flying > 0 || f.bodies_queued > 1)) return -1;
    return static_cast<std::ptrdiff_t>(cap - f.frames);
}

namespace {
// RoomWaitsDeferred of this thread: how many live, and the destinations whose waits they put
// off.
thread_local int tls_room_deferred = 0;
thread_local std::vector<std::pair<Communicator*, int>> tls_room_owed;
}  // namespace

Communicator::RoomWaitsDeferred::RoomWaitsDeferred() noexcept {
    ++tls_room_deferred;
}

Communicator::RoomWaitsDeferred::~RoomWaitsDeferred() noexcept(false) {
    if (--tls_room_deferred > 0 || tls_room_owed.empty()) return;
    std::vector<std::pair<Communicator*, int>> owed;
    owed.swap(tls_room_owed);
    if (std::uncaught_exceptions() == 0)
        for (const auto& [comm, dest] : owed)
            comm->wait_for_room(dest);
    owed.clear();
    if (tls_room_owed.empty()) tls_room_owed.swap(owed);  // keeps the capacity
}

// Back-pressure (CommunicatorOptions::max_bytes_in_flight): enqueue found the frames queued
// for `dest` and those MPI still holds over the limit. The communication thread outside any
// handler makes room by progressing; inside a handler it never waits (the handler's sends
// may then pass the limit); any other thread waits until the communication thread drained
// the queue.
void Communicator::wait_for_room(int dest) {
    if (tls_room_deferred > 0) [[unlikely]] {
        tls_room_owed.emplace_back(this, dest);
        return;
    }
    auto full = [&] { return room_left(dest) < 0; };
    if (on_comm_thread()) {
        if (order_.progress_depth() > 0) return;
        auto moved = std::chrono::steady_clock::now();
        while (full()) {
            if (progress()) {
                moved = std::chrono::steady_clock::now();
            } else {
                check_stall("a send waiting for room to its destination (back-pressure)", moved);
                std::this_thread::yield();
            }
        }
        return;
    }
    while (full()) {
        if (tp_) tp_->wake_joiner();
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

}  // namespace cascade
