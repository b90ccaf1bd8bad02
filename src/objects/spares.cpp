// Spares (detail/spares.hpp): packing buffers and records kept for the next migrations.
#include "cascade/objects/detail/spares.hpp"

#include <mutex>

namespace cascade::detail {

std::unique_ptr<Bytes> Spares::take_buffer(std::size_t bytes) {
    {
        std::lock_guard<Spinlock> g(lock_);
        for (auto& b : buffers_) {
            if (b->capacity() >= bytes) {
                auto out = std::move(b);
                b = std::move(buffers_.back());
                buffers_.pop_back();
                out->resize(bytes);  // no zero-fill (detail::Bytes)
                return out;
            }
        }
    }
    auto out = std::make_unique<Bytes>();
    out->resize(bytes);
    return out;
}

void Spares::give_buffer(std::unique_ptr<Bytes> b) noexcept {
    std::lock_guard<Spinlock> g(lock_);
    std::size_t total = b->capacity();
    for (auto& x : buffers_)
        total += x->capacity();
    if (buffers_.size() < kMaxBuffers && total <= kMaxBufferBytes) buffers_.push_back(std::move(b));
}

std::unique_ptr<Record> Spares::take_record() {
    {
        std::lock_guard<Spinlock> g(lock_);
        if (!records_.empty()) {
            auto r = std::move(records_.back());
            records_.pop_back();
            return r;
        }
    }
    return std::make_unique<Record>();
}

void Spares::give_record(std::unique_ptr<Record> r) noexcept {
    std::lock_guard<Spinlock> g(lock_);
    if (records_.size() < kMaxRecords) records_.push_back(std::move(r));
}

std::size_t Spares::buffers() const {
    std::lock_guard<Spinlock> g(lock_);
    return buffers_.size();
}

std::size_t Spares::records() const {
    std::lock_guard<Spinlock> g(lock_);
    return records_.size();
}

}  // namespace cascade::detail
