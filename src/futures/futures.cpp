#include "cascade/futures/async.hpp"

#include <atomic>

namespace cascade {

namespace {
std::atomic<Futures*> g_current{nullptr};
}

namespace detail {
bool unlist_import(Futures* fx, const ImportKey& key, StateBase* self) noexcept {
    if (Futures::current() != fx) return false;  // that Futures is gone
    std::lock_guard<std::mutex> g(fx->imports_mutex_);
    auto it = fx->imports_.find(key);
    if (it == fx->imports_.end() || it->second != self) return false;
    fx->imports_.erase(it);
    return true;
}
void forget_import(Futures* fx, const ImportKey& key, StateBase* self,
                   std::uint64_t weight) noexcept {
    if (Futures::current() != fx) return;
    unlist_import(fx, key, self);
    if (weight > 0) fx->release_export(key.owner, key.id, weight);
}
}  // namespace detail

Futures::Futures(Threadpool& tp, Communicator* comm)
    : tp_(tp), comm_(comm), fns_(new std::atomic<detail::FnBase*>[kMaxFunctions]) {
    for (std::size_t i = 0; i < kMaxFunctions; ++i)
        fns_[i].store(nullptr, std::memory_order_relaxed);
    if (comm_) {
        rank_ = comm_->rank();
        size_ = comm_->ranks();
        // Registered here, so a Futures must be created at the same point on every rank.
        ams_[request_msg] = comm_->make_active_msg(
            [this](view<char>& v) { on_request(detail::tls_frame_source, v.data(), v.size()); },
            "futures.request");
        ams_[reply_msg] = comm_->make_active_msg(
            [this](view<char>& v) { on_reply(detail::tls_frame_source, v.data(), v.size()); },
            "futures.reply");
        ams_[fetch_msg] = comm_->make_active_msg(
            [this](view<char>& v) { on_fetch(detail::tls_frame_source, v.data(), v.size()); },
            "futures.fetch");
        // Bodies of big arguments, attached to requests (never sent as messages of their own).
        body_am_ = comm_->make_large_active_msg(
            [](std::uint64_t& sink) {
                reinterpret_cast<detail::BodySink*>(static_cast<std::uintptr_t>(sink))
                    ->body_arrived();
            },
            // Bodies are posted by the handlers of the messages they belong to: a frame of
            // this message from the wire is malformed (its argument is not trusted).
            [](std::uint64_t&) -> char* {
                throw WireError("futures.body sent as a message of its own");
            },
            [](std::uint64_t& body) {
                delete reinterpret_cast<detail::Body*>(static_cast<std::uintptr_t>(body));
            },
            "futures.body");
        comm_->add_after_progress(&Futures::run_deferred, this);
    }
    previous_ = g_current.exchange(this, std::memory_order_acq_rel);
}

Futures::~Futures() {
    if (comm_ && comm_->has_after_progress(&Futures::run_deferred, this)) {
        run_deferred(this);  // none expected: progress() runs them before it returns
        comm_->remove_after_progress(&Futures::run_deferred, this);
    }
    Futures* self = this;
    g_current.compare_exchange_strong(self, previous_, std::memory_order_acq_rel);
    {
        std::lock_guard<std::mutex> g(imports_mutex_);
        imports_.clear();  // proxies still alive no longer report here (see forget_import)
    }
    std::lock_guard<std::mutex> g(exports_mutex_);
    for (auto& [id, ex] : exports_)
        ex.state->release();
    exports_.clear();
}

bool Futures::defer_to_comm_thread(detail::Job* job) {
    // Only while a progress() call of ours is on the stack (it runs the job before it
    // returns), not from a job it runs (which may wait for anything), and while no worker
    // has anything to do (the job would otherwise delay messages for no gain).
    if (!comm_ || running_deferred_ || !comm_->has_after_progress(&Futures::run_deferred, this) ||
        !comm_->in_progress() || tp_.current_thread() >= 0 || tp_.failed() || !tp_.idle())
        return false;
    deferred_.push_back(job);
    return true;
}

bool Futures::run_deferred(void* self) {
    auto* fx = static_cast<Futures*>(self);
    if (fx->deferred_.empty() || fx->running_deferred_) return false;
    fx->running_deferred_ = true;
    // A job may drive progress (a get()): calls arriving meanwhile go to the workers.
    for (std::size_t i = 0; i < fx->deferred_.size(); ++i) {
        detail::Job* job = fx->deferred_[i];
        ++fx->calls_on_comm_thread_;
        job->run_job();
    }
    fx->deferred_.clear();
    fx->running_deferred_ = false;
    return true;
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

std::uint64_t Futures::export_state(detail::StateBase* s, SendExported send, ShareExported share,
                                    std::uint64_t weight) {
    std::lock_guard<std::mutex> g(exports_mutex_);
    if (s->export_id == 0) s->export_id = next_export_id_++;
    const std::uint64_t id = s->export_id;
    auto [it, fresh] = exports_.try_emplace(id, Export{s, 0, send, share});
    if (fresh) s->retain();
    it->second.count += weight;
    return id;
}

// Takes `weight` of export `id`; the returned Export's state carries one reference.
Futures::Export Futures::take(std::uint64_t id, std::uint64_t weight, int from) {
    std::lock_guard<std::mutex> g(exports_mutex_);
    auto it = exports_.find(id);
    if (it == exports_.end() || weight == 0 || weight > it->second.count)
        throw UsageError("rank " + std::to_string(rank_) + ": rank " + std::to_string(from) +
                         " fetched a shared future that is not exported here (or more of it "
                         "than was handed out)");
    Export ex = it->second;
    if ((it->second.count -= weight) == 0)
        exports_.erase(it);  // its reference passes to the caller
    else
        ex.state->retain();
    return ex;
}

detail::StateBase* Futures::take_export(std::uint64_t id, std::uint64_t weight, int from) {
    kept_in_place_.fetch_add(1, std::memory_order_relaxed);
    return take(id, weight, from).state;
}

void Futures::receive_body(int source, void* dest, std::size_t bytes, std::size_t chunk,
                           detail::BodySink* sink) {
    bodies_received_.fetch_add(1, std::memory_order_relaxed);
    try {
        cascade::detail::LayerLink::receive_body(*comm_, source, *body_am_, dest, bytes, chunk,
                                                 detail::body_token(sink));
    } catch (...) {
        // Not posted (a malformed header: the job ends): the sink expected this body, so it
        // hears of it now and lets go of what it held for it (a call not started yet frees).
        sink->body_arrived();
        throw;
    }
}

namespace {
// Gives an exported state's value to a proxy here (no copy), once it is there.
struct LocalShare final : detail::Callback {
    detail::StateBase* proxy;  // one reference
    detail::ShareValueFn share;
    LocalShare(detail::StateBase* p, detail::ShareValueFn f) : proxy(p), share(f) {}
    void fire(detail::StateBase& s) noexcept override {
        share(s, *proxy);
        proxy->release();
        s.release();
        delete this;
    }
};
// Sends an exported state's value to the rank that fetched it, once it is there.
struct FetchReply final : detail::Callback {
    Futures* fx;
    detail::SendValueFn send;
    int dest;
    std::uint64_t token;
    FetchReply(Futures* f, detail::SendValueFn s, int d, std::uint64_t t)
        : fx(f), send(s), dest(d), token(t) {}
    void fire(detail::StateBase& s) noexcept override {
        send(*fx, s, dest, token);
        s.release();
        delete this;
    }
};
}  // namespace

void Futures::fetch(int owner, std::uint64_t id, detail::StateBase* proxy, std::uint64_t weight) {
    if (owner == rank_) {                     // a value kept here, fetched back through a redirect
        Export ex = take(id, weight, rank_);  // throws (an unknown id) before any reference
        proxy->retain();                      // adopted by the share
        kept_in_place_.fetch_add(1, std::memory_order_relaxed);
        ex.state->on_ready(new LocalShare(proxy, ex.share));
        return;
    }
    proxy->retain();  // named by the fetch's token, adopted by the reply
    std::uint64_t token = 0;
    try {
        token = tokens_.add(proxy);
    } catch (...) {
        proxy->release();
        throw;
    }
    send_fetch(owner, {rank_, 0, id, token, weight});
}

void Futures::release_export(int owner, std::uint64_t id, std::uint64_t weight) {
    if (owner == rank_) {
        take(id, weight, rank_).state->release();
        return;
    }
    send_fetch(owner, {rank_, 1, id, 0, weight});
}

void Futures::send_fetch(int owner, const detail::FetchHead& h) {
    send_frame(owner, fetch_msg, sizeof h, [&](char* out) {
        wire::Writer w(out);
        w.put(h);
        return w.position();
    });
}

void Futures::send_redirect(int dest, std::uint64_t token, int owner, std::uint64_t id,
                            std::uint64_t weight) {
    const detail::ReplyHead h{rank_, detail::reply_redirect, token};
    send_frame(dest, reply_msg, sizeof h + 3 * sizeof(std::uint64_t), [&](char* out) {
        wire::Writer w(out);
        w.put(h);
        w.put(static_cast<std::uint64_t>(owner));
        w.put(id);
        w.put(weight);
        return w.position();
    });
}

void Futures::answer_when_ready(detail::StateBase& s, SendExported send, int dest,
                                std::uint64_t token) {
    s.retain();
    s.on_ready(new FetchReply(this, send, dest, token));
}

void Futures::on_request(int source, const char* data, std::size_t size) {
    wire::Reader r(data, size);
    const auto h = r.get<detail::RequestHead>();
    if (h.rank != source)
        throw WireError("call received from rank " + std::to_string(source) + " names rank " +
                        std::to_string(h.rank) + " as its sender");
    // Functions registered differently on two ranks: a mistake in the program's set-up, with
    // a caller waiting for a reply that cannot come; the job ends naming both ranks.
    if (h.fn >= n_fns_.load(std::memory_order_acquire))
        comm_->abort_job("rank " + std::to_string(rank_) + " received a call of async function #" +
                         std::to_string(h.fn) + " from rank " + std::to_string(h.rank) +
                         ", but only " + std::to_string(n_fns_.load()) +
                         " are registered here; register async functions (make_async) in the "
                         "same order on every rank");
    detail::FnBase* e = fns_[h.fn].load(std::memory_order_acquire);
    if (e->sig != h.sig)
        comm_->abort_job("rank " + std::to_string(rank_) + ": async function #" +
                         std::to_string(h.fn) + " called from rank " + std::to_string(h.rank) +
                         " is not '" + e->name +
                         "' here (another name or other types); register async functions "
                         "(make_async) in the same order with the same names and signatures on "
                         "every rank");
    e->on_request(*this, h.rank, h.token, r);
}

namespace {
// A value arriving as a body: publishes the state when its bytes are in.
struct ValueBody final : detail::BodySink {
    detail::Ref<detail::StateBase> st;
    explicit ValueBody(detail::Ref<detail::StateBase> s) : st(std::move(s)) {}
    void expect_body() noexcept override {}
    void body_arrived() noexcept override {
        st->end_body();
        st->settled();
        delete this;
    }
};
}  // namespace

void Futures::on_reply(int source, const char* data, std::size_t size) {
    wire::Reader r(data, size);
    const auto h = r.get<detail::ReplyHead>();
    if (h.rank != source)
        throw WireError("reply received from rank " + std::to_string(source) + " names rank " +
                        std::to_string(h.rank) + " as its sender");
    detail::StateBase* waiting = tokens_.take(h.token);
    if (!waiting) throw WireError("reply for no call or fetch waiting here (unknown token)");
    detail::Ref<detail::StateBase> st(waiting);
    switch (h.status) {
        case detail::reply_value:
            st->set_from_wire(r);
            st->settled();
            break;
        case detail::reply_error:
            st->set_error(std::make_exception_ptr(RemoteError(h.rank, r.get<std::string>())));
            st->settled();
            break;
        case detail::reply_body: {
            const auto n = r.get<std::uint64_t>();
            const auto chunk = r.get<std::uint64_t>();
            // Checked before the value is sized (receive_body would refuse it after).
            if (chunk > cascade::detail::LayerLink::kDefaultChunk)
                throw WireError("body chunk of " + std::to_string(chunk) + " bytes");
            std::size_t bytes = 0;
            void* dest = st->begin_body(n, bytes);
            receive_body(h.rank, dest, bytes, static_cast<std::size_t>(chunk),
                         new ValueBody(std::move(st)));
            break;
        }
        case detail::reply_redirect: {
            const auto owner = static_cast<int>(r.get<std::uint64_t>());
            const auto id = r.get<std::uint64_t>();
            const auto weight = r.get<std::uint64_t>();
            if (owner < 0 || owner >= size_)
                throw WireError("redirect to a rank that does not exist");
            fetch(owner, id, st.get(), weight);
            break;
        }
        case detail::reply_resident: {
            const auto id = r.get<std::uint64_t>();
            const auto weight = r.get<std::uint64_t>();
            st->set_resident(h.rank, id, weight);
            break;
        }
        default:
            throw WireError("bad reply status " + std::to_string(h.status));
    }
    r.expect_end();
}

void Futures::on_fetch(int source, const char* data, std::size_t size) {
    wire::Reader r(data, size);
    const auto h = r.get<detail::FetchHead>();
    if (h.rank != source)
        throw WireError("fetch received from rank " + std::to_string(source) + " names rank " +
                        std::to_string(h.rank) + " as its sender");
    Export ex = take(h.id, h.weight, h.rank);  // one reference to pass on
    if (h.release) {
        ex.state->release();
        return;
    }
    // A kept result whose value is elsewhere sends the fetch there (or queues it).
    if (ex.state->redirect(h.rank, h.token, ex.send)) {
        ex.state->release();
        return;
    }
    ex.state->on_ready(new FetchReply(this, ex.send, h.rank, h.token));
}

}  // namespace cascade
