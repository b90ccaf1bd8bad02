#include "cascade/core/detail/inbox.hpp"

#include <mutex>

namespace cascade::detail {

namespace {

// Bit i set: lane i belongs to a live thread.
std::atomic<unsigned> g_lanes_taken{0};

class LaneHolder {
  public:
    int get() noexcept {
        if (lane_ == kUnset) lane_ = take();
        return lane_;
    }
    ~LaneHolder() {
        // Release: the next owner of the lane sees everything this thread wrote into it.
        if (lane_ >= 0) g_lanes_taken.fetch_and(~(1u << lane_), std::memory_order_release);
    }

  private:
    static constexpr int kUnset = -2;
    static int take() noexcept {
        unsigned taken = g_lanes_taken.load(std::memory_order_relaxed);
        for (;;) {
            int free_lane = -1;
            for (int i = 0; i < Inbox::kLanes; ++i)
                if (!(taken & (1u << i))) {
                    free_lane = i;
                    break;
                }
            if (free_lane < 0) return -1;
            if (g_lanes_taken.compare_exchange_weak(taken, taken | (1u << free_lane),
                                                    std::memory_order_acquire,
                                                    std::memory_order_relaxed))
                return free_lane;
        }
    }
    int lane_ = kUnset;
};

thread_local LaneHolder tls_lane;

}  // namespace

int Inbox::this_thread_lane() noexcept {
    return tls_lane.get();
}

namespace {
// Segments of destroyed inboxes, linked by next (see the top of inbox.hpp). Taken once per
// segment that a lane could not find among its own emptied ones, never per task. Never
// destroyed: pools destroyed during exit still hand their segments back.
struct SegmentCache {
    std::mutex m;
    void* top = nullptr;
    std::uint32_t n = 0;
};
SegmentCache& segment_cache() {
    static SegmentCache* c = new SegmentCache;
    return *c;
}
}  // namespace

Inbox::Segment* Inbox::from_cache() noexcept {
    SegmentCache& c = segment_cache();
    {
        std::lock_guard<std::mutex> g(c.m);
        if (auto* s = static_cast<Segment*>(c.top)) {
            c.top = s->next.load(std::memory_order_relaxed);
            --c.n;
            return s;
        }
    }
    return static_cast<Segment*>(std::aligned_alloc(alignof(Segment), sizeof(Segment)));
}

std::size_t Inbox::cached_bytes() noexcept {
    SegmentCache& c = segment_cache();
    std::lock_guard<std::mutex> g(c.m);
    return c.n * segment_bytes();
}

void Inbox::to_cache(Segment* s) noexcept {
    SegmentCache& c = segment_cache();
    {
        std::lock_guard<std::mutex> g(c.m);
        if (c.n < kKeep) {
            s->next.store(static_cast<Segment*>(c.top), std::memory_order_relaxed);
            c.top = s;
            ++c.n;
            return;
        }
    }
    std::free(s);
}

}  // namespace cascade::detail
