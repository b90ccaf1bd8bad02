// TaskTorrent's serialization header, served by Cascade's compatibility layer: ttor::Serializer
// and ttor::view. See <cascade/compat/serializer.hpp>.
#pragma once

#include "cascade/compat/serializer.hpp"
