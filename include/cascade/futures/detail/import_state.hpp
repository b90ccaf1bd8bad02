// A future received from another rank (a descriptor {owner, export id}) is fetched once per
// rank: the proxy state that receives its value is kept in the Futures' import table while it
// lives, so later calls that receive the same descriptor share it instead of fetching again
// (a tiled algorithm sends one panel tile to many calls on the same rank). The weight those
// descriptors carry goes back to the owner when the proxy dies.
#pragma once

#include <atomic>
#include <cstdint>

#include "cascade/futures/detail/state.hpp"

namespace cascade {

class Futures;

namespace detail {

struct ImportKey {
    int owner;
    std::uint64_t id;
    bool operator==(const ImportKey&) const = default;
};
struct ImportKeyHash {
    std::size_t operator()(const ImportKey& k) const noexcept {
        return static_cast<std::size_t>(k.id * 0x9E3779B97F4A7C15ull) ^
               static_cast<std::size_t>(k.owner);
    }
};

// Called by ImportState: drops the table entry (if still this state's) and gives `weight`
// back to the owner.
void forget_import(Futures* fx, const ImportKey& key, StateBase* self,
                   std::uint64_t weight) noexcept;
bool unlist_import(Futures* fx, const ImportKey& key, StateBase* self) noexcept;

template <class T>
class ImportState final : public State<T> {
  public:
    ImportState(Futures* fx, ImportKey key) : fx_(fx), key_(key) {}
    ~ImportState() override { forget_import(fx_, key_, this, extra_.load()); }
    // Another descriptor of the same future arrived: keep its weight to give back.
    void add_weight(std::uint64_t w) noexcept { extra_.fetch_add(w, std::memory_order_relaxed); }
    // No later call may find it once its value is moved out.
    bool release_for_move() noexcept override {
        unlist_import(fx_, key_, this);
        return this->unique();
    }

  private:
    Futures* fx_;
    ImportKey key_;
    std::atomic<std::uint64_t> extra_{0};
};

}  // namespace detail
}  // namespace cascade
