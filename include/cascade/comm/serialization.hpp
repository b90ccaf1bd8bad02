// Wire format of active-message arguments. Supported: trivially copyable values (raw bytes),
// view<T> (count + elements; decoded as a view into the message), std::vector<T> and
// std::string of trivially copyable T (count + elements). Decoding is bounds-checked: a
// truncated or malformed message raises WireError instead of reading past the buffer.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cascade/comm/view.hpp"

namespace cascade {

class WireError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

namespace wire {

template <class T>
struct is_view : std::false_type {};
template <class T>
struct is_view<view<T>> : std::true_type {};
template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};

template <class T>
constexpr bool is_sequence =
    is_view<T>::value || is_vector<T>::value || std::is_same_v<T, std::string>;

// What may travel: trivially copyable values, and sequences of them. A view is decoded in
// place (it points into the message, whose elements are 8-byte aligned), so its elements
// need no more than 8-byte alignment.
template <class T>
constexpr bool supported = [] {
    if constexpr (is_view<T>::value) {
        using E = std::remove_cv_t<typename T::value_type>;
        return std::is_trivially_copyable_v<E> && alignof(E) <= 8;
    } else if constexpr (is_vector<T>::value || std::is_same_v<T, std::string>) {
        return std::is_trivially_copyable_v<std::remove_cv_t<typename T::value_type>>;
    } else {
        return std::is_trivially_copyable_v<T>;
    }
}();

// Sequence elements start at an 8-byte aligned address (frames are 8-byte aligned and
// buffers come from operator new), so views of doubles are read in place, aligned.
inline std::size_t pad8(const char* p) noexcept {
    return (8 - (reinterpret_cast<std::uintptr_t>(p) & 7)) & 7;
}

// Upper bound of the bytes an argument takes on the wire.
template <class T>
std::size_t size_of(const T& x) {
    if constexpr (is_sequence<T>)
        return sizeof(std::uint64_t) + 7 + x.size() * sizeof(*x.data());
    else
        return sizeof(T);
}

class Writer {
  public:
    explicit Writer(char* out) : p_(out) {}
    template <class T>
    void put(const T& x) {
        if constexpr (is_sequence<T>) {
            std::uint64_t n = x.size();
            std::memcpy(p_, &n, sizeof n);
            p_ += sizeof n;
            const std::size_t pad = pad8(p_);
            std::memset(p_, 0, pad);
            p_ += pad;
            const std::size_t bytes = n * sizeof(*x.data());
            if (bytes) std::memcpy(p_, x.data(), bytes);
            p_ += bytes;
        } else {
            std::memcpy(p_, &x, sizeof(T));
            p_ += sizeof(T);
        }
    }
    char* position() const noexcept { return p_; }

  private:
    char* p_;
};

class Reader {
  public:
    Reader(const char* begin, std::size_t size) : p_(begin), end_(begin + size) {}

    template <class T>
    T get() {
        if constexpr (is_view<T>::value) {
            using E = typename T::value_type;
            std::uint64_t n = get<std::uint64_t>();
            skip_padding();
            const char* bytes = take(n, sizeof(std::remove_cv_t<E>));
            return T(reinterpret_cast<E*>(const_cast<char*>(bytes)), n);
        } else if constexpr (is_vector<T>::value || std::is_same_v<T, std::string>) {
            using E = typename T::value_type;
            std::uint64_t n = get<std::uint64_t>();
            skip_padding();
            const char* bytes = take(n, sizeof(E));
            if constexpr (alignof(E) <= 8) {
                // Elements start 8-byte aligned: copy them in one pass (no zero-fill first).
                const E* first = reinterpret_cast<const E*>(bytes);
                return T(first, first + n);
            } else {
                T out(n, E{});
                if (n) std::memcpy(out.data(), bytes, n * sizeof(E));
                return out;
            }
        } else if constexpr (std::is_same_v<T, bool>) {
            // Any byte other than 0 and 1 is not a bool: reading it as one is undefined.
            const unsigned char b = static_cast<unsigned char>(*take(1, 1));
            if (b > 1) throw WireError("malformed bool: byte " + std::to_string(b));
            return b == 1;
        } else {
            const char* bytes = take(1, sizeof(T));
            T x;
            std::memcpy(&x, bytes, sizeof(T));
            return x;
        }
    }
    // Throws unless every byte was consumed: a message longer than its arguments is as
    // malformed as a shorter one.
    void expect_end() const {
        if (p_ != end_)
            throw WireError(std::to_string(remaining()) + " byte(s) left over after the arguments");
    }
    std::size_t remaining() const noexcept { return static_cast<std::size_t>(end_ - p_); }

  private:
    // The writer zeroes the padding before sequence elements; anything else is malformed.
    void skip_padding() {
        const std::size_t pad = pad8(p_);
        const char* at = take(1, pad);
        for (std::size_t i = 0; i < pad; ++i)
            if (at[i] != 0) throw WireError("non-zero padding");
    }
    const char* take(std::uint64_t n, std::size_t elem) {
        if (elem != 0 && n > remaining() / elem)
            throw WireError("truncated message: need " + std::to_string(n) + " x " +
                            std::to_string(elem) + " bytes, " + std::to_string(remaining()) +
                            " left");
        const char* at = p_;
        p_ += n * elem;
        return at;
    }
    const char* p_;
    const char* end_;
};

// A 32-bit hash of the name and argument types, carried in every message so that a receiver
// whose AM of the same id is another function (other types, or another name) fails loudly
// instead of misreading bytes.
template <class... Ps>
std::string_view type_names() {
    return __PRETTY_FUNCTION__;
}
inline std::uint32_t hash_name(std::string_view s) noexcept {  // FNV-1a
    std::uint32_t h = 2166136261u;
    for (char c : s)
        h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
    return h;
}
template <class... Ps>
std::uint32_t signature() {
    return hash_name(type_names<Ps...>());
}
// The signature of a registered function: its name, then its types.
inline std::uint32_t signature_of(std::string_view name, std::string_view types) noexcept {
    std::uint32_t h = hash_name(name);
    h = (h ^ 0xffu) * 16777619u;  // separator: ("ab", "c") and ("a", "bc") differ
    for (char c : types)
        h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
    return h;
}

// Decodes Ps... from a Reader into a tuple, in order.
template <class... Ps>
std::tuple<Ps...> decode(Reader& r) {
    return std::tuple<Ps...>{r.get<Ps>()...};  // braced init: evaluated left to right
}
// Decodes exactly Ps...: throws WireError if bytes are left over.
template <class... Ps>
std::tuple<Ps...> decode_all(Reader& r) {
    auto t = decode<Ps...>(r);
    r.expect_end();
    return t;
}

}  // namespace wire
}  // namespace cascade
