// Registry: the handlers and object types one Objects knows. Registration takes a mutex;
// the lookups every arriving request makes read without it (handlers by id, the first
// kMaxTypes types in registration order).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cascade/objects/detail/record.hpp"
#include "cascade/objects/handler.hpp"

namespace cascade::detail {

class Registry {
  public:
    static constexpr std::uint32_t kMaxHandlers = 4096;
    static constexpr std::uint32_t kMaxTypes = 256;

    Registry();
    Registry(const Registry&) = delete;
    Registry& operator=(const Registry&) = delete;

    /// Registers `t` unless a type of the same hash is known.
    void add_type(ObjectType t);
    /// Sets the load function of the registered type of hash `hash`.
    void set_load(std::uint32_t hash, std::function<double(const void*)> load);
    /// The type of hash `hash`, or null.
    const ObjectType* type(std::uint32_t hash) const;
    /// Registers `h`, whose type is registered: gives it the next id, a name if it has none
    /// ("handler#<id>") and its label. UsageError beyond kMaxHandlers.
    HandlerBase* add_handler(std::unique_ptr<HandlerBase> h);
    /// How many handlers are registered (their ids are 0 .. handlers() - 1).
    std::uint32_t handlers() const noexcept { return n_handlers_.load(std::memory_order_acquire); }
    /// The handler of id `id`, which the caller checked is below handlers().
    HandlerBase* handler(std::uint32_t id) const noexcept {
        return handlers_[id].load(std::memory_order_acquire);
    }
    /// The handler of id `id`, or null if there is none.
    HandlerBase* find_handler(std::uint32_t id) const noexcept {
        return id < handlers() ? handler(id) : nullptr;
    }

  private:
    mutable std::mutex mutex_;
    std::vector<std::unique_ptr<HandlerBase>> owned_handlers_;
    std::unique_ptr<std::atomic<HandlerBase*>[]> handlers_;  // by id
    std::atomic<std::uint32_t> n_handlers_{0};
    std::unordered_map<std::uint32_t, std::unique_ptr<ObjectType>> types_;
    std::array<std::atomic<const ObjectType*>, kMaxTypes> type_list_{};
    std::atomic<std::uint32_t> n_types_{0};
};

}  // namespace cascade::detail
