// The broadcast layer's place in the Communicator: the factory it registers when it is linked,
// and the stand-in a Communicator uses without it (no detection; a send to a list is refused).
#include "cascade/comm/broadcasts.hpp"

#include <atomic>
#include <string>

#include "cascade/comm/active_msg.hpp"
#include "cascade/core/errors.hpp"

#include "internal.hpp"

namespace cascade {

namespace {

std::atomic<detail::BroadcastsFactory> g_factory{nullptr};

class NoBroadcasts final : public Broadcasts {
  public:
    NoBroadcasts() { detect_.store(false, std::memory_order_relaxed); }
    void set_shape(BroadcastShape s) noexcept override { shape_ = s; }
    BroadcastShape shape() const noexcept override { return shape_; }
    void set_piece(std::size_t) noexcept override {}
    void set_pipeline_threshold(std::size_t) noexcept override {}
    void set_window(std::size_t) noexcept override {}
    BroadcastStats stats() const override { return {}; }
    void send(ActiveMsgBase& am, std::span<const int>, std::span<const double>, const char*,
              std::size_t) override {
        refuse(am);
    }
    void send_large(ActiveMsgBase& am, std::span<const int>, std::span<const double>, const void*,
                    std::size_t, std::vector<char>) override {
        refuse(am);
    }
    char* defer_begin(ActiveMsgBase&, int, std::size_t) override { return nullptr; }
    void defer_end(char*) override {}
    bool defer_large(ActiveMsgBase&, int, const void*, std::size_t, std::vector<char>&) override {
        return false;
    }

  private:
    [[noreturn]] static void refuse(const ActiveMsgBase& am) {
        throw UsageError("active message '" + std::string(am.name()) +
                         "': a send to a list of ranks needs the broadcast layer (link "
                         "Cascade::broadcast or Cascade::cascade)");
    }
    BroadcastShape shape_ = BroadcastShape::automatic;
};

}  // namespace

void detail::set_broadcasts_factory(BroadcastsFactory f) noexcept {
    g_factory.store(f, std::memory_order_release);
}

detail::BroadcastsFactory detail::broadcasts_factory() noexcept {
    return g_factory.load(std::memory_order_acquire);
}

std::unique_ptr<Broadcasts> comm_detail::make_broadcasts(Communicator& comm) {
    if (detail::BroadcastsFactory f = detail::broadcasts_factory()) return f(comm);
    return std::make_unique<NoBroadcasts>();
}

}  // namespace cascade
