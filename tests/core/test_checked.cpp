#include <gtest/gtest.h>
#include "cascade/cascade.hpp"
TEST(Placeholder, Builds) { cascade::Threadpool tp(2); cascade::Taskflow<int> tf(&tp); int x=0; tf.set_task([&](int){x++;}); tf.fulfill_promise(0); tp.join(); EXPECT_EQ(x,1);}
