// Spares: what one Objects keeps from migrations for the next ones. Packing buffers: fresh
// megabytes cost page faults that dwarf the copy (a 1 MiB object moved 5x slower than with
// recycled buffers). Records of objects that left: an arrival then allocates no Record,
// request queue or ordering state. Any thread; short sections under a spinlock.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "cascade/comm/detail/bytes.hpp"
#include "cascade/core/spinlock.hpp"
#include "cascade/objects/detail/record.hpp"

namespace cascade::detail {

class Spares {
  public:
    static constexpr std::size_t kMaxBuffers = 8;
    static constexpr std::size_t kMaxBufferBytes = std::size_t(256) << 20;  // all kept buffers
    static constexpr std::size_t kMaxRecords = 16;

    Spares() { records_.reserve(kMaxRecords); }  // give_record() never allocates
    Spares(const Spares&) = delete;
    Spares& operator=(const Spares&) = delete;

    /// A buffer of `bytes` bytes (not zeroed): a kept one large enough, or a new one.
    std::unique_ptr<Bytes> take_buffer(std::size_t bytes);
    /// Keeps `b` for a later take_buffer, within kMaxBuffers and kMaxBufferBytes; else frees it.
    void give_buffer(std::unique_ptr<Bytes> b) noexcept;
    /// A kept Record (as its reset left it) or a new one.
    std::unique_ptr<Record> take_record();
    /// Keeps `r`, already reset, for a later take_record (at most kMaxRecords); else frees it.
    void give_record(std::unique_ptr<Record> r) noexcept;

    std::size_t buffers() const;
    std::size_t records() const;

  private:
    mutable Spinlock lock_;
    std::vector<std::unique_ptr<Bytes>> buffers_;
    std::vector<std::unique_ptr<Record>> records_;
};

}  // namespace cascade::detail
