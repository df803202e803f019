// Every file tessel writes goes through here: the bytes go to a temporary name in the same
// folder, are flushed to disk, and only then renamed over the target, so a failed write (a full
// disk, a missing folder, a killed process) leaves the previous file intact and no torn or
// empty file under the target's name. It lives in placement/ because that is the one library
// every writer (cli/, the launcher, the stage runtime) already links; it has no dependencies.
#pragma once

#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>

namespace tessel::placement {

// A write that failed; the message names the target file and the cause (errno's text).
class FileWriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Replaces `path` with `contents` atomically. Throws FileWriteError "<path>: cannot write: <why>".
void write_file_atomically(const std::string& path, const std::string& contents);

// The same, for large or streamed contents: `fill` writes into the temporary file's stream.
// An exception thrown by `fill` removes the temporary file and propagates unchanged.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& fill);

}  // namespace tessel::placement
