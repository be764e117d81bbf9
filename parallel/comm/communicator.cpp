#include "parallel/comm/communicator.hpp"

namespace lcr {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::F64:
    case DType::I64:
      return 8;
    case DType::U8:
      return 1;
  }
  return 1;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F64:
      return "f64";
    case DType::I32:
      return "i32";
    case DType::I64:
      return "i64";
    case DType::U8:
      return "u8";
  }
  return "?";
}

}  // namespace lcr
