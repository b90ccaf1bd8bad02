// Transit: the migrations of one Objects in flight.
// - Big objects (one large message each): the buffer of one being received, by sender and
//   token, until it is installed; the buffer of one being sent, by serial, until it has left
//   (a serial, unique per sender, names it: the next migration may reuse a buffer's address
//   before the receiver is done).
// - Objects whose big members travel as bodies (detail/bodies.hpp): arriving, built from
//   their message and installed once their last body is in; leaving, kept until their last
//   body has left, then freed. Each in a slot named by its index in the bodies' own
//   arguments; slots are reused, and deques keep them in place while others are added.
// Any thread; short sections under one spinlock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "cascade/comm/detail/bytes.hpp"
#include "cascade/core/spinlock.hpp"
#include "cascade/objects/detail/record.hpp"

namespace cascade::detail {

class Transit {
  public:
    /// An object leaving with bodies (type null: a free slot).
    struct Leaving {
        const ObjectType* type = nullptr;
        void* obj = nullptr;
        std::size_t bodies_left = 0;
    };

    Transit() = default;
    Transit(const Transit&) = delete;
    Transit& operator=(const Transit&) = delete;

    // ---- big objects ----
    /// Keeps `buf` until the message of the returned serial has left (sent()).
    std::uint64_t keep_sending(std::unique_ptr<Bytes> buf);
    /// The buffer of serial `serial`, whose message has left (null if none is kept).
    std::unique_ptr<Bytes> sent(std::uint64_t serial);
    /// Keeps `buf` for big migration `token` from `source`; WireError if announced before.
    void expect(int source, std::uint64_t token, std::unique_ptr<Bytes> buf);
    /// The buffer big migration `token` from `source` arrived in; WireError if never announced.
    std::unique_ptr<Bytes> arrived(int source, std::uint64_t token);

    // ---- objects with bodies, leaving ----
    /// A free slot for an object about to leave; its place stays put until released, so
    /// the caller fills it without the lock before any body it names has left.
    std::uint32_t reserve_leaving();
    Leaving& leaving(std::uint32_t slot);
    /// Gives back a slot reserve_leaving() gave if it was never filled (the send failed).
    void cancel_leaving(std::uint32_t slot) noexcept;
    /// One body of slot `slot` has left: the object once its last one has, and the slot is
    /// free again; else (or for an unknown slot) an empty Leaving.
    Leaving body_sent(std::uint64_t slot) noexcept;

    // ---- objects with bodies, arriving ----
    /// Keeps `rec` until its `bodies` bodies are in; the slot its bodies name.
    std::uint32_t add_arriving(std::unique_ptr<Record> rec, std::size_t bodies);
    /// One body of slot `slot` arrived (from `source`, for errors): the record once its last
    /// one has, else null. WireError if no object waits in that slot.
    std::unique_ptr<Record> body_arrived(std::uint64_t slot, int source);

    /// Calls `arriving` on every record still waiting for bodies and `leaving` on every
    /// object still waiting for its bodies to leave, and forgets them all (teardown).
    void clear(const std::function<void(Record&)>& arriving,
               const std::function<void(Leaving&)>& leaving);
    /// Drops the records still waiting for bodies (calling `drop`) and the big buffers
    /// being received (the fuzzer, between inputs).
    void clear_arriving(const std::function<void(Record&)>& drop);

  private:
    struct Arriving {
        std::unique_ptr<Record> rec;  // null: a free slot
        std::size_t bodies_left = 0;
    };

    Spinlock lock_;
    std::map<std::pair<int, std::uint64_t>, std::unique_ptr<Bytes>> arriving_big_;
    std::map<std::uint64_t, std::unique_ptr<Bytes>> sending_big_;
    std::uint64_t next_serial_ = 1;
    std::deque<Arriving> arriving_;
    std::vector<std::uint32_t> free_arriving_;
    std::deque<Leaving> leaving_;
    std::vector<std::uint32_t> free_leaving_;
};

}  // namespace cascade::detail
