#include "checkpoint/agree.h"

#include <cmath>
#include <cstdint>
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
  // The root's message as scalars, 6 bytes a double (integers below 2^48: exact), every other rank's zeros,
  // combined by max. Scalars are host values on every backend; a broadcast's buffer would have to be the
  // backend's memory (NCCL: the device's), and the engine's communicator is the one checkpoints use.
  const size_t len = size_t(meta[0]);
  constexpr size_t kBytesPerScalar = 6;
  std::vector<double> packed((len + kBytesPerScalar - 1) / kBytesPerScalar, 0.0);
  if (r == root)
    for (size_t i = 0; i < len; ++i)
      packed[i / kBytesPerScalar] += double(uint8_t(local->message[i])) * std::ldexp(1.0, int(8 * (i % kBytesPerScalar)));
  if (!packed.empty()) comm.all_reduce_scalars(packed.data(), packed.size(), ReduceOp::Max);
  Failure f;
  f.kind = ErrorKind(int(meta[1]));
  f.message.resize(len);
  for (size_t i = 0; i < len; ++i)
    f.message[i] = char(uint8_t(uint64_t(packed[i / kBytesPerScalar]) >> (8 * (i % kBytesPerScalar))));
  if (W > 1) f.message = fmt::format("rank {}: {}", root, f.message);  // the same text on every rank
  return f;
}

namespace {
template <class E>
[[noreturn]] void throw_agreed(const std::string& message) {
  E e(message);
  e.on_every_rank = true;  // agree() gave every rank the same failure
  throw e;
}
}  // namespace

void rethrow(const Failure& f) {
  switch (f.kind) {
    case ErrorKind::Input: throw_agreed<InputError>(f.message);
    case ErrorKind::Config: throw_agreed<ConfigError>(f.message);
    case ErrorKind::Save: throw_agreed<SaveError>(f.message);
    case ErrorKind::Other: break;
  }
  throw_agreed<Error>(f.message);
}

void run_agreed(Communicator& comm, const std::function<void()>& f) {
  if (auto fail = agree(comm, capture(f))) rethrow(*fail);
}

}  // namespace zero::checkpoint
