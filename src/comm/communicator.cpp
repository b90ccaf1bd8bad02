#include "cascade/comm/communicator.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

#include "cascade/core/errors.hpp"
#include "cascade/comm/detail/trace_gather.hpp"

namespace cascade {

namespace {
constexpr int TAG_AM = 1;      // frames (AMs, large-AM headers) in MPI messages of <= kSmallMessage
constexpr int TAG_BODY = 2;    // large-AM bodies, matched per source in header order
constexpr int TAG_CTRL = 3;    // completion protocol
constexpr int TAG_BIG = 4;     // frames in a bigger MPI message, announced by a TAG_AM one
constexpr int TAG_AM_ODD = 5;  // TAG_AM in odd completion epochs

int am_tag(std::uint32_t epoch) {
    return (epoch & 1) ? TAG_AM_ODD : TAG_AM;
}
// MPI messages of frames up to this size go to receives posted in advance; a bigger one is
// announced by a small message (one kAnnounce frame carrying its size) and then received
// from that rank alone, so frames from one rank still run in the order they were queued.
constexpr std::size_t kSmallMessage = std::size_t(32) << 10;
constexpr std::uint32_t kAnnounce = 0xffffffffu;
constexpr int kMaxMessagesPerProgress = 64;
constexpr std::size_t kMaxSpareBuffers = 16;
constexpr std::size_t kMpiMessageLimit = std::size_t(1) << 30;
constexpr auto kFirstCountDelay = std::chrono::microseconds(20);
constexpr auto kMaxCountDelay = std::chrono::microseconds(640);

thread_local const Communicator* tls_comm_thread = nullptr;

std::size_t round8(std::size_t n) {
    return (n + 7) & ~std::size_t(7);
}

void check_mpi(int rc, const char* what) {
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        throw std::runtime_error(std::string("cascade: ") + what + " failed: " + msg);
    }
}

}  // namespace

Communicator::Communicator(MPI_Comm comm, CommunicatorOptions opts) : opts_(opts) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
        int provided = 0;
        check_mpi(MPI_Init_thread(nullptr, nullptr, opts_.thread_level, &provided),
                  "MPI_Init_thread");
        owns_mpi_ = true;
        if (provided < MPI_THREAD_FUNNELED)
            std::cerr << "cascade: warning: MPI provides thread level " << provided
                      << " (< MPI_THREAD_FUNNELED)\n";
    }
    check_mpi(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    outbox_.reset(new Outbox[size_]);
    recv_seq_.assign(static_cast<std::size_t>(size_), 0);
    open_.assign(static_cast<std::size_t>(size_), 0);
    deferred_.resize(static_cast<std::size_t>(size_));
    tls_comm_thread = this;
    detail::trace_start(comm_);  // collective: every rank follows rank 0's CASCADE_TRACE
    post_receives();
    if (rank_ == 0) {
        cnt_q_.assign(size_, 0);
        cnt_p_.assign(size_, 0);
        reported_.assign(size_, false);
        confirmed_.assign(size_, 0);
    }
}

Communicator::~Communicator() {
    if (tp_) tp_->set_join_hook(nullptr);
    // Complete what is in flight so MPI can shut down cleanly.
    for (auto& s : sends_)
        if (!s.reqs.empty())
            MPI_Waitall(static_cast<int>(s.reqs.size()), s.reqs.data(), MPI_STATUSES_IGNORE);
    for (auto& r : large_recvs_)
        for (auto& q : r.reqs) {
            MPI_Cancel(&q);
            MPI_Request_free(&q);
        }
    // A posted receive that got a message instead of being cancelled holds active messages
    // sent after this rank's last join(): nobody will run them, so say so.
    auto cancel = [](MPI_Request& q) {
        if (q == MPI_REQUEST_NULL) return 0;
        MPI_Cancel(&q);
        MPI_Status st;
        MPI_Wait(&q, &st);
        int cancelled = 0;
        MPI_Test_cancelled(&st, &cancelled);
        return cancelled ? 0 : 1;
    };
    int unrun = 0;
    for (auto& set : am_)
        for (auto& q : set.req)
            unrun += cancel(q);
    for (auto& q : ctrl_req_)
        cancel(q);
    if (unrun > 0)
        std::fprintf(stderr,
                     "cascade: warning: rank %d: %d message(s) of active messages arrived after "
                     "this rank's last join() and were not run (sent after the ranks' last "
                     "join()?)\n",
                     rank_, unrun);
    if (trace::recording() && comm_ != MPI_COMM_NULL && !std::uncaught_exceptions()) {
        try {  // collective: rank 0 gathers every rank's events and writes the files
            std::vector<std::string> names;
            for (auto& am : ams_)
                names.push_back(am->name());
            detail::trace_finish(comm_, names);
        } catch (const std::exception& e) {
            std::cerr << "cascade: trace: could not write the trace: " << e.what() << '\n';
        }
    }
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    if (tls_comm_thread == this) tls_comm_thread = nullptr;
    if (owns_mpi_) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
    }
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
    am->sig_ = wire::hash_name(am->types()) ^ (am->is_large() ? 0x9e3779b9u : 0u);
    ams_.push_back(std::move(am));
    return ams_.back().get();
}

void Communicator::post_receives() {
    for (auto& q : ctrl_req_)
        q = MPI_REQUEST_NULL;
    for (int parity = 0; parity < 2; ++parity) {
        for (auto& q : am_[parity].req)
            q = MPI_REQUEST_NULL;
        for (int i = 0; i < kAmSlots; ++i) {
            am_[parity].buf[i].reset(new std::uint64_t[kSmallMessage / 8]);
            post_am_slot(parity, i);
        }
    }
    for (int i = 0; i < kCtrlSlots; ++i)
        post_ctrl_slot(i);
}

void Communicator::post_am_slot(int parity, int slot) {
    AmSlots& set = am_[parity];
    check_mpi(MPI_Irecv(set.buf[slot].get(), static_cast<int>(kSmallMessage), MPI_BYTE,
                        MPI_ANY_SOURCE, parity ? TAG_AM_ODD : TAG_AM, comm_, &set.req[slot]),
              "MPI_Irecv");
    set.order[(set.head + set.count) % kAmSlots] = slot;
    ++set.count;
}

void Communicator::post_ctrl_slot(int slot) {
    check_mpi(MPI_Irecv(&ctrl_buf_[slot], sizeof(CtrlMsg), MPI_BYTE, MPI_ANY_SOURCE, TAG_CTRL,
                        comm_, &ctrl_req_[slot]),
              "MPI_Irecv");
}

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
        });
}

void Communicator::receive_large(int source, ActiveMsgBase& am, void* dest, std::size_t bytes,
                                 std::size_t chunk, std::vector<char> args) {
    if (chunk == 0) chunk = kDefaultChunk;
    PendingRecv r{&am, source, {}, std::move(args)};
    r.seq = cur_seq_;
    r.bytes = bytes;
    if (trace::recording()) r.t0 = trace::stamp();
    for (std::size_t off = 0; off < bytes; off += chunk) {
        const int n = static_cast<int>(std::min(chunk, bytes - off));
        MPI_Request req;
        check_mpi(
            MPI_Irecv(static_cast<char*>(dest) + off, n, MPI_BYTE, source, TAG_BODY, comm_, &req),
            "MPI_Irecv");
        r.reqs.push_back(req);
    }
    large_recvs_.push_back(std::move(r));
}

void Communicator::attach_body(Outbox& o, ActiveMsgBase& am, const void* body, std::size_t bytes,
                               std::size_t chunk, std::vector<char> args) {
    o.larges.push_back(
        LargeSend{&am, static_cast<const char*>(body), bytes, std::move(args), chunk});
}

void Communicator::receive_body(int source, ActiveMsgBase& am, void* dest, std::size_t bytes,
                                std::size_t chunk, std::vector<char> args) {
    receive_large(source, am, dest, bytes, chunk, std::move(args));
    large_recvs_.back().counted = false;
}

void Communicator::flush() {
    if (outbox_pending_.load(std::memory_order_acquire) == 0) return;
    for (int d = 0; d < size_; ++d) {
        Outbox& o = outbox_[d];
        if (!o.nonempty.load(std::memory_order_acquire)) continue;
        detail::Bytes buf;
        if (!spare_bufs_.empty()) {
            buf = std::move(spare_bufs_.back());
            spare_bufs_.pop_back();
        }
        std::vector<LargeSend> larges;
        {
            std::lock_guard<Spinlock> g(o.lock);
            std::swap(buf, o.buf);
            std::swap(larges, o.larges);
            o.nonempty.store(false, std::memory_order_release);
            outbox_pending_.fetch_sub(1, std::memory_order_acq_rel);
        }
        if (!buf.empty()) {
            PendingSend ps;
            ps.buf = std::move(buf);
            // Group whole frames into MPI messages: all of them when aggregating (up to
            // kMpiMessageLimit bytes), one per frame otherwise. send_segment announces a
            // message bigger than kSmallMessage.
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
            sends_.push_back(std::move(ps));
        } else if (buf.capacity() && spare_bufs_.size() < kMaxSpareBuffers) {
            spare_bufs_.push_back(std::move(buf));
        }
        for (auto& l : larges) {
            PendingSend ps;
            const std::size_t chunk = l.chunk;
            for (std::size_t off = 0; off < l.bytes; off += chunk) {
                const int n = static_cast<int>(std::min(chunk, l.bytes - off));
                MPI_Request req;
                check_mpi(MPI_Isend(l.body + off, n, MPI_BYTE, d, TAG_BODY, comm_, &req),
                          "MPI_Isend");
                ps.reqs.push_back(req);
            }
            ps.large = std::make_unique<LargeSend>(std::move(l));
            ps.dest = d;
            if (trace::recording()) ps.t0 = trace::stamp();
            ++pending_large_sends_;
            sends_.push_back(std::move(ps));
        }
    }
}

void Communicator::send_segment(PendingSend& ps, int dest, std::size_t begin, std::size_t end) {
    const std::size_t bytes = end - begin;
    MPI_Request req;
    if (bytes > kSmallMessage) {
        const Frame fr{kAnnounce, 0, 8};
        auto& a = ps.announce.emplace_back();
        std::memcpy(a.data(), &fr, sizeof fr);
        a[2] = bytes;
        check_mpi(MPI_Isend(a.data(), sizeof a, MPI_BYTE, dest, am_tag(epoch_), comm_, &req),
                  "MPI_Isend");
        ps.reqs.push_back(req);
    }
    check_mpi(MPI_Isend(ps.buf.data() + begin, static_cast<int>(bytes), MPI_BYTE, dest,
                        bytes > kSmallMessage ? TAG_BIG : am_tag(epoch_), comm_, &req),
              "MPI_Isend");
    ps.reqs.push_back(req);
    ++mpi_sends_;
}

void Communicator::test_sends() {
    for (std::size_t i = 0; i < sends_.size();) {
        PendingSend& s = sends_[i];
        int done = 1;
        if (!s.reqs.empty())
            check_mpi(MPI_Testall(static_cast<int>(s.reqs.size()), s.reqs.data(), &done,
                                  MPI_STATUSES_IGNORE),
                      "MPI_Testall");
        if (!done) {
            ++i;
            continue;
        }
        PendingSend finished = std::move(s);
        sends_[i] = std::move(sends_.back());
        sends_.pop_back();
        if (finished.large) {
            --pending_large_sends_;
            LargeSend& l = *finished.large;
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
                handler_failed(*l.am, rank_, std::current_exception(), "on_sent");
            }
        } else if (spare_bufs_.size() < kMaxSpareBuffers) {
            finished.buf.clear();
            finished.announce.clear();
            spare_bufs_.push_back(std::move(finished.buf));
        }
    }
}

void Communicator::handler_failed(const ActiveMsgBase& am, int source, std::exception_ptr e,
                                  const char* which) {
    std::string msg = "rank " + std::to_string(rank_) + ": active message '" + am.name() + "' (" +
                      which + ", from rank " + std::to_string(source) +
                      ") threw: " + detail::describe_error(e);
    if (size_ > 1 || !tp_) abort_job(msg);
    tp_->fail(std::make_exception_ptr(std::runtime_error(msg)));
}

void Communicator::run_message(int source, const char* data, std::size_t size) {
    const auto src = static_cast<std::size_t>(source);
    ++open_[src];
    run_frames(source, data, size);
    --open_[src];
    // Messages from this rank that nested progress received meanwhile, oldest first (their
    // handlers may nest again and append more).
    while (open_[src] == 0 && !deferred_[src].empty()) {
        detail::Bytes m = std::move(deferred_[src].front());
        deferred_[src].pop_front();
        ++open_[src];
        run_frames(source, m.data(), m.size());
        --open_[src];
    }
}

void Communicator::run_frames(int source, const char* data, std::size_t size) {
    std::size_t off = 0;
    while (off < size) {
        if (size - off < sizeof(Frame))
            abort_job("rank " + std::to_string(rank_) + ": truncated message from rank " +
                      std::to_string(source) + " (" + std::to_string(size - off) + " stray bytes)");
        Frame fr;
        std::memcpy(&fr, data + off, sizeof fr);
        if (fr.len > size - off - sizeof(Frame))
            abort_job("rank " + std::to_string(rank_) + ": malformed message from rank " +
                      std::to_string(source) + ": frame of " + std::to_string(fr.len) +
                      " bytes with " + std::to_string(size - off - sizeof(Frame)) + " left");
        if (fr.id == kAnnounce) {
            receive_big(source, data + off + sizeof(Frame), fr.len);
            off += sizeof(Frame) + round8(fr.len);
            continue;
        }
        if (fr.id >= ams_.size())
            abort_job("rank " + std::to_string(rank_) + " received active message #" +
                      std::to_string(fr.id) + " from rank " + std::to_string(source) +
                      ", but only " + std::to_string(ams_.size()) +
                      " are registered here; active messages must be created in the same "
                      "order on every rank");
        ActiveMsgBase& am = *ams_[fr.id];
        if (fr.sig != am.signature()) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "0x%08x, here 0x%08x", fr.sig, am.signature());
            abort_job("rank " + std::to_string(rank_) + ": active message #" +
                      std::to_string(fr.id) + " from rank " + std::to_string(source) +
                      " has a different signature than '" + am.name() + "' here (" + buf +
                      "; local types: " + std::string(am.types()) +
                      "); active messages must be created in the same order with the same "
                      "argument types on every rank");
        }
        cur_seq_ = recv_seq_[static_cast<std::size_t>(source)]++;
        trace::Buffer* tb = trace::recording() ? trace::this_thread() : nullptr;
        std::uint64_t outer = trace::kNone;
        trace::Event* ev = nullptr;
        if (tb) [[unlikely]] {  // the handler is the context of what it does (promises, sends)
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
            am.on_frame(source, data + off + sizeof(Frame), fr.len);
        } catch (const WireError& e) {
            abort_job("rank " + std::to_string(rank_) + ": malformed active message '" + am.name() +
                      "' from rank " + std::to_string(source) + ": " + e.what());
        } catch (...) {
            handler_failed(am, source, std::current_exception(), "handler");
        }
        if (tb) [[unlikely]] {
            if (ev) ev->t1 = trace::stamp();
            tb->context = outer;
        }
        if (!am.is_large()) ++processed_;
        off += sizeof(Frame) + round8(fr.len);
    }
}

void Communicator::receive_big(int source, const char* announce, std::size_t size) {
    if (size < 8)
        abort_job("rank " + std::to_string(rank_) + ": bad announce from rank " +
                  std::to_string(source));
    std::uint64_t bytes = 0;
    std::memcpy(&bytes, announce, 8);
    // Handlers may call progress() and receive another big message: take the buffer along.
    detail::Bytes buf = std::move(recv_buf_);
    recv_buf_ = {};
    if (buf.size() < bytes) buf.resize(bytes);
    MPI_Status st;
    check_mpi(MPI_Recv(buf.data(), static_cast<int>(bytes), MPI_BYTE, source, TAG_BIG, comm_, &st),
              "MPI_Recv");
    run_frames(source, buf.data(), bytes);
    if (recv_buf_.capacity() < buf.capacity()) recv_buf_ = std::move(buf);
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
    const int parity = static_cast<int>(epoch_ & 1);
    AmSlots& set = am_[parity];
    for (int i = 0; i < kMaxMessagesPerProgress && set.count > 0 && !shutdown_; ++i) {
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
        post_am_slot(parity, slot);
        // What the handlers queued (replies, typically) leaves now, not one poll later.
        flush();
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

bool Communicator::progress() {
    const bool was = on_comm_thread();
    tls_comm_thread = this;
    const std::int64_t t0 = trace::recording() ? trace::stamp() : 0;
    const std::uint64_t before = mpi_sends_ + processed_;
    const std::size_t sends_before = sends_.size();
    flush();
    test_sends();
    bool any = receive();
    any |= test_large_recvs();
    if (!was) tls_comm_thread = nullptr;
    any = any || mpi_sends_ + processed_ != before || sends_.size() != sends_before;
    if (t0 != 0 && any) [[unlikely]] {
        trace::mark_progress_thread();
        if (trace::Buffer* tb = trace::this_thread()) tb->slice(trace::Kind::progress, t0);
    }
    return any;
}

bool Communicator::is_done() const {
    return outbox_pending_.load(std::memory_order_acquire) == 0 && sends_.empty() &&
           large_recvs_.empty();
}

bool Communicator::wants_progress() const {
    return outbox_pending_.load(std::memory_order_seq_cst) != 0;
}

void Communicator::flush_blocking() {
    // Wait for the messages queued so far while still receiving: a send to ourselves, or to a
    // rank that is itself blocked sending to us, completes only if we keep receiving. Large
    // bodies are not waited for (their on_sent says when): the receive of a body queued
    // behind the running handler is posted only after that handler returns.
    flush();
    const std::uint64_t upto = send_serial_;
    auto pending = [&] {
        return std::any_of(sends_.begin(), sends_.end(),
                           [&](const PendingSend& s) { return !s.large && s.serial < upto; });
    };
    while (pending()) {
        progress();
        if (pending()) std::this_thread::yield();
    }
}

// ---- completion detection ------------------------------------------------------------------

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
    sends_.push_back(std::move(ps));
}

void Communicator::on_ctrl(int source, const CtrlMsg& m) {
    if (trace::recording()) [[unlikely]]
        trace_ctrl(source, m, true);
    if (m.epoch != epoch_) {
        // A message of a later epoch (its sender finished this one first) is kept for then;
        // one of an earlier epoch cannot matter any more.
        if (static_cast<std::int32_t>(m.epoch - epoch_) > 0) {
            early_ctrl_.emplace_back(source, m);
        } else if (opts_.verb > 0) {
            std::cerr << "cascade: rank " << rank_ << ": ignoring control message " << m.type
                      << " of epoch " << m.epoch << " (now " << epoch_ << ")\n";
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
           large_recvs_.empty() && pending_large_sends_ == 0;
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
        // Step 1: report changed counts to rank 0 — once the rank has stayed idle a moment,
        // so that short gaps between tasks do not flood rank 0 with COUNTs.
        if ((q != last_q_ || p != last_p_) && now - *idle_since_ >= count_delay_) {
            // Each further COUNT in this epoch means the last one was premature: wait
            // longer next time (a busy application idles briefly and often).
            if (last_q_ != ~0ull)
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

void Communicator::reset_epoch() {
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

PollResult Communicator::poll(Threadpool& tp) {
    tls_comm_thread = this;
    if (tp.failed()) {
        if (size_ > 1) {
            const std::string what =
                detail::describe_error(tp.error());  // TaskError names the rank already
            abort_job(what.rfind("rank ", 0) == 0 ? what
                                                  : "rank " + std::to_string(rank_) + ": " + what);
        }
        return PollResult::done;  // one rank: join() rethrows the error
    }
    const bool active = progress();
    if (completion_step(tp)) {
        // Everything sent was processed somewhere. Start the next epoch now: while we finish
        // our sends below, other ranks that already got SHUTDOWN may send us control
        // messages of the next epoch, which must count there.
        // Only complete sends here: running handlers now would run messages of the next
        // epoch inside this one (ranks that finished first may have sent them already).
        reset_epoch();
        while (!sends_.empty()) {
            test_sends();
            if (!sends_.empty()) std::this_thread::yield();
        }
        return PollResult::done;
    }
    // Transfers in flight need progress calls to move (rendezvous protocols): keep polling.
    const bool in_flight = !large_recvs_.empty() || pending_large_sends_ > 0;
    if (!active && in_flight) std::this_thread::yield();  // leave the core to workers meanwhile
    if (active || in_flight) return PollResult::active;
    return locally_idle(tp) ? PollResult::waiting : PollResult::idle;
}

void Communicator::attach(Threadpool& tp) {
    tp_ = &tp;
    tp.set_join_hook(this);
}

void Communicator::detach(Threadpool& tp) noexcept {
    if (tp_ == &tp) tp_ = nullptr;
}

std::string Communicator::describe_state() const {
    std::ostringstream os;
    os << "messages: " << queued() << " active messages queued here, " << processed_
       << " processed here; " << outbox_pending_.load() << " destination(s) with unsent messages, "
       << sends_.size() << " MPI send(s) in flight, " << large_recvs_.size()
       << " large bod(ies) being received; completion: epoch " << epoch_;
    if (last_q_ == ~0ull)
        os << ", no COUNT sent yet";
    else
        os << ", last COUNT sent (" << last_q_ << " queued, " << last_p_ << " processed)";
    if (have_request_) os << ", REQUEST " << req_tag_ << " not yet confirmable";
    if (rank_ == 0) {
        std::uint64_t sq = 0, sp = 0;
        for (int r = 0; r < size_; ++r) {
            sq += cnt_q_[static_cast<std::size_t>(r)];
            sp += cnt_p_[static_cast<std::size_t>(r)];
        }
        os << "; rank 0 has counts from " << n_reported_ << " of " << size_
           << " ranks (sums: " << sq << " queued, " << sp << " processed)";
        if (n_reported_ < size_) {
            os << ", missing:";
            for (int r = 0; r < size_; ++r)
                if (!reported_[static_cast<std::size_t>(r)]) os << ' ' << r;
        }
    }
    return os.str();
}

void Communicator::abort_job(const std::string& what) {
    std::fprintf(stderr, "cascade: fatal: %s\n", what.c_str());
    std::fflush(stderr);
    MPI_Abort(comm_ != MPI_COMM_NULL ? comm_ : MPI_COMM_WORLD, 1);
    std::abort();
}

}  // namespace cascade
