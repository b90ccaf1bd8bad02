// AfterProgressList: the functions a Communicator calls after the handlers of each received
// message and at the end of progress() (Communicator::add_after_progress). A fixed number of
// slots, called in the order they were added. Communication thread only.
#pragma once

#include <array>
#include <cstddef>

namespace cascade::detail {

/// The after-progress functions of one Communicator (see the top of this file).
class AfterProgressList {
  public:
    /// One function: `fn(ctx)` returns whether it did anything.
    using Fn = bool (*)(void* ctx);
    /// How many functions one list holds.
    static constexpr std::size_t kCapacity = 4;

    /// Adds `fn(ctx)` after the others. Returns false (nothing added) when the list is full.
    bool add(Fn fn, void* ctx) noexcept {
        if (n_ == kCapacity) return false;
        slots_[n_++] = Slot{fn, ctx};
        return true;
    }
    /// Removes `fn(ctx)`, keeping the order of the others (nothing if it is not there).
    void remove(Fn fn, void* ctx) noexcept {
        for (std::size_t i = 0; i < n_; ++i) {
            if (slots_[i].fn != fn || slots_[i].ctx != ctx) continue;
            for (std::size_t j = i + 1; j < n_; ++j)
                slots_[j - 1] = slots_[j];
            slots_[--n_] = Slot{};
            return;
        }
    }
    /// Whether `fn(ctx)` is in the list.
    bool contains(Fn fn, void* ctx) const noexcept {
        for (std::size_t i = 0; i < n_; ++i)
            if (slots_[i].fn == fn && slots_[i].ctx == ctx) return true;
        return false;
    }
    /// Whether no function is installed.
    bool empty() const noexcept { return n_ == 0; }
    /// How many functions are installed.
    std::size_t size() const noexcept { return n_; }
    /// Calls every function once, in order; returns whether any of them did anything.
    bool call_all() const {
        bool any = false;
        for (std::size_t i = 0; i < n_; ++i)
            any |= slots_[i].fn(slots_[i].ctx);
        return any;
    }
    /// Calls them all again while one of them did something (work one ran may have left work
    /// for one called before it); returns whether any did anything.
    bool call_until_quiet() const {
        bool ran = false;
        for (bool again = true; again;) {
            again = call_all();
            ran |= again;
        }
        return ran;
    }

  private:
    struct Slot {
        Fn fn = nullptr;
        void* ctx = nullptr;
    };
    std::array<Slot, kCapacity> slots_{};  // the first n_ are installed
    std::size_t n_ = 0;
};

}  // namespace cascade::detail
