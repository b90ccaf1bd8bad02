// Detection of broadcasts (dynamic broadcasts paper, §3.1): the sends a task or a handler
// makes are held on its thread until it ends; then the sends of one active message with the
// same argument bytes (large ones: the same body pointer and length) to several ranks leave
// as one broadcast, and the others leave as they were made, in their order. A task's end is
// the pool's task epilogue (also run before a waiting task runs another one); a handler's end
// is the return of the outermost handler on the communication thread, or a progress() call
// inside it.
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cascade/broadcast/detail/engine.hpp"
#include "cascade/core/detail/task_epilogue.hpp"
#include "cascade/core/errors.hpp"

namespace cascade::broadcast::detail {

namespace {

class HeldSends final : public cascade::detail::TaskEpilogue {
  public:
    static HeldSends& here() {
        thread_local HeldSends h;
        return h;
    }

    char* begin(Engine* e, ActiveMsgBase& am, int dest, std::size_t max_bytes) {
        if (held_.empty()) first_held(e);
        const std::size_t at = (buf_.size() + 7) & ~std::size_t(7);
        buf_.resize(at + max_bytes);
        note_dest(dest);
        held_.push_back(Held{e, &am, dest, at, 0, nullptr, 0, {}});
        cascade::detail::tls_task_epilogue = this;
        return buf_.data() + at;
    }
    void end(char* end) {
        Held& h = held_.back();
        h.len = static_cast<std::size_t>(end - (buf_.data() + h.off));
        buf_.resize(h.off + h.len);
        if (buf_.size() + held_body_bytes_ >= check_at_) [[unlikely]]
            check_release();
    }
    void add_large(Engine* e, ActiveMsgBase& am, int dest, const void* body, std::size_t bytes,
                   std::vector<char>& args) {
        if (held_.empty()) first_held(e);
        note_dest(dest);
        held_.push_back(Held{e, &am, dest, 0, 0, body, bytes, std::move(args)});
        held_.back().large = true;
        held_body_bytes_ += bytes;
        cascade::detail::tls_task_epilogue = this;
        if (buf_.size() + held_body_bytes_ >= check_at_) check_release();
    }

    // What is held leaves now, in order (a send that is not held follows).
    void release() noexcept {
        if (!held_.empty()) run_epilogue();
    }

    void run_epilogue() noexcept override {
        cascade::detail::tls_task_epilogue = nullptr;
        Engine* failed_on = nullptr;
        try {
            flush(failed_on);
        } catch (...) {
            const std::string what = cascade::detail::describe_error(std::current_exception());
            held_.clear();
            buf_.clear();
            held_body_bytes_ = 0;
            if (failed_on)
                failed_on->comm().abort_job("rank " + std::to_string(failed_on->comm().rank()) +
                                            ": sending held-back messages failed: " + what);
        }
    }

  private:
    // When what is held leaves before the task ends (checked once the held bytes reach
    // check_at_, so that a held send costs one comparison):
    // - a task streaming to one rank: once its held sends fill an aggregation buffer, they
    //   leave (in order), so that sending overlaps the rest of the task. Only sends that all
    //   name one rank so far leave early: a loop over destinations still merges;
    // - held bytes count toward the back-pressure window (CommunicatorOptions::
    //   max_bytes_in_flight of the first held send's communicator): past it, what is held
    //   leaves, and the sends wait for room as unheld ones do. A task sending millions of
    //   distinct messages holds at most a window of them.
    void first_held(Engine* e) noexcept {
        const std::size_t cap = e->comm().max_bytes_in_flight();
        cap_ = cap == 0 ? ~std::size_t(0) : cap;
        check_at_ = std::min(cap_, kEarlyRelease);
    }
    void check_release() {
        const std::size_t held = buf_.size() + held_body_bytes_;
        if ((one_dest_ >= 0 && buf_.size() >= kEarlyRelease) || held > cap_) {
            run_epilogue();
            return;
        }
        std::size_t next = cap_ == ~std::size_t(0) ? cap_ : cap_ + 1;
        if (one_dest_ >= 0) next = std::min(next, held_body_bytes_ + kEarlyRelease);
        check_at_ = std::max(next, held + 1);
    }

    static constexpr std::size_t kEarlyRelease = std::size_t(64) << 10;  // bytes of arguments

    struct Held {
        Engine* engine;
        ActiveMsgBase* am;
        int dest;
        std::size_t off, len;  // small: arguments in buf_
        const void* body;      // large
        std::size_t bytes;
        std::vector<char> args;
        bool large = false;
        bool done = false;
    };

    bool same(const Held& a, const Held& b) const {
        if (a.engine != b.engine || a.am != b.am || a.large != b.large) return false;
        if (a.large) return a.body == b.body && a.bytes == b.bytes && a.args == b.args;
        return a.len == b.len && std::memcmp(buf_.data() + a.off, buf_.data() + b.off, a.len) == 0;
    }

    void send_one(Held& h) {
        if (h.large) {
            cascade::detail::LayerLink::enqueue_large(h.engine->comm(), h.dest, *h.am, h.body,
                                                      h.bytes, std::move(h.args));
            return;
        }
        const char* p = buf_.data() + h.off;
        const std::size_t n = h.len;
        cascade::detail::LayerLink::enqueue(h.engine->comm(), h.dest, *h.am, n, [&](char* out) {
            if (n) std::memcpy(out, p, n);
            return out + n;
        });
    }

    // Equal sends (same AM, same argument bytes; for large ones the same body and length)
    // form one class; classes go out in the order of their first send, as one tree when
    // they name two ranks or more. Classes are found through a hash of each send, sorted:
    // O(n log n) in the task's sends (a task may send millions).
    std::uint64_t key_of(const Held& h) const {
        std::uint64_t k = std::hash<const void*>{}(h.engine) * 31 + std::hash<const void*>{}(h.am);
        k = k * 31 + (h.large ? 1 : 0);
        if (h.large) {
            k = k * 31 + std::hash<const void*>{}(h.body);
            k = k * 31 + h.bytes;
            k = k * 31 +
                std::hash<std::string_view>{}(std::string_view(h.args.data(), h.args.size()));
        } else {
            k = k * 31 +
                std::hash<std::string_view>{}(std::string_view(buf_.data() + h.off, h.len));
        }
        return k;
    }

    // Whether every held send names the same rank: then none can merge into a broadcast and
    // they leave in order without being grouped (a task streaming messages to one rank).
    void note_dest(int dest) noexcept {
        if (held_.empty())
            one_dest_ = dest;
        else if (one_dest_ != dest)
            one_dest_ = -1;
    }

    void flush(Engine*& failed_on) {
        const std::size_t n = held_.size();
        if (one_dest_ >= 0) {
            // In order, consecutive small ones of one Communicator under one outbox lock.
            run_.clear();
            Engine* run_engine = nullptr;
            auto send_run = [&] {
                if (!run_.empty())
                    cascade::detail::LayerLink::enqueue_many(run_engine->comm(), one_dest_, run_);
                run_.clear();
            };
            for (Held& h : held_) {
                failed_on = h.engine;
                if (h.large || h.engine != run_engine) send_run();
                if (h.large) {
                    send_one(h);
                    continue;
                }
                run_engine = h.engine;
                run_.push_back({h.am, buf_.data() + h.off, h.len});
            }
            send_run();
            held_.clear();
            buf_.clear();
            held_body_bytes_ = 0;
            return;
        }
        constexpr std::size_t none = ~std::size_t(0);
        keyed_.resize(n);
        for (std::size_t i = 0; i < n; ++i)
            keyed_[i] = {key_of(held_[i]), i};
        std::sort(keyed_.begin(), keyed_.end());  // by key, then by position
        // next_[i]: the following member of i's class (in send order); first_[i]: i starts one.
        next_.assign(n, none);
        first_.assign(n, 0);
        for (std::size_t a = 0; a < n;) {
            std::size_t b = a + 1;
            while (b < n && keyed_[b].first == keyed_[a].first)
                ++b;
            for (std::size_t x = a; x < b; ++x) {
                const std::size_t i = keyed_[x].second;
                if (held_[i].done) continue;  // already in a class (done marks membership here)
                first_[i] = 1;
                std::size_t last = i;
                for (std::size_t y = x + 1; y < b; ++y) {
                    const std::size_t j = keyed_[y].second;
                    if (!held_[j].done && same(held_[i], held_[j])) {
                        held_[j].done = true;
                        next_[last] = j;
                        last = j;
                    }
                }
            }
            a = b;
        }
        // A class that names one rank only is no broadcast: its sends go out where they were
        // made, so that the order of a rank's messages stays the order they were sent in.
        for (std::size_t i = 0; i < n; ++i) {
            if (!first_[i]) continue;
            bool two = false;
            for (std::size_t g = next_[i]; g != none && !two; g = next_[g])
                two = held_[g].dest != held_[i].dest;
            if (!two)
                for (std::size_t g = i; g != none; g = next_[g])
                    first_[g] = 2;  // plain
        }
        std::vector<int> dests;
        std::vector<std::size_t> repeats;
        for (std::size_t i = 0; i < n; ++i) {
            Held& h = held_[i];
            failed_on = h.engine;
            if (first_[i] == 2) {
                send_one(h);
                continue;
            }
            if (!first_[i]) continue;  // sent with the head of its class
            // One tree to the distinct destinations; a rank named twice gets the repeat as a
            // plain message (it was sent twice).
            dests.clear();
            repeats.clear();
            for (std::size_t g = i; g != none; g = next_[g]) {
                const int d = held_[g].dest;
                if (std::find(dests.begin(), dests.end(), d) == dests.end())
                    dests.push_back(d);
                else
                    repeats.push_back(g);
            }
            if (h.large) {
                h.engine->tree_large(*h.am, dests, {}, h.body, h.bytes, h.args, dests.size(),
                                     dests.size());
            } else {
                h.engine->tree_small(*h.am, dests, {}, buf_.data() + h.off, h.len, dests.size());
            }
            for (std::size_t r : repeats)
                send_one(held_[r]);
        }
        held_.clear();
        buf_.clear();
        held_body_bytes_ = 0;
    }

    std::vector<Held> held_;
    cascade::detail::Bytes buf_;
    std::vector<std::pair<std::uint64_t, std::size_t>> keyed_;  // scratch of flush()
    std::vector<std::size_t> next_;
    std::vector<cascade::detail::LayerLink::HeldArgs>
        run_;                            // scratch of flush(): sends to one rank
    std::vector<char> first_;            // 1: the first send of a class, 2: a plain send
    int one_dest_ = -1;                  // the rank every held send names, or -1
    std::size_t held_body_bytes_ = 0;    // bodies of the held large sends
    std::size_t cap_ = ~std::size_t(0);  // the window (first_held)
    std::size_t check_at_ = 0;           // held bytes at which check_release looks
};

}  // namespace

bool Engine::holding_here() const noexcept {
    if (cascade::detail::tls_handler_depth > 0) return comm_.on_comm_thread();
    Threadpool* tp = cascade::detail::LayerLink::pool(comm_);
    return tp && tp->current_thread() >= 0;
}

char* Engine::defer_begin(ActiveMsgBase& am, int dest, std::size_t max_bytes) {
    if (!holding_here()) return nullptr;
    if (dest < 0 || dest >= size_ || max_bytes > cascade::detail::kMaxArgumentBytes)
        return nullptr;  // the plain send reports it
    // Big arguments are not held: copying them aside, then into the outbox, costs more than
    // a tree saves them (bodies of large active messages, compared by address, are how big
    // data is broadcast without copies). What is held leaves first: the order stays.
    if (max_bytes > kHoldMax) {
        HeldSends::here().release();
        return nullptr;
    }
    return HeldSends::here().begin(this, am, dest, max_bytes);
}

void Engine::defer_end(char* end) {
    HeldSends::here().end(end);
}

bool Engine::defer_large(ActiveMsgBase& am, int dest, const void* body, std::size_t bytes,
                         std::vector<char>& args) {
    if (!holding_here() || dest < 0 || dest >= size_) return false;
    HeldSends::here().add_large(this, am, dest, body, bytes, args);
    return true;
}

}  // namespace cascade::broadcast::detail
