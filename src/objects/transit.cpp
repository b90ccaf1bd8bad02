// Transit (detail/transit.hpp): the migrations of one Objects in flight.
#include "cascade/objects/detail/transit.hpp"

#include <mutex>
#include <string>

#include "cascade/comm/serialization.hpp"

namespace cascade::detail {

namespace {
// A free slot of `slots` (reused, or added at the end).
template <class Slot>
std::uint32_t take_slot(std::deque<Slot>& slots, std::vector<std::uint32_t>& free) {
    if (!free.empty()) {
        const std::uint32_t i = free.back();
        free.pop_back();
        return i;
    }
    if (free.capacity() < slots.size() + 1)
        free.reserve(2 * (slots.size() + 1));  // giving every slot back never allocates
    slots.emplace_back();
    return static_cast<std::uint32_t>(slots.size() - 1);
}
}  // namespace

std::uint64_t Transit::keep_sending(std::unique_ptr<Bytes> buf) {
    std::lock_guard<Spinlock> g(lock_);
    const std::uint64_t serial = next_serial_++;
    sending_big_[serial] = std::move(buf);
    return serial;
}

std::unique_ptr<Bytes> Transit::sent(std::uint64_t serial) {
    std::lock_guard<Spinlock> g(lock_);
    auto it = sending_big_.find(serial);
    if (it == sending_big_.end()) return nullptr;
    auto buf = std::move(it->second);
    sending_big_.erase(it);
    return buf;
}

void Transit::expect(int source, std::uint64_t token, std::unique_ptr<Bytes> buf) {
    std::lock_guard<Spinlock> g(lock_);
    auto [it, fresh] = arriving_big_.try_emplace({source, token});
    if (!fresh)
        throw WireError("objects: rank " + std::to_string(source) + " announced big migration " +
                        std::to_string(token) + " twice");
    it->second = std::move(buf);
}

std::unique_ptr<Bytes> Transit::arrived(int source, std::uint64_t token) {
    std::lock_guard<Spinlock> g(lock_);
    auto it = arriving_big_.find({source, token});
    if (it == arriving_big_.end())
        throw WireError("objects: a big migration rank " + std::to_string(source) +
                        " never announced");
    auto buf = std::move(it->second);
    arriving_big_.erase(it);
    return buf;
}

std::uint32_t Transit::reserve_leaving() {
    std::lock_guard<Spinlock> g(lock_);
    return take_slot(leaving_, free_leaving_);
}

Transit::Leaving& Transit::leaving(std::uint32_t slot) {
    std::lock_guard<Spinlock> g(lock_);  // the deque's index; the element stays put
    return leaving_[slot];
}

void Transit::cancel_leaving(std::uint32_t slot) noexcept {
    std::lock_guard<Spinlock> g(lock_);
    if (!leaving_[slot].type) free_leaving_.push_back(slot);  // reserved: no throw
}

Transit::Leaving Transit::body_sent(std::uint64_t slot) noexcept {
    std::lock_guard<Spinlock> g(lock_);
    if (slot >= leaving_.size() || !leaving_[slot].type || --leaving_[slot].bodies_left > 0)
        return {};
    Leaving l = std::exchange(leaving_[slot], Leaving{});
    free_leaving_.push_back(static_cast<std::uint32_t>(slot));  // reserved: no throw
    return l;
}

std::uint32_t Transit::add_arriving(std::unique_ptr<Record> rec, std::size_t bodies) {
    std::lock_guard<Spinlock> g(lock_);
    const std::uint32_t slot = take_slot(arriving_, free_arriving_);
    arriving_[slot] = Arriving{std::move(rec), bodies};
    return slot;
}

std::unique_ptr<Record> Transit::body_arrived(std::uint64_t slot, int source) {
    std::lock_guard<Spinlock> g(lock_);
    if (slot >= arriving_.size() || !arriving_[slot].rec)
        throw WireError("objects: a body of an object rank " + std::to_string(source) +
                        " never sent");
    Arriving& a = arriving_[slot];
    if (--a.bodies_left > 0) return nullptr;
    auto rec = std::move(a.rec);
    free_arriving_.push_back(static_cast<std::uint32_t>(slot));  // reserved: no throw
    return rec;
}

void Transit::clear(const std::function<void(Record&)>& arriving,
                    const std::function<void(Leaving&)>& leaving) {
    clear_arriving(arriving);
    std::lock_guard<Spinlock> g(lock_);
    for (std::size_t i = 0; i < leaving_.size(); ++i) {
        if (!leaving_[i].type) continue;
        leaving(leaving_[i]);
        leaving_[i] = Leaving{};
        free_leaving_.push_back(static_cast<std::uint32_t>(i));
    }
}

void Transit::clear_arriving(const std::function<void(Record&)>& drop) {
    std::lock_guard<Spinlock> g(lock_);
    for (std::size_t i = 0; i < arriving_.size(); ++i) {
        if (!arriving_[i].rec) continue;
        drop(*arriving_[i].rec);
        arriving_[i].rec.reset();
        free_arriving_.push_back(static_cast<std::uint32_t>(i));
    }
    arriving_big_.clear();
}

}  // namespace cascade::detail
