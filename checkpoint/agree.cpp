#include "checkpoint/agree.h"

#include <cstring>
#include <vector>

#include "checkpoint/file_io.h"
#include "core/check.h"

namespace zero::checkpoint {

std::optional<Failure> capture(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return Failure{ErrorKind::Input, e.what()};
  } catch (const ConfigError& e) {
    return Failure{ErrorKind::Config, e.what()};
  } catch (const SaveError& e) {
    return Failure{ErrorKind::Save, e.what()};
  } catch (const std::exception& e) {
    return Failure{ErrorKind::Other, e.what()};
  }
  return std::nullopt;
}

std::optional<Failure> agree(Communicator& comm, const std::optional<Failure>& local) {
  const int W = comm.world(), r = comm.rank();
  double first = local ? double(r) : double(W);
  comm.all_reduce_scalars(&first, 1, ReduceOp::Min);
  if (first >= double(W)) return std::nullopt;
  const int root = int(first);
  double meta[2] = {0, 0};  // message length, kind (from the root only)
  if (r == root) meta[0] = double(local->message.size()), meta[1] = double(int(local->kind));
  comm.all_reduce_scalars(meta, 2, ReduceOp::Max);
  const size_t len = size_t(meta[0]);
  std::vector<int32_t> words((len + 3) / 4 + 1, 0);
  if (r == root) std::memcpy(words.data(), local->message.data(), len);
  comm.broadcast(words.data(), words.size(), DType::I32, root);  // raw bytes: no arithmetic on them
  Failure f;
  f.kind = ErrorKind(int(meta[1]));
  f.message.assign(reinterpret_cast<const char*>(words.data()), len);
  if (W > 1) f.message = fmt::format("rank {}: {}", root, f.message);  // the same text on every rank
  return f;
}

void rethrow(const Failure& f) {
  switch (f.kind) {
    case ErrorKind::Input: throw InputError(f.message);
    case ErrorKind::Config: throw ConfigError(f.message);
    case ErrorKind::Save: throw SaveError(f.message);
    case ErrorKind::Other: break;
  }
  throw Error(f.message);
}

void run_agreed(Communicator& comm, const std::function<void()>& f) {
  if (auto fail = agree(comm, capture(f))) rethrow(*fail);
}

}  // namespace zero::checkpoint
