// How a migrating object's big members travel: as bodies of their own, sent straight from the
// object's memory and received straight into the new object's members, instead of being
// copied into the migration message on one side and out of it on the other. A member is a
// body when it is a std::vector / std::string of trivially copyable elements of kBodyBytes or
// more, or (outside a vector of elements) a trivially copyable value of kBodyBytes or more:
// the object itself, when its type is trivially copyable. The archives below walk an object
// through its codec like wire::Sizer / Writer / Reader and write the same format, except that
// a body's elements are left out (its count stays): both sides tell bodies by the same rule.
// Received vectors come from the futures' Recycler (no zero-fill, pages already mapped), and
// the members of an object that left go back to it once their bodies are sent.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "cascade/comm/detail/frames.hpp"
#include "cascade/comm/serialization.hpp"
#include "cascade/futures/detail/recycle.hpp"

namespace cascade::detail {

// From this size on, a member travels as a body.
inline constexpr std::size_t kBodyBytes = std::size_t(8) << 10;
static_assert(kBodyBytes >= kRecycleBytes, "members received as bodies come from the Recycler");

// One body: where its bytes are (sender) or go (receiver).
struct BodyRef {
    char* data;
    std::size_t bytes;
};

template <class T>
std::size_t bulk_bytes(const T& x) {
    return x.size() * sizeof(typename T::value_type);
}

// Measures the migration message's share of an object (upper bound, bodies left out) and
// counts its bodies.
class BodySizer {
  public:
    static constexpr bool loading = false;
    template <class... Xs>
    void operator()(const Xs&... xs) {
        (add(xs), ...);
    }
    template <class T>
    void add(const T& x) {
        constexpr wire::Kind k = wire::kind_of<T>();
        if constexpr (k == wire::Kind::custom) {
            wire::run_codec(*this, const_cast<T&>(x));  // serialize() only reads x here
        } else if constexpr (k == wire::Kind::elements) {
            bytes += sizeof(std::uint64_t);
            ++in_elements_;
            for (const auto& e : x)
                add(e);
            --in_elements_;
        } else if constexpr (k == wire::Kind::bulk) {
            if (bulk_bytes(x) >= kBodyBytes) {
                bytes += sizeof(std::uint64_t);
                ++bodies;
            } else {
                bytes += wire::size_of(x);
            }
        } else if constexpr (k == wire::Kind::raw) {
            if (sizeof(T) >= kBodyBytes && in_elements_ == 0)
                ++bodies;
            else
                bytes += sizeof(T);
        } else {
            bytes += wire::size_of(x);
        }
    }
    std::size_t bytes = 0;   // in the migration message
    std::size_t bodies = 0;  // travelling on their own

  private:
    int in_elements_ = 0;
};

// Writes an object's share of the migration message at `out` and lists its bodies (in the
// order the reader will find them).
class BodyWriter {
  public:
    static constexpr bool loading = false;
    BodyWriter(char* out, std::vector<BodyRef>& bodies) : p_(out), bodies_(bodies) {}
    template <class... Xs>
    void operator()(const Xs&... xs) {
        (put(xs), ...);
    }
    template <class T>
    void put(const T& x) {
        constexpr wire::Kind k = wire::kind_of<T>();
        if constexpr (k == wire::Kind::custom) {
            wire::run_codec(*this, const_cast<T&>(x));  // serialize() only reads x here
        } else if constexpr (k == wire::Kind::elements) {
            put(static_cast<std::uint64_t>(x.size()));
            ++in_elements_;
            for (const auto& e : x)
                put(e);
            --in_elements_;
        } else if constexpr (k == wire::Kind::bulk) {
            if (bulk_bytes(x) >= kBodyBytes) {
                put(static_cast<std::uint64_t>(x.size()));
                bodies_.push_back(
                    {const_cast<char*>(reinterpret_cast<const char*>(x.data())), bulk_bytes(x)});
            } else {
                plain(x);
            }
        } else if constexpr (k == wire::Kind::raw) {
            if (sizeof(T) >= kBodyBytes && in_elements_ == 0)
                bodies_.push_back(
                    {const_cast<char*>(reinterpret_cast<const char*>(&x)), sizeof(T)});
            else
                plain(x);
        } else {
            plain(x);
        }
    }
    char* position() const noexcept { return p_; }

  private:
    template <class T>
    void plain(const T& x) {
        wire::Writer w(p_);
        w.put(x);
        p_ = w.position();
    }
    char* p_;
    std::vector<BodyRef>& bodies_;
    int in_elements_ = 0;
};

// Reads an object's share of the migration message into a default-constructed object, sizing
// its body members (recycled vectors where possible) and listing where their bodies go.
class BodyReader {
  public:
    static constexpr bool loading = true;
    BodyReader(const char* begin, std::size_t size, std::vector<BodyRef>& bodies)
        : p_(begin), end_(begin + size), bodies_(bodies) {}
    template <class... Xs>
    void operator()(Xs&... xs) {
        (read_into(xs), ...);
    }
    template <class T>
    void read_into(T& x) {
        constexpr wire::Kind k = wire::kind_of<T>();
        if constexpr (k == wire::Kind::custom) {
            wire::run_codec(*this, x);
        } else if constexpr (k == wire::Kind::elements) {
            std::uint64_t n = 0;
            read_into(n);
            if (n > remaining())  // every element takes at least one byte here
                throw WireError("truncated object: " + std::to_string(n) + " elements, " +
                                std::to_string(remaining()) + " bytes left");
            x.clear();
            x.reserve(static_cast<std::size_t>(n));
            ++in_elements_;
            for (std::uint64_t i = 0; i < n; ++i) {
                typename T::value_type e{};
                read_into(e);
                x.push_back(std::move(e));  // a moved vector keeps its buffer: bodies stay put
            }
            --in_elements_;
        } else if constexpr (k == wire::Kind::bulk) {
            using E = typename T::value_type;
            wire::Reader peek(p_, remaining());
            // Bounded like every announced body (kMaxBody) before anything is allocated.
            const std::uint64_t n = body_elements(peek.get<std::uint64_t>(), sizeof(E));
            if (n * sizeof(E) >= kBodyBytes) {
                p_ += sizeof(std::uint64_t);
                x = Recycler<T>::take(static_cast<std::size_t>(n));
                bodies_.push_back({reinterpret_cast<char*>(x.data()), bulk_bytes(x)});
            } else {
                plain(x);
            }
        } else if constexpr (k == wire::Kind::raw) {
            if (sizeof(T) >= kBodyBytes && in_elements_ == 0)
                bodies_.push_back({reinterpret_cast<char*>(&x), sizeof(T)});
            else
                plain(x);
        } else {
            plain(x);
        }
    }
    std::size_t remaining() const noexcept { return static_cast<std::size_t>(end_ - p_); }
    void expect_end() const {
        if (p_ != end_)
            throw WireError(std::to_string(remaining()) + " byte(s) left over after the object");
    }

  private:
    template <class T>
    void plain(T& x) {
        wire::Reader r(p_, remaining());
        r.read_into(x);
        p_ = end_ - r.remaining();
    }
    const char* p_;
    const char* end_;
    std::vector<BodyRef>& bodies_;
    int in_elements_ = 0;
};

// Gives the body members of an object about to be freed to the Recycler (their memory
// receives the next bodies of a similar size).
class BodyDonor {
  public:
    static constexpr bool loading = false;
    template <class... Xs>
    void operator()(const Xs&... xs) {
        (give(xs), ...);
    }
    template <class T>
    void give(const T& cx) {
        constexpr wire::Kind k = wire::kind_of<T>();
        T& x = const_cast<T&>(cx);  // the object is being destroyed
        if constexpr (k == wire::Kind::custom) {
            wire::run_codec(*this, x);
        } else if constexpr (k == wire::Kind::elements) {
            for (auto& e : x)
                give(e);
        } else if constexpr (k == wire::Kind::bulk) {
            if (bulk_bytes(x) >= kBodyBytes) Recycler<T>::give(x);
        }
    }
};

}  // namespace cascade::detail
