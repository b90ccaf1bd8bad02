// ReplyTokens: the states waiting for an answer from another rank (a call's result, a
// fetched value), named on the wire by a token this table checks. A reply carries its token
// back; a token that names no waiting state (a malformed or repeated reply) is refused,
// instead of being taken for an address.
//
// A token is a slot index (low 32 bits) and the slot's generation (high 32 bits, odd while
// the slot holds a state): a slot reused for another state answers only the new token.
// add() may be called from any thread, take() from any thread, each without locks: free
// slots form a stack whose head carries a tag against ABA. Each thread keeps a few free slots
// of its own (the last table it used), so that a thread that takes the replies of the calls
// it makes (the communication thread, a main thread in get()) issues and retires tokens
// without a read-modify-write on shared words but the one that retires a token.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace cascade::detail {

template <class T>
class ReplyTokens {
  public:
    ReplyTokens() : id_(next_id()) {
        for (auto& c : chunks_)
            c.store(nullptr, std::memory_order_relaxed);
    }
    ReplyTokens(const ReplyTokens&) = delete;
    ReplyTokens& operator=(const ReplyTokens&) = delete;
    ~ReplyTokens() {
        for (auto& c : chunks_)
            delete[] c.load(std::memory_order_relaxed);
    }

    // A token naming p until take() returns it. Throws std::bad_alloc when 2^26 states wait
    // at once.
    std::uint64_t add(T* p) {
        Local& l = local();
        const std::uint32_t i = l.owner == id_ && l.n > 0 ? l.idx[--l.n] : pop_free();
        Slot& s = slot(i);
        const std::uint32_t g = s.gen.load(std::memory_order_relaxed) + 1;  // odd: live
        s.ptr.store(p, std::memory_order_relaxed);
        s.gen.store(g, std::memory_order_release);
        return (std::uint64_t(g) << 32) | i;
    }

    // The state `token` names, which is forgotten; null when the token names none.
    T* take(std::uint64_t token) noexcept {
        const auto i = static_cast<std::uint32_t>(token);
        auto g = static_cast<std::uint32_t>(token >> 32);
        if ((g & 1) == 0 || i >= fresh_.load(std::memory_order_acquire)) return nullptr;
        Slot* s = find(i);
        if (!s || s->gen.load(std::memory_order_acquire) != g) return nullptr;
        T* p = s->ptr.load(std::memory_order_relaxed);
        if (!s->gen.compare_exchange_strong(g, g + 1, std::memory_order_acq_rel)) return nullptr;
        Local& l = local();
        if (l.owner != id_ && l.n == 0) l.owner = id_;
        if (l.owner == id_ && l.n < kLocal)
            l.idx[l.n++] = i;
        else
            push_free(i);
        return p;
    }

    // States waiting now (for tests and diagnostics): a scan of the slots handed out.
    std::size_t size() const noexcept {
        std::size_t n = 0;
        const std::uint32_t end = fresh_.load(std::memory_order_acquire);
        for (std::uint32_t i = 0; i < end; ++i)
            if (const Slot* s = find(i); s && (s->gen.load(std::memory_order_acquire) & 1)) ++n;
        return n;
    }

  private:
    static constexpr std::uint32_t kChunkBits = 12, kChunk = 1u << kChunkBits;
    static constexpr std::uint32_t kChunks = 1u << 14;  // 2^26 slots at most
    static constexpr std::uint32_t kNil = ~0u;
    static constexpr std::uint32_t kLocal = 32;
    // A thread's free slots of one table (named by its id, never reused: a table at the
    // address of a destroyed one does not take the old one's slots).
    struct Local {
        std::uint64_t owner = 0;
        std::uint32_t n = 0;
        std::uint32_t idx[kLocal];
    };
    static Local& local() noexcept {
        thread_local Local l;
        return l;
    }
    static std::uint64_t next_id() noexcept {
        static std::atomic<std::uint64_t> ids{0};
        return ids.fetch_add(1, std::memory_order_relaxed) + 1;
    }
    struct Slot {
        std::atomic<T*> ptr{nullptr};
        std::atomic<std::uint32_t> gen{0};
        std::atomic<std::uint32_t> next{kNil};  // in the free stack
    };

    Slot* find(std::uint32_t i) const noexcept {
        Slot* c = chunks_[i >> kChunkBits].load(std::memory_order_acquire);
        return c ? &c[i & (kChunk - 1)] : nullptr;
    }
    // A slot whose chunk exists (it was handed out before).
    Slot& existing(std::uint32_t i) const noexcept {
        return chunks_[i >> kChunkBits].load(std::memory_order_acquire)[i & (kChunk - 1)];
    }
    Slot& slot(std::uint32_t i) {
        std::atomic<Slot*>& cell = chunks_[i >> kChunkBits];
        Slot* c = cell.load(std::memory_order_acquire);
        if (!c) {
            auto fresh = std::make_unique<Slot[]>(kChunk);
            if (cell.compare_exchange_strong(c, fresh.get(), std::memory_order_acq_rel))
                c = fresh.release();
        }
        return c[i & (kChunk - 1)];
    }
    std::uint32_t pop_free() {
        std::uint64_t h = free_.load(std::memory_order_acquire);
        while (static_cast<std::uint32_t>(h) != kNil) {
            const auto i = static_cast<std::uint32_t>(h);
            const std::uint32_t next = existing(i).next.load(std::memory_order_relaxed);
            const std::uint64_t nh = ((h >> 32) + 1) << 32 | next;
            if (free_.compare_exchange_weak(h, nh, std::memory_order_acq_rel)) return i;
        }
        const std::uint32_t i = fresh_.load(std::memory_order_relaxed);
        if (i >= kChunk * kChunks) throw std::bad_alloc();
        // A fresh slot: its chunk exists before fresh_ says so (take() reads fresh_ first).
        std::uint32_t want = i;
        for (;;) {
            slot(want);
            if (fresh_.compare_exchange_weak(want, want + 1, std::memory_order_acq_rel))
                return want;
            if (want >= kChunk * kChunks) throw std::bad_alloc();
        }
    }
    void push_free(std::uint32_t i) noexcept {
        Slot& s = existing(i);
        std::uint64_t h = free_.load(std::memory_order_relaxed);
        for (;;) {
            s.next.store(static_cast<std::uint32_t>(h), std::memory_order_relaxed);
            const std::uint64_t nh = ((h >> 32) + 1) << 32 | i;
            if (free_.compare_exchange_weak(h, nh, std::memory_order_release,
                                            std::memory_order_relaxed))
                break;
        }
    }

    std::atomic<Slot*> chunks_[kChunks];
    std::atomic<std::uint64_t> free_{kNil};  // tag << 32 | top index
    std::atomic<std::uint32_t> fresh_{0};    // slots handed out at least once
    const std::uint64_t id_;
};

}  // namespace cascade::detail
