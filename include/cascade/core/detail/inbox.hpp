// Inbox: the tasks that threads outside a pool (the main thread seeding a graph, the thread
// that runs message handlers) queue for one worker. Each such thread writes its own
// single-producer lane: a queue of tasks and a tail index it alone advances with plain
// stores, so a push takes no lock, no atomic read-modify-write and no fence, and never
// touches the cache lines the worker uses for its own queue. The worker (or a thief, under
// the worker's queue lock) moves published tasks into its ready queue in small batches. Lanes are
// unbounded: segments of tasks linked by the producer, handed back to it for reuse once read.
// A lane keeps the segments it emptied for its next pushes: before its pool starts, as many
// as its largest backlog (up to kKeep: a graph seeded before start() is read only once it
// was all queued); once the pool runs, kKeepRunning, the backlog at which a seeding thread
// waits (see below) plus the one it waits down to. A destroyed inbox leaves its segments to
// a process-wide cache (up to kKeep) that new lanes draw from: a thread that seeds a big
// graph at every step, or into a new pool, touches memory already mapped instead of paying
// a page fault every 64 tasks for segments the allocator gave back to the system meanwhile
// (32 MiB at most stay mapped that way).
//
// A producer learns, once per segment, whether its lane holds kHigh tasks the consumers have
// not taken yet (push returns busy): the pool then has that thread wait for its workers (see
// Threadpool::enqueue), so a thread that seeds faster than the workers run keeps a bounded
// backlog. A producer that stopped waiting (its workers made no progress) raises its lane's
// mark (raise_mark); the mark falls back to kHigh once the backlog has come down.
//
// Lanes belong to threads, not to inboxes: a thread takes one of kLanes process-wide lane
// numbers the first time it pushes from outside a pool and gives it back when it exits, so
// a lane has one producer at a time. Threads beyond kLanes concurrent ones get none and use
// the locked path of the ready queue.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "cascade/core/notifier.hpp"
#include "cascade/core/task.hpp"

namespace cascade::detail {

class Inbox {
  public:
    static constexpr int kLanes = 4;
    static constexpr std::uint64_t kSegment = 512;  // tasks per segment (32 KiB)
    static constexpr std::uint64_t kPrefetch = 8;
    static constexpr std::uint32_t kKeep = 1024;  // emptied segments kept per lane (32 MiB)
    static constexpr std::uint64_t kHigh = 16 * kSegment;  // backlog that makes push busy
    static constexpr std::uint64_t kLow = 4 * kSegment;    // backlog a waiting producer awaits
    static constexpr std::uint32_t kKeepRunning = (kHigh + kLow) / kSegment;  // segments kept

    // What push did.
    enum class Push { queued, busy, failed };  // busy: queued, and the lane's backlog is high

    Inbox() = default;
    Inbox(const Inbox&) = delete;
    Inbox& operator=(const Inbox&) = delete;
    ~Inbox() {
        for (Lane& l : lanes_)
            for (Segment* list : {l.head_seg, l.freed.load(std::memory_order_relaxed), l.reuse})
                for (Segment* s = list; s;) {
                    Segment* next = s->next.load(std::memory_order_relaxed);
                    to_cache(s);
                    s = next;
                }
    }

    // The calling thread's lane number, or -1 when all are taken (see top).
    static int this_thread_lane() noexcept;

    // Producer side, on `lane` (this_thread_lane() of the caller): appends t; failed only
    // when no memory could be had for a new segment, busy when it starts a segment while the
    // consumers have not taken the lane's mark of tasks yet (see top). The task is visible to
    // consumers once this returns; the caller orders the push before its check for sleeping
    // workers (Notifier::publish_barrier).
    Push push(int lane, const Task& t) noexcept {
        Lane& l = lanes_[lane];
        const std::uint64_t tail = l.tail.load(std::memory_order_relaxed);
        const std::uint64_t i = tail % kSegment;
        Push result = Push::queued;
        if (i == 0) [[unlikely]] {  // the first slot of a new segment
            const std::uint64_t backlog = tail - heads_[lane].load(std::memory_order_relaxed);
            if (backlog >= l.mark)
                result = Push::busy;
            else if (backlog < kHigh / 2)
                l.mark = kHigh;
            if (keep_backlog_.load(std::memory_order_relaxed)) {  // before start(): see top
                const auto need = static_cast<std::uint32_t>(
                    std::min<std::uint64_t>(backlog / kSegment + 2, kKeep));
                if (need > l.keep.load(std::memory_order_relaxed))
                    l.keep.store(need, std::memory_order_relaxed);
            }
            // One the consumers emptied: ours first, else all those handed back since.
            Segment* s = l.reuse;
            if (!s) s = l.freed.exchange(nullptr, std::memory_order_acquire);
            if (s) {
                l.reuse = s->next.load(std::memory_order_relaxed);
                l.kept.fetch_sub(1, std::memory_order_relaxed);
            } else {
                s = from_cache();
                if (!s) return Push::failed;
            }
            s->next.store(nullptr, std::memory_order_relaxed);
            if (l.tail_seg)
                l.tail_seg->next.store(s, std::memory_order_relaxed);  // published by tail
            else
                l.head_seg = s;  // first use: published by tail
            l.tail_seg = s;
        }
        // The slot's line was last read by the consumer's core: ask for lines a few pushes
        // ahead, so that their transfers overlap instead of stalling each push.
        if (i + kPrefetch < kSegment) __builtin_prefetch(&l.tail_seg->slots[i + kPrefetch], 1);
        l.tail_seg->slots[i] = t;
        l.tail.store(tail + 1, std::memory_order_release);
        return result;
    }

    // Producer side: the tasks of `lane` published and not yet taken by a consumer, and how
    // many the consumers have taken so far (it grows while they make progress).
    std::uint64_t backlog(int lane) const noexcept {
        return lanes_[lane].tail.load(std::memory_order_relaxed) -
               heads_[lane].load(std::memory_order_acquire);
    }
    std::uint64_t taken(int lane) const noexcept {
        return heads_[lane].load(std::memory_order_acquire);
    }
    // Producer side: sleeps until the consumers have brought the lane's backlog down to kLow
    // (the one that does wakes it; Notifier's sleeper/signaller barrier pair makes sure it
    // either sees the producer waiting or the producer sees its progress), or for
    // `timeout_us`.
    void wait_for_consumers(int lane, long timeout_us) noexcept {
        Lane& l = lanes_[lane];
        const std::uint32_t word = l.wake_word.load(std::memory_order_seq_cst);
        l.waiting.store(true, std::memory_order_seq_cst);
        Notifier::sleeper_barrier();
        if (backlog(lane) > kLow) Notifier::wait_on(l.wake_word, word, timeout_us);
        l.waiting.store(false, std::memory_order_relaxed);
    }
    // Producer side: the lane's producer stopped waiting with the backlog high; push is busy
    // again only at twice the backlog.
    void raise_mark(int lane) noexcept {
        Lane& l = lanes_[lane];
        l.mark = std::max(l.mark, 2 * backlog(lane));
    }

    // Bytes of one segment (its tasks and its link).
    static constexpr std::size_t segment_bytes() noexcept { return sizeof(Segment); }
    // Bytes of the emptied segments the lanes keep for their next pushes (any thread; a
    // snapshot from relaxed loads of the counts recycle and push maintain anyway). Segments
    // that hold tasks, and the one each lane's consumer read last, are not counted.
    std::size_t kept_bytes() const noexcept {
        std::size_t n = 0;
        for (const Lane& l : lanes_)
            n += l.kept.load(std::memory_order_relaxed);
        return n * segment_bytes();
    }
    // The pool started: lanes keep kKeepRunning segments from now on, or what they keep
    // already (see top).
    void started() noexcept { keep_backlog_.store(false, std::memory_order_relaxed); }
    // Bytes of the segments destroyed inboxes left to the process-wide cache (any thread).
    static std::size_t cached_bytes() noexcept;

    // Whether some lane holds published tasks (a hint: relaxed loads).
    bool pending() const noexcept {
        for (int i = 0; i < kLanes; ++i)
            if (lanes_[i].tail.load(std::memory_order_relaxed) !=
                heads_[i].load(std::memory_order_relaxed))
                return true;
        return false;
    }
    // Number of published tasks not yet taken.
    std::size_t size() const noexcept {
        std::size_t n = 0;
        for (int i = 0; i < kLanes; ++i) {
            // Head first: it never passes a tail read after it.
            const std::uint64_t head = heads_[i].load(std::memory_order_seq_cst);
            n += lanes_[i].tail.load(std::memory_order_seq_cst) - head;
        }
        return n;
    }

    // Consumer side, called by one thread at a time (the owner of the ready queue's lock):
    // hands up to `max` published tasks to sink(const Task&), oldest first in each lane.
    // Returns the number of tasks moved.
    template <class Sink>
    std::size_t drain(Sink&& sink, std::size_t max) {
        std::size_t moved = 0;
        for (int i = 0; i < kLanes && moved < max; ++i) {
            Lane& l = lanes_[i];
            const std::uint64_t tail = l.tail.load(std::memory_order_acquire);
            std::uint64_t head = heads_[i].load(std::memory_order_relaxed);
            if (tail == head) continue;
            const std::uint64_t end = std::min<std::uint64_t>(tail, head + (max - moved));
            moved += end - head;
            for (; head != end; ++head) {
                std::uint64_t k = head % kSegment;
                if (k == 0 && head != 0) {  // the previous segment is done: recycle it
                    Segment* done = l.head_seg;
                    l.head_seg = done->next.load(std::memory_order_relaxed);
                    recycle(l, done);
                }
                sink(l.head_seg->slots[k]);
            }
            heads_[i].store(head, std::memory_order_release);
            Notifier::signaller_barrier();
            if (l.waiting.load(std::memory_order_relaxed) && tail - head <= kLow) [[unlikely]] {
                l.waiting.store(false, std::memory_order_relaxed);
                Notifier::wake_all(l.wake_word);
            }
        }
        return moved;
    }

  private:
    struct alignas(64) Segment {
        Task slots[kSegment];
        std::atomic<Segment*> next{nullptr};
    };
    struct alignas(64) Lane {
        std::atomic<std::uint64_t> tail{0};    // written by the producer
        Segment* tail_seg = nullptr;           // the producer's segment
        Segment* head_seg = nullptr;           // the consumer's segment (set once by the producer)
        Segment* reuse = nullptr;              // the producer's emptied segments, linked by next
        std::atomic<Segment*> freed{nullptr};  // emptied segments handed back, linked by next
        std::atomic<std::uint32_t> kept{0};    // segments in reuse and freed (approximately)
        std::atomic<std::uint32_t> keep{kKeepRunning};  // most kept (written by the producer)
        std::uint64_t mark = kHigh;        // the producer's: backlog that makes push busy
        std::atomic<bool> waiting{false};  // the producer sleeps in wait_for_consumers
        std::atomic<std::uint32_t> wake_word{0};
    };
    // Hands an emptied segment back to the lane's producer (consumer side), or frees it when
    // the lane keeps its `keep` already. The producer takes the whole list at once (an
    // exchange), so no node is popped while this pushes: no ABA.
    static void recycle(Lane& l, Segment* done) noexcept;
    // The process-wide cache of segments (inbox.cpp): a new segment, from the cache or else
    // allocated (null when no memory could be had); a segment no inbox uses any more.
    static Segment* from_cache() noexcept;
    static void to_cache(Segment* s) noexcept;

    Lane lanes_[kLanes];
    alignas(64) std::atomic<std::uint64_t> heads_[kLanes] = {};  // written by the consumer
    std::atomic<bool> keep_backlog_{true};  // the pool has not started: lanes keep their backlog
};

inline void Inbox::recycle(Lane& l, Segment* done) noexcept {
    if (l.kept.load(std::memory_order_relaxed) >= l.keep.load(std::memory_order_relaxed)) {
        std::free(done);
        return;
    }
    l.kept.fetch_add(1, std::memory_order_relaxed);
    Segment* top = l.freed.load(std::memory_order_relaxed);
    do {
        done->next.store(top, std::memory_order_relaxed);
    } while (!l.freed.compare_exchange_weak(top, done, std::memory_order_release,
                                            std::memory_order_relaxed));
}

}  // namespace cascade::detail
