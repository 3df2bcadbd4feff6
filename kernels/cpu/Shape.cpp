//===- Shape.cpp - Data movement kernels ----------------------------------===//
//
// copy, reshape, transpose, concat, slice, gather, broadcast and trilu move
// bytes without interpreting them, so they serve every element type.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/KernelSupport.h"
#include "kernels/cpu/Kernels.h"

namespace zcc::cpu::kernels {

using namespace detail;

namespace {

int64_t byteSize(const TensorView &view) {
  return view.numElements() * static_cast<int64_t>(dtypeBytes(view.dtype));
}

/// memmove, not memcpy: the plan may run a copy or reshape in place.
void moveBytes(const TensorView &out, const TensorView &in) {
  int64_t bytes = byteSize(in);
  if (bytes > 0 && out.data != in.data)
    std::memmove(out.data, in.data, static_cast<size_t>(bytes));
}

/// Checks a single-input data-movement kernel: one input, one result of the
/// input's element type.
Status checkMove(const KernelArgs &args, const char *kernel) {
  if (Status s = checkOperands(args, kernel, {"input"}, {"result"}); !s.isOk())
    return s;
  return expectSameDType(kernel, "result", args.outputs[0], "input",
                         args.inputs[0]);
}

template <typename Index>
void gatherLoop(const TensorView &data, const Index *indices, int64_t count,
                int64_t outer, int64_t extent, size_t sliceBytes, char *out) {
  const char *source = data.as<const char>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < count; ++i, out += sliceBytes) {
      // Negative indices count from the end, as in ONNX.
      int64_t index = indices[i] < 0 ? indices[i] + extent : indices[i];
      std::memcpy(out, source + (o * extent + index) * sliceBytes, sliceBytes);
    }
  }
}

} // namespace

Status copy(const KernelArgs &args) {
  const char *kernel = "copy";
  if (Status s = checkOperands(args, kernel, {"input"}, {"result"}); !s.isOk())
    return s;
  // A plain byte copy: element types and shapes may differ as long as the
  // sizes agree (the planner copies between buffers of one layout).
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (byteSize(in) != byteSize(out))
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "'input' (%s %s) has %lld bytes but 'result' (%s %s) "
                       "has %lld",
                       dtypeName(in.dtype), shapeString(in.shape).c_str(),
                       static_cast<long long>(byteSize(in)),
                       dtypeName(out.dtype), shapeString(out.shape).c_str(),
                       static_cast<long long>(byteSize(out)));
  moveBytes(out, in);
  return Status::ok();
}

Status reshape(const KernelArgs &args) {
  const char *kernel = "reshape";
  if (Status s = checkMove(args, kernel); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  if (in.numElements() != out.numElements())
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "cannot reshape %s (%lld elements) into %s (%lld)",
                       shapeString(in.shape).c_str(),
                       static_cast<long long>(in.numElements()),
                       shapeString(out.shape).c_str(),
                       static_cast<long long>(out.numElements()));
  moveBytes(out, in);
  return Status::ok();
}

Status transpose(const KernelArgs &args) {
  const char *kernel = "transpose";
  if (Status s = checkMove(args, kernel); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  SmallShape perm;
  if (Status s = requiredInts(args, kernel, "perm", perm); !s.isOk())
    return s;
  SmallShape shape(in.shape);
  if (perm.rank() != shape.rank())
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "perm %s has %d entries for 'input' of rank %d",
                       shapeString(perm).c_str(), perm.rank(), shape.rank());
  SmallShape inStrides = contiguousStrides(shape), expected, srcStrides;
  bool seen[kMaxRank] = {};
  for (int i = 0; i < perm.rank(); ++i) {
    int64_t p = perm[i];
    if (p < 0 || p >= shape.rank() || seen[p])
      return kernelError(StatusCode::kInvalidArgument, kernel,
                         "perm %s is not a permutation of 0..%d",
                         shapeString(perm).c_str(), shape.rank() - 1);
    seen[p] = true;
    // Result dimension i is input dimension perm[i].
    expected.push_back(shape[static_cast<int>(p)]);
    srcStrides.push_back(inStrides[static_cast<int>(p)]);
  }
  if (Status s = expectShape(kernel, "result", out, expected); !s.isOk())
    return s;
  stridedCopy(out.data, in.data, dtypeBytes(in.dtype), expected, srcStrides, 0);
  return Status::ok();
}

Status concat(const KernelArgs &args) {
  const char *kernel = "concat";
  SmallShape expected;
  int a = 0;
  if (Status s = checkConcatOperands(args, kernel, expected, a); !s.isOk())
    return s;
  const TensorView &first = args.inputs[0], &out = args.outputs[0];

  // Each input contributes one contiguous block per index of the dimensions
  // before the axis.
  int64_t outer = 1, inner = static_cast<int64_t>(dtypeBytes(first.dtype));
  for (int d = 0; d < a; ++d)
    outer *= expected[d];
  for (int d = a + 1; d < expected.rank(); ++d)
    inner *= expected[d];
  char *dst = out.as<char>();
  for (int64_t o = 0; o < outer; ++o) {
    for (const TensorView &in : args.inputs) {
      size_t block = static_cast<size_t>(in.shape[a] * inner);
      if (block == 0)
        continue;
      std::memcpy(dst, in.as<const char>() + o * block, block);
      dst += block;
    }
  }
  return Status::ok();
}

Status slice(const KernelArgs &args) {
  const char *kernel = "slice";
  if (Status s = checkMove(args, kernel); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  SliceWindow window;
  if (Status s =
          readSliceWindow(args, kernel, "input", SmallShape(in.shape), window);
      !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "result", out, window.shape); !s.isOk())
    return s;
  if (sliceIsView(window, in, out))
    return Status::ok();
  stridedCopy(out.data, in.data, dtypeBytes(in.dtype), window.shape,
              window.strides, window.base);
  return Status::ok();
}

Status gather(const KernelArgs &args) {
  const char *kernel = "gather";
  if (Status s = checkOperands(args, kernel, {"data", "indices"}, {"result"});
      !s.isOk())
    return s;
  const TensorView &data = args.inputs[0], &indices = args.inputs[1],
                   &out = args.outputs[0];
  if (indices.dtype != plan::I64 && indices.dtype != plan::I32)
    return unsupportedDType(kernel, "indices", indices, "i64 and i32");
  if (Status s = expectSameDType(kernel, "result", out, "data", data);
      !s.isOk())
    return s;
  GatherLayout layout;
  SmallShape expected;
  if (Status s = readGatherLayout(args, kernel, data.shape, indices, "result",
                                  layout, expected);
      !s.isOk())
    return s;
  if (Status s = expectShape(kernel, "result", out, expected); !s.isOk())
    return s;

  size_t sliceBytes =
      dtypeBytes(data.dtype) * static_cast<size_t>(layout.sliceSize);
  int64_t count = indices.numElements();
  // All indices are checked before anything is written.
  if (Status s = checkIndices(kernel, indices, layout.extent); !s.isOk())
    return s;
  if (indices.dtype == plan::I64)
    gatherLoop(data, indices.as<const int64_t>(), count, layout.outer,
               layout.extent, sliceBytes, out.as<char>());
  else
    gatherLoop(data, indices.as<const int32_t>(), count, layout.outer,
               layout.extent, sliceBytes, out.as<char>());
  return Status::ok();
}

Status broadcast(const KernelArgs &args) {
  const char *kernel = "broadcast";
  if (Status s = checkMove(args, kernel); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  SmallShape inShape(in.shape), outShape(out.shape), shape;
  if (inShape.rank() > outShape.rank() ||
      !broadcastShapes(inShape, outShape, shape) || shape != outShape)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "'input' of shape %s does not broadcast to 'result' "
                       "of shape %s",
                       shapeString(in.shape).c_str(),
                       shapeString(out.shape).c_str());
  stridedCopy(out.data, in.data, dtypeBytes(in.dtype), outShape,
              broadcastStrides(inShape, outShape), 0);
  return Status::ok();
}

Status trilu(const KernelArgs &args) {
  const char *kernel = "trilu";
  if (Status s = checkMove(args, kernel); !s.isOk())
    return s;
  const TensorView &in = args.inputs[0], &out = args.outputs[0];
  SmallShape shape(in.shape);
  if (shape.rank() < 2)
    return kernelError(StatusCode::kInvalidArgument, kernel,
                       "'input' must have rank at least 2, got %s",
                       shapeString(in.shape).c_str());
  if (Status s = expectShape(kernel, "result", out, shape); !s.isOk())
    return s;
  bool upper = true;
  if (Status s = optionalBool(args, kernel, "upper", true, upper); !s.isOk())
    return s;
  int64_t k = 0;
  if (Status s = optionalInt(args, kernel, "k", 0, k); !s.isOk())
    return s;

  int64_t rows = shape[shape.rank() - 2], columns = shape.back();
  int64_t matrices =
      rows * columns == 0 ? 0 : shape.numElements() / (rows * columns);
  size_t bytes = dtypeBytes(in.dtype);
  const char *src = in.as<const char>();
  char *dst = out.as<char>();
  for (int64_t m = 0; m < matrices; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < columns; ++j) {
        int64_t e = (m * rows + i) * columns + j;
        // The triangle is offset by diagonal k (ONNX Trilu); zero is all
        // zero bytes in every element type.
        bool keep = upper ? j - i >= k : j - i <= k;
        if (keep)
          copyElement(dst + e * bytes, src + e * bytes, bytes);
        else
          std::memset(dst + e * bytes, 0, bytes);
      }
    }
  }
  return Status::ok();
}

} // namespace zcc::cpu::kernels
