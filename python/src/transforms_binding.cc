#include "python/src/transforms_binding.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pipeline/transforms/decode_image.h"
#include "pipeline/transforms/parse.h"
#include "pipeline/transforms/registry.h"
#include "pipeline/transforms/transform_chain.h"
#include "pybind11/numpy.h"
#include "pybind11/stl.h"
#include "python/src/errors.h"

namespace py = pybind11;

namespace sluice::python {
namespace {

// The element type of a CHW array: uint8, float16, float32, or uint16 holding bfloat16 bits
// when input_dtype is "bf16".
ElementType ArrayElementType(const py::array& x, const std::string& input_dtype) {
  if (input_dtype == "bf16" && x.dtype().is(py::dtype::of<uint16_t>())) return ElementType::kBF16;
  if (!input_dtype.empty()) {
    Check(absl::InvalidArgumentError(
        absl::StrCat("input_dtype '", input_dtype, "': expected '' or 'bf16' (a uint16 array)")));
  }
  if (x.dtype().is(py::dtype::of<uint8_t>())) return ElementType::kU8;
  if (x.dtype().is(py::dtype("float16"))) return ElementType::kF16;
  if (x.dtype().is(py::dtype::of<float>())) return ElementType::kF32;
  Check(absl::InvalidArgumentError(absl::StrCat(
      "x: expected uint8, float16 or float32 (or uint16 with input_dtype='bf16'), got ",
      std::string(py::str(x.dtype())))));
  return ElementType::kU8;
}

py::dtype NumpyDtype(ElementType t) {
  switch (t) {
    case ElementType::kU8:
      return py::dtype::of<uint8_t>();
    case ElementType::kF16:
      return py::dtype("float16");
    case ElementType::kBF16:
      return py::dtype::of<uint16_t>();  // the bits; numpy has no bfloat16
    case ElementType::kF32:
      return py::dtype::of<float>();
  }
  return py::dtype::of<uint8_t>();
}

py::array ApplyTransforms(const std::string& text, const py::array& x, uint64_t seed,
                          uint64_t epoch, uint64_t index, const std::string& input_dtype) {
  if (x.ndim() != 3) {
    Check(absl::InvalidArgumentError(
        absl::StrCat("x: expected a CHW array of 3 dimensions, got ", x.ndim())));
  }
  const SampleSpec in{ArrayElementType(x, input_dtype), static_cast<uint32_t>(x.shape(0)),
                      static_cast<uint32_t>(x.shape(1)), static_cast<uint32_t>(x.shape(2)),
                      SampleLayout::kCHW};
  const TransformChain chain = Unwrap(TransformChain::Create(Unwrap(ParseTransforms(text)), in));
  const SampleSpec& out_spec = chain.output_spec();
  // Copies keep the chain's alignment promise (a numpy view may be strided or unaligned).
  std::vector<float> src((in.bytes() + 3) / 4), dst((out_spec.bytes() + 3) / 4);
  const py::array contiguous = py::array::ensure(x, py::array::c_style);
  std::memcpy(src.data(), contiguous.data(), in.bytes());
  std::vector<float> scratch((chain.scratch_bytes() + 64) / 4);
  char* aligned = reinterpret_cast<char*>(scratch.data());
  aligned += (64 - reinterpret_cast<uintptr_t>(aligned) % 64) % 64;
  chain.Apply(src.data(), dst.data(), SampleKey{seed, epoch, index}, aligned);
  py::array out(NumpyDtype(out_spec.dtype),
                std::vector<py::ssize_t>{out_spec.channels, out_spec.height, out_spec.width});
  std::memcpy(out.mutable_data(), dst.data(), out_spec.bytes());
  return out;
}

// One encoded record (the bytes of a JPEG or PNG file) through a chain that starts with
// DecodeImage, images bounded by max_side x max_side: the output array, or ValueError with the
// reason the record was refused.
py::array DecodeTransforms(const std::string& text, const py::bytes& data, uint64_t seed,
                           uint64_t epoch, uint64_t index, uint32_t max_side) {
  const TransformChain chain = Unwrap(
      TransformChain::Create(Unwrap(ParseTransforms(text)), EncodedSampleSpec(max_side, max_side)));
  const std::string bytes = data;
  const SampleSpec& out_spec = chain.output_spec();
  std::vector<float> dst((out_spec.bytes() + 3) / 4);
  std::vector<float> scratch((chain.scratch_bytes() + 64) / 4);
  char* aligned = reinterpret_cast<char*>(scratch.data());
  aligned += (64 - reinterpret_cast<uintptr_t>(aligned) % 64) % 64;
  Check(chain.ApplyRecord(bytes.data(), bytes.size(), dst.data(), SampleKey{seed, epoch, index},
                          aligned));
  py::array out(NumpyDtype(out_spec.dtype),
                std::vector<py::ssize_t>{out_spec.channels, out_spec.height, out_spec.width});
  std::memcpy(out.mutable_data(), dst.data(), out_spec.bytes());
  return out;
}

// What each op of a chain draws for one sample (Transform::Draws, a JSON object per op), for a
// sample of `shape` (C, H, W) and `dtype` ("uint8" or "float32"); for a chain that starts with
// DecodeImage, `shape` is the decoded image's (its draws are {}).
py::list TransformDraws(const std::string& text, const std::vector<uint32_t>& shape,
                        const std::string& dtype, uint64_t seed, uint64_t epoch, uint64_t index) {
  if (shape.size() != 3) {
    Check(absl::InvalidArgumentError(
        absl::StrCat("shape: expected (C, H, W), got ", shape.size(), " numbers")));
  }
  if (dtype != "uint8" && dtype != "float32") {
    Check(absl::InvalidArgumentError(
        absl::StrCat("dtype: expected 'uint8' or 'float32', got '", dtype, "'")));
  }
  const std::vector<std::unique_ptr<Transform>> ops = Unwrap(ParseTransforms(text));
  SampleSpec spec{dtype == "uint8" ? ElementType::kU8 : ElementType::kF32, shape[0], shape[1],
                  shape[2], SampleLayout::kCHW};
  py::list out;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i == 0 && dynamic_cast<const DecodeImage*>(ops[0].get()) != nullptr) {
      out.append(py::str("{}"));
      continue;
    }
    SampleRandom rng(SampleKey{seed, epoch, index}, i);
    const SampleSpec next = Unwrap(ops[i]->OutputSpec(spec));
    out.append(py::str(ops[i]->Draws(spec, rng)));
    spec = next;
  }
  return out;
}

// The identities of a chain's ops (Transform::Identity), or ValueError saying why it does not
// parse: what sluice.transforms' classes check their own text with when built.
py::list ParseChain(const std::string& text) {
  py::list out;
  for (const std::unique_ptr<Transform>& op : Unwrap(ParseTransforms(text))) {
    out.append(py::str(op->Identity()));
  }
  return out;
}

// The registry (pipeline/transforms/registry.h): (name, (params...)) per op, sorted by name.
py::list TransformRegistry() {
  py::list out;
  for (const TransformInfo& info : RegisteredTransforms()) {
    py::tuple params(info.params.size());
    for (size_t i = 0; i < info.params.size(); ++i) {
      params[i] = py::str(info.params[i].data(), info.params[i].size());
    }
    out.append(py::make_tuple(py::str(info.name.data(), info.name.size()), params));
  }
  return out;
}

}  // namespace

void BindTransforms(py::module_& m) {
  m.def("_transform_registry", &TransformRegistry,
        "The ops the --transforms grammar knows: (name, (params in torchvision's positional "
        "order)) per op, sorted by name; sluice.transforms reads it at import.");
  m.def("_apply_transforms", &ApplyTransforms, py::arg("chain"), py::arg("x"), py::arg("seed") = 0,
        py::arg("epoch") = 0, py::arg("index") = 0, py::arg("input_dtype") = "",
        "One CHW sample through a --transforms chain (tests only): returns the output array "
        "(bfloat16 as its uint16 bits).");
  m.def("_parse_transforms", &ParseChain, py::arg("chain"),
        "The identities of a --transforms chain's ops (each argument written out); ValueError "
        "saying why the text does not parse.");
  m.def("_transform_draws", &TransformDraws, py::arg("chain"), py::arg("shape"),
        py::arg("dtype") = "uint8", py::arg("seed") = 0, py::arg("epoch") = 0, py::arg("index") = 0,
        "What each op of a chain draws for one sample, for checking sluice against "
        "torchvision (docs/transforms.md, \"Random parameters\"): a JSON object per op; "
        "`shape` is (C, H, W) of the input, or of the decoded image for a chain that starts "
        "with DecodeImage.");
  m.def("_decode_transforms", &DecodeTransforms, py::arg("chain"), py::arg("data"),
        py::arg("seed") = 0, py::arg("epoch") = 0, py::arg("index") = 0, py::arg("max_side") = 4096,
        "One encoded image (JPEG or PNG bytes) through a chain starting with DecodeImage "
        "(tests only): returns the output array; ValueError when the record is refused.");
}

}  // namespace sluice::python
