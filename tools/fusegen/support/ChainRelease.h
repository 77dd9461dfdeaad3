// ChainRelease: frees deep trees of shared nodes without deep recursion. A node that owns its
// children through shared_ptr is freed recursively by default, one stack frame per level, so
// dropping a formula like x + x + ... + x (a left-deep tree of 10^5 levels) overflows the
// stack. A node's destructor hands its children to releaseChildren() instead: the outermost
// destructor on the thread frees them one at a time, and the nested ones only queue theirs.
#pragma once

#include <memory>
#include <vector>

namespace fusegen {

template <class T> void releaseChildren(std::vector<std::shared_ptr<const T>>& children) {
  // Raw thread-local pointers, never destroyed: a node freed during static destruction
  // must still find its queue.
  thread_local std::vector<std::shared_ptr<const T>>* pending = nullptr;
  thread_local bool draining = false;
  if (!pending) pending = new std::vector<std::shared_ptr<const T>>();
  for (std::shared_ptr<const T>& c : children)
    pending->push_back(std::move(c));
  children.clear();
  if (draining) return;
  draining = true;
  while (!pending->empty()) {
    std::shared_ptr<const T> last = std::move(pending->back());
    pending->pop_back();
    last.reset(); // may run a child's destructor, which queues its own children
  }
  draining = false;
}

} // namespace fusegen
