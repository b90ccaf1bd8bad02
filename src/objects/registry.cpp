// Registry (detail/registry.hpp): the handlers and object types one Objects knows.
#include "cascade/objects/detail/registry.hpp"

#include <string>

#include "cascade/core/errors.hpp"

namespace cascade::detail {

Registry::Registry() : handlers_(new std::atomic<HandlerBase*>[kMaxHandlers]) {
    for (std::uint32_t i = 0; i < kMaxHandlers; ++i)
        handlers_[i].store(nullptr, std::memory_order_relaxed);
}

void Registry::add_type(ObjectType t) {
    std::lock_guard<std::mutex> g(mutex_);
    if (types_.count(t.hash)) return;
    auto& slot = types_[t.hash];
    slot = std::make_unique<ObjectType>(std::move(t));
    const std::uint32_t n = n_types_.load(std::memory_order_relaxed);
    if (n < kMaxTypes) {
        type_list_[n].store(slot.get(), std::memory_order_relaxed);
        n_types_.store(n + 1, std::memory_order_release);
    }
}

void Registry::set_load(std::uint32_t hash, std::function<double(const void*)> load) {
    std::lock_guard<std::mutex> g(mutex_);
    types_.at(hash)->load = std::move(load);
}

const ObjectType* Registry::type(std::uint32_t hash) const {
    const std::uint32_t n = n_types_.load(std::memory_order_acquire);
    for (std::uint32_t i = 0; i < n; ++i) {
        const ObjectType* t = type_list_[i].load(std::memory_order_relaxed);
        if (t->hash == hash) return t;
    }
    if (n < kMaxTypes) return nullptr;
    std::lock_guard<std::mutex> g(mutex_);  // types beyond the list
    auto it = types_.find(hash);
    return it == types_.end() ? nullptr : it->second.get();
}

HandlerBase* Registry::add_handler(std::unique_ptr<HandlerBase> h) {
    std::lock_guard<std::mutex> g(mutex_);
    const std::uint32_t id = n_handlers_.load(std::memory_order_relaxed);
    if (id >= kMaxHandlers)
        throw UsageError("objects: more than " + std::to_string(kMaxHandlers) + " handlers");
    auto t = types_.find(h->type_hash);
    if (t == types_.end())
        throw UsageError("objects: handler '" + h->name + "' of a type never registered");
    h->id = id;
    if (h->name.empty()) h->name = "handler#" + std::to_string(id);
    h->label = intern(h->name + "(" + t->second->name);
    auto* raw = h.get();
    owned_handlers_.push_back(std::move(h));
    handlers_[id].store(raw, std::memory_order_release);
    n_handlers_.store(id + 1, std::memory_order_release);
    return raw;
}

}  // namespace cascade::detail
