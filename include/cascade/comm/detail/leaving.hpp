// LeaveArchive: walks a value that is about to leave this rank (a migrating object, an async
// argument or result) through its codec before it is measured and written. The archives of
// the wire format ignore it; a codec whose member needs work before it can be written without
// waiting (a device Data, whose freshest copy must reach the host: cascade/comm/device.hpp)
// does that work here, on the sending thread and outside every lock, and leaves a closure
// (after()) that gives back what it took; the sender runs those closures once the value is
// written (or, for a value that leaves as a body, once the body has left). Values that are
// not codec types are skipped.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "cascade/comm/serialization.hpp"

namespace cascade::detail {

class LeaveArchive {
  public:
    /// False: the value is read, not written.
    static constexpr bool loading = false;
    /// Marks this archive for codecs that act on it (`requires { Archive::leaving; }`).
    static constexpr bool leaving = true;
    explicit LeaveArchive(std::vector<std::function<void()>>& after) noexcept : after_(&after) {}
    /// An archive that only asks: does a member need work before it leaves (need())?
    LeaveArchive() noexcept = default;
    template <class... Xs>
    void operator()(const Xs&... xs) {
        (visit(xs), ...);
    }
    template <class T>
    void visit(const T& x) {
        constexpr wire::Kind k = wire::kind_of<T>();
        if constexpr (k == wire::Kind::custom) {
            wire::run_codec(*this, const_cast<T&>(x));  // serialize() only reads x here
        } else if constexpr (k == wire::Kind::elements) {
            for (const auto& e : x)
                visit(e);
        }
    }
    /// Runs `f` once the value is written (or its sending failed).
    void after(std::function<void()> f) { after_->push_back(std::move(f)); }
    /// True for the archive that only asks: a codec calls need() and does nothing else.
    bool probing() const noexcept { return after_ == nullptr; }
    /// A member needs work before it leaves (it may wait): the sender does it on a worker.
    void need() noexcept { needed_ = true; }
    /// Whether a member called need().
    bool needed() const noexcept { return needed_; }

  private:
    std::vector<std::function<void()>>* after_ = nullptr;
    bool needed_ = false;
};

// Runs the closures a LeaveArchive collected when it goes out of scope.
struct AfterPacking {
    std::vector<std::function<void()>> fs;
    AfterPacking() = default;
    AfterPacking(const AfterPacking&) = delete;
    AfterPacking& operator=(const AfterPacking&) = delete;
    ~AfterPacking() {
        for (auto& f : fs)
            f();
    }
};

}  // namespace cascade::detail
