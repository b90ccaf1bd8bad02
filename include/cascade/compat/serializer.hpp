// TaskTorrent's Serializer<Ts...>, over Cascade's wire format (cascade/comm/serialization.hpp):
// the size of some values, writing them into a buffer, reading them back as a tuple. A view
// is read back in place: it points into the buffer.
//
//   ttor::Serializer<int, ttor::view<double>> s;
//   std::vector<char> buf(s.size(k, v));
//   s.write_buffer(buf.data(), buf.size(), k, v);
//   auto [k2, v2] = s.read_buffer(buf.data(), buf.size());
#pragma once

#include <cstddef>
#include <tuple>

#include "cascade/comm/serialization.hpp"
#include "cascade/comm/view.hpp"
#include "cascade/core/errors.hpp"

namespace ttor {

using cascade::view;

/// Writes and reads back values of types Ts... (anything an active message carries).
template <class... Ts>
class Serializer {
  public:
    /// The bytes write_buffer needs for ts (an upper bound: views are aligned in the buffer).
    std::size_t size(const Ts&... ts) const {
        cascade::wire::Sizer s;
        s(ts...);
        return s.bytes();
    }
    /// Writes ts at buffer, which holds `bytes` >= size(ts...) bytes.
    void write_buffer(char* buffer, std::size_t bytes, const Ts&... ts) const {
        if (bytes < size(ts...))
            throw cascade::UsageError("ttor::Serializer::write_buffer: buffer too small");
        cascade::wire::Writer w(buffer);
        w(ts...);
    }
    /// Reads back what write_buffer wrote at buffer (views point into it).
    std::tuple<Ts...> read_buffer(const char* buffer, std::size_t bytes) const {
        cascade::wire::Reader r(buffer, bytes);
        return cascade::wire::decode<Ts...>(r);
    }
};

}  // namespace ttor
