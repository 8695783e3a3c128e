"""Sample transforms that run inside sluice's C++ pipeline (docs/transforms.md).

The classes mirror torchvision's names, arguments and semantics. Each one is only a
description: `str(op)` is its text in the `--transforms` grammar, and the pipeline parses and
checks it against the dataset's sample shape when the Loader is built. Random parameters come
from (seed, epoch, global sample index, op position) only, so a crop is the same for any thread
count, world size or resume point.

    import sluice
    from sluice import transforms as T
    loader = sluice.Loader("data/cifar", batch_size=128, shuffle=True, transforms=[
        T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(),
        T.Normalize((0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261))])

`chain_text()` also takes torchvision's own objects of the same names (and `ToTensor`, which
sluice folds into Normalize and the Loader's dtype), so an existing
`torchvision.transforms.Compose([...])` can be passed as it is.
"""

import math
import numbers

__all__ = ["CenterCrop", "Compose", "DecodeImage", "Normalize", "RandomCrop",
           "RandomHorizontalFlip", "RandomResizedCrop", "Resize", "ToDtype", "chain_text",
           "has_to_tensor"]


def _number(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s: expected a number, got %r" % (name, value))
    if not math.isfinite(value):
        raise ValueError("%s: expected a finite number, got %r" % (name, value))
    return repr(int(value)) if isinstance(value, numbers.Integral) else repr(float(value))


def _int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s: expected an int, got %r" % (name, value))
    return repr(int(value))


def _ints(name, value):
    """An int or a sequence of ints, rendered in the grammar."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_int(name, v) for v in value) + "]"
    return _int(name, value)


def _numbers(name, value):
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_number(name, v) for v in value) + "]"
    if hasattr(value, "tolist"):  # a torch tensor or numpy array
        return _numbers(name, value.tolist())
    return _number(name, value)


class _Op:
    """One op: its torchvision name and its arguments in the grammar's text."""

    def __init__(self, name, arguments):
        self._text = "%s(%s)" % (name, ", ".join(arguments))

    def __str__(self):
        return self._text

    def __repr__(self):
        return "sluice.transforms." + self._text

    def __eq__(self, other):
        return isinstance(other, _Op) and str(self) == str(other)

    def __hash__(self):
        return hash(self._text)


class RandomCrop(_Op):
    """torchvision.transforms.RandomCrop: pads, then crops `size` at a uniform offset."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant"):
        if not isinstance(pad_if_needed, bool):
            raise TypeError("pad_if_needed: expected a bool, got %r" % (pad_if_needed,))
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError("padding_mode: expected 'constant', 'edge', 'reflect' or "
                             "'symmetric', got %r" % (padding_mode,))
        arguments = [_ints("size", size)]
        if padding is not None:
            arguments.append("padding=" + _ints("padding", padding))
        arguments += ["pad_if_needed=%s" % pad_if_needed, "fill=" + _number("fill", fill),
                      "padding_mode=" + padding_mode]
        super().__init__("RandomCrop", arguments)


class CenterCrop(_Op):
    """torchvision.transforms.CenterCrop (zero padding where the crop is larger)."""

    def __init__(self, size):
        super().__init__("CenterCrop", [_ints("size", size)])


def _bilinear(interpolation, antialias):
    """Checks torchvision's interpolation and antialias arguments: sluice resizes bilinearly
    without antialiasing (F.interpolate's bilinear, align_corners=False)."""
    if str(interpolation).lower() not in ("bilinear", "interpolationmode.bilinear"):
        raise ValueError("interpolation: expected bilinear (the only mode sluice implements), "
                         "got %r" % (interpolation,))
    if antialias not in (None, False):
        raise ValueError("antialias: expected None or False (sluice's bilinear resize has no "
                         "antialiasing), got %r" % (antialias,))


class DecodeImage(_Op):
    """The first op on a dataset of encoded images (JPEG or PNG records): the pixels PIL's
    Image.open(f).convert(mode) gives, mode "RGB" (3 channels) or "L" (grey)."""

    def __init__(self, mode="RGB"):
        name = str(mode).replace("ImageReadMode.", "").upper()
        if name not in ("RGB", "L", "GRAY"):
            raise ValueError("mode: expected 'RGB' or 'L', got %r" % (mode,))
        super().__init__("DecodeImage", ["mode=" + ("RGB" if name == "RGB" else "L")])


class Resize(_Op):
    """torchvision.transforms.Resize on tensors: an int is the smaller edge, (h, w) exact;
    bilinear without antialiasing."""

    def __init__(self, size, interpolation="bilinear", max_size=None, antialias=None):
        _bilinear(interpolation, antialias)
        arguments = [_ints("size", size)]
        if max_size is not None:
            arguments.append("max_size=" + _int("max_size", max_size))
        super().__init__("Resize", arguments)


class RandomResizedCrop(_Op):
    """torchvision.transforms.RandomResizedCrop: a window drawn by torchvision's get_params
    (scale, ratio, 10 attempts, then the central crop), resized bilinearly to `size`."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation="bilinear", antialias=None):
        _bilinear(interpolation, antialias)
        for name, value in (("scale", scale), ("ratio", ratio)):
            if len(value) != 2 or not 0 < value[0] <= value[1]:
                raise ValueError("%s: expected (lo, hi) with 0 < lo <= hi, got %r" % (name, value))
        super().__init__("RandomResizedCrop", [_ints("size", size),
                                               "scale=" + _numbers("scale", list(scale)),
                                               "ratio=" + _numbers("ratio", list(ratio))])


class RandomHorizontalFlip(_Op):
    """torchvision.transforms.RandomHorizontalFlip: reverses the rows with probability p."""

    def __init__(self, p=0.5):
        if not 0 <= float(_number("p", p)) <= 1:
            raise ValueError("p: expected a probability in [0, 1], got %r" % (p,))
        super().__init__("RandomHorizontalFlip", ["p=" + _number("p", p)])


class Normalize(_Op):
    """ToTensor then torchvision.transforms.Normalize: (x/255 - mean[c]) / std[c] for uint8
    samples, (x - mean[c]) / std[c] for float32 ones; the output is float32."""

    def __init__(self, mean, std, inplace=False):
        if inplace is not False:
            raise ValueError("inplace: sluice's Normalize writes a new buffer; only "
                             "inplace=False is meaningful, got %r" % (inplace,))
        std_text = _numbers("std", std)
        if any(float(v) == 0 for v in std_text.strip("[]").split(",")):
            raise ValueError("std: must be non-zero (it divides), got %r" % (std,))
        super().__init__("Normalize", ["mean=" + _numbers("mean", mean), "std=" + std_text])


_DTYPE_NAMES = {"uint8": "u8", "float16": "f16", "half": "f16", "bfloat16": "bf16",
                "float32": "f32", "float": "f32", "u8": "u8", "f16": "f16", "bf16": "bf16",
                "f32": "f32"}


class ToDtype(_Op):
    """A value cast to uint8, float16, bfloat16 or float32, as tensor.to(dtype): it does not
    rescale (use Normalize for ToTensor's x/255)."""

    def __init__(self, dtype, scale=False):
        name = str(dtype).replace("torch.", "")
        if name not in _DTYPE_NAMES:
            raise ValueError("dtype: expected torch.uint8, torch.float16, torch.bfloat16 or "
                             "torch.float32, got %r" % (dtype,))
        if scale is not False:
            raise ValueError("scale: sluice's ToDtype never rescales; use Normalize for x/255")
        super().__init__("ToDtype", [_DTYPE_NAMES[name]])


class Compose:
    """A list of ops applied in order, as torchvision.transforms.Compose."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __str__(self):
        return chain_text(self.transforms)

    def __repr__(self):
        return "sluice.transforms.Compose([%s])" % ", ".join(repr(t) for t in self.transforms)


def _from_torchvision(op):
    """sluice's op for a torchvision transform object of the same name, or None."""
    module = type(op).__module__ or ""
    if not module.startswith("torchvision.transforms"):
        return None
    kind = type(op).__name__
    if kind == "Compose":
        return Compose(op.transforms)
    if kind == "ToTensor":  # x/255 to float32: the Loader's dtype=torch.float32 (the default)
        return Compose([])
    if kind == "RandomCrop":
        return RandomCrop(tuple(op.size), op.padding, op.pad_if_needed, op.fill,
                          op.padding_mode)
    if kind == "CenterCrop":
        return CenterCrop(tuple(op.size))
    if kind == "RandomHorizontalFlip":
        return RandomHorizontalFlip(op.p)
    if kind == "Resize":
        size = op.size if isinstance(op.size, int) else tuple(op.size)
        return Resize(size, op.interpolation.value, op.max_size, op.antialias)
    if kind == "RandomResizedCrop":
        return RandomResizedCrop(tuple(op.size), tuple(op.scale), tuple(op.ratio),
                                 op.interpolation.value, op.antialias)
    if kind == "Normalize":
        return Normalize(op.mean, op.std, op.inplace)
    raise TypeError("transforms: torchvision's %s has no sluice equivalent yet; sluice runs "
                    "RandomCrop, CenterCrop, RandomHorizontalFlip, Normalize, Resize, "
                    "RandomResizedCrop, ToDtype and ToTensor (docs/transforms.md)" % kind)


def has_to_tensor(transforms):
    """Whether `transforms` (as chain_text takes it) holds torchvision's ToTensor, which
    chain_text folds into the Loader's float32 dtype."""
    if isinstance(transforms, Compose):
        transforms = transforms.transforms
    elif type(transforms).__name__ == "Compose" and hasattr(transforms, "transforms"):
        transforms = transforms.transforms
    if not isinstance(transforms, (list, tuple)):
        transforms = [transforms]
    for op in transforms:
        if type(op).__name__ == "ToTensor" and (type(op).__module__ or "").startswith(
                "torchvision.transforms"):
            return True
        if isinstance(op, Compose) or type(op).__name__ == "Compose":
            if has_to_tensor(op):
                return True
    return False


def chain_text(transforms):
    """The `--transforms` text of a chain: a str is taken as it is; otherwise a sequence (or a
    Compose) of sluice.transforms ops or torchvision's ops of the same names."""
    if transforms is None:
        return ""
    if isinstance(transforms, str):
        return transforms
    if isinstance(transforms, Compose):
        transforms = transforms.transforms
    converted = _from_torchvision(transforms)
    if converted is not None:
        return str(converted)
    if not isinstance(transforms, (list, tuple)):
        raise TypeError("transforms: expected a list of sluice.transforms ops (or torchvision's "
                        "of the same names), a Compose or a str, got %r" % (transforms,))
    parts = []
    for i, op in enumerate(transforms):
        converted = op if isinstance(op, (_Op, Compose)) else _from_torchvision(op)
        if converted is None:
            raise TypeError("transforms[%d]: expected a sluice.transforms op (or torchvision's "
                            "of the same name), got %r" % (i, op))
        text = str(converted)
        if text:
            parts.append(text)
    return ", ".join(parts)
