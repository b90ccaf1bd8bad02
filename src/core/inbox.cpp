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
// segment that a lane could not find among its own emptied ones, never per task.
std::mutex g_cache_mutex;
void* g_cache = nullptr;
std::uint32_t g_cached = 0;
}  // namespace

Inbox::Segment* Inbox::from_cache() noexcept {
    {
        std::lock_guard<std::mutex> g(g_cache_mutex);
        if (auto* s = static_cast<Segment*>(g_cache)) {
            g_cache = s->next.load(std::memory_order_relaxed);
            --g_cached;
            return s;
        }
    }
    return static_cast<Segment*>(std::aligned_alloc(alignof(Segment), sizeof(Segment)));
}

void Inbox::to_cache(Segment* s) noexcept {
    {
        std::lock_guard<std::mutex> g(g_cache_mutex);
        if (g_cached < kKeep) {
            s->next.store(static_cast<Segment*>(g_cache), std::memory_order_relaxed);
            g_cache = s;
            ++g_cached;
            return;
        }
    }
    std::free(s);
}

}  // namespace cascade::detail
