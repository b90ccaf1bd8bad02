#include "cascade/futures/async.hpp"

#include <atomic>

namespace cascade {

namespace {
std::atomic<Futures*> g_current{nullptr};
}

Futures::Futures(Threadpool& tp, Communicator* comm)
    : tp_(tp), comm_(comm), fns_(new std::atomic<detail::FnBase*>[kMaxFunctions]) {
    for (std::size_t i = 0; i < kMaxFunctions; ++i)
        fns_[i].store(nullptr, std::memory_order_relaxed);
    if (comm_) {
        rank_ = comm_->comm_rank();
        size_ = comm_->comm_size();
        // Registered here, so a Futures must be created at the same point on every rank.
        ams_[request_msg] = comm_->make_active_msg(
            [this](view<char>& v) { on_request(v.data(), v.size()); }, "futures.request");
        ams_[reply_msg] = comm_->make_active_msg(
            [this](view<char>& v) { on_reply(v.data(), v.size()); }, "futures.reply");
        ams_[fetch_msg] = comm_->make_active_msg(
            [this](view<char>& v) { on_fetch(v.data(), v.size()); }, "futures.fetch");
        // Bodies of big arguments, attached to requests (never sent as messages of their own).
        body_am_ = comm_->make_large_active_msg(
            [](std::uint64_t& sink) {
                reinterpret_cast<detail::BodySink*>(static_cast<std::uintptr_t>(sink))
                    ->body_arrived();
            },
            [](std::uint64_t&) -> char* { return nullptr; },
            [](std::uint64_t& body) {
                delete reinterpret_cast<detail::Body*>(static_cast<std::uintptr_t>(body));
            },
            "futures.body");
    }
    previous_ = g_current.exchange(this, std::memory_order_acq_rel);
}

Futures::~Futures() {
    Futures* self = this;
    g_current.compare_exchange_strong(self, previous_, std::memory_order_acq_rel);
    std::lock_guard<std::mutex> g(exports_mutex_);
    for (auto& [id, ex] : exports_)
        ex.state->release();
    exports_.clear();
}

Futures* Futures::current() noexcept {
    return g_current.load(std::memory_order_acquire);
}

int Futures::place(int where) {
    if (where == here) return rank_;
    if (where == any)
        return size_ == 1 ? rank_
                          : static_cast<int>(round_robin_.fetch_add(1, std::memory_order_relaxed) %
                                             static_cast<unsigned>(size_));
    if (where < 0 || where >= size_)
        throw UsageError("async: rank " + std::to_string(where) + " outside [0, " +
                         std::to_string(size_) + ")");
    return where;
}

std::size_t Futures::exported() const {
    std::lock_guard<std::mutex> g(exports_mutex_);
    return exports_.size();
}

std::uint64_t Futures::export_state(detail::StateBase* s, SendExported send) {
    const auto id = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(s));
    std::lock_guard<std::mutex> g(exports_mutex_);
    auto [it, fresh] = exports_.try_emplace(id, Export{s, 0, send});
    if (fresh) s->retain();
    ++it->second.count;
    return id;
}

void Futures::receive_body(int source, void* dest, std::size_t bytes, std::size_t chunk,
                           detail::BodySink* sink) {
    bodies_received_.fetch_add(1, std::memory_order_relaxed);
    comm_->receive_body(source, *body_am_, dest, bytes, chunk, detail::body_token(sink));
}

void Futures::fetch(int owner, std::uint64_t id, detail::StateBase* proxy) {
    proxy->retain();  // carried as the token, adopted by the reply
    const detail::FetchHead h{rank_, 0, id, reinterpret_cast<std::uintptr_t>(proxy)};
    send_frame(owner, fetch_msg, sizeof h, [&](char* out) {
        wire::Writer w(out);
        w.put(h);
        return w.position();
    });
}

void Futures::on_request(const char* data, std::size_t size) {
    wire::Reader r(data, size);
    const auto h = r.get<detail::RequestHead>();
    if (h.fn >= n_fns_.load(std::memory_order_acquire))
        throw UsageError("rank " + std::to_string(rank_) + " received a call of async function #" +
                         std::to_string(h.fn) + " from rank " + std::to_string(h.rank) +
                         ", but only " + std::to_string(n_fns_.load()) +
                         " are registered here; register async functions (make_async) in the "
                         "same order on every rank");
    detail::FnBase* e = fns_[h.fn].load(std::memory_order_acquire);
    if (e->sig != h.sig)
        throw UsageError("rank " + std::to_string(rank_) + ": async function #" +
                         std::to_string(h.fn) + " called from rank " + std::to_string(h.rank) +
                         " has other types than '" + e->name +
                         "' here; register async functions (make_async) in the same order with "
                         "the same signature on every rank");
    e->on_request(*this, h.rank, h.token, r);
}

void Futures::on_reply(const char* data, std::size_t size) {
    wire::Reader r(data, size);
    const auto h = r.get<detail::ReplyHead>();
    detail::Ref<detail::StateBase> st(reinterpret_cast<detail::StateBase*>(h.token));
    if (h.status == 0)
        st->set_from_wire(r);
    else
        st->set_error(std::make_exception_ptr(RemoteError(h.rank, r.get<std::string>())));
}

namespace {
// Sends an exported state's value to the rank that fetched it, once it is there.
struct FetchReply final : detail::Callback {
    Futures* fx;
    Futures::SendExported send;
    int dest;
    std::uint64_t token;
    FetchReply(Futures* f, Futures::SendExported s, int d, std::uint64_t t)
        : fx(f), send(s), dest(d), token(t) {}
    void fire(detail::StateBase& s) noexcept override {
        send(*fx, s, dest, token);
        s.release();
        delete this;
    }
};
}  // namespace

void Futures::on_fetch(const char* data, std::size_t size) {
    wire::Reader r(data, size);
    const auto h = r.get<detail::FetchHead>();
    Export ex{};
    {
        std::lock_guard<std::mutex> g(exports_mutex_);
        auto it = exports_.find(h.id);
        if (it == exports_.end())
            throw UsageError("rank " + std::to_string(rank_) + ": rank " + std::to_string(h.rank) +
                             " fetched a shared future that is not exported here");
        ex = it->second;
        if (--it->second.count == 0)
            exports_.erase(it);  // its reference passes to the reply below
        else
            ex.state->retain();
    }
    ex.state->on_ready(new FetchReply(this, ex.send, h.rank, h.token));
}

}  // namespace cascade
