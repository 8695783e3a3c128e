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

The ops are read at import from the C++ registry (pipeline/transforms/registry.cc, through
`_sluice._transform_registry()`): the classes below check their arguments early, in Python's
words; an op of the registry without one here gets a generated class that takes the registry's
parameters and leaves the checks to the C++ parser. torchvision's objects are mapped through the
same table, so a new op needs no Python.
"""

import inspect as _inspect
import math as _math
import numbers
import re as _re

from . import _sluice
from ._args import _printable

__all__ = ["CenterCrop", "Compose", "DecodeImage", "Normalize", "RandomCrop",
           "RandomHorizontalFlip", "RandomResizedCrop", "Resize", "ToDtype", "chain_text",
           "has_to_tensor"]


def _number(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s: expected a number, got %r" % (name, value))
    if not _math.isfinite(value):
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


def _channel_numbers(name, value):
    """A mean or std: a number for every channel, or a non-empty sequence of one per channel;
    ValueError for an empty one (it held no channel's value)."""
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        value = value.tolist()  # a torch tensor or numpy array
    if isinstance(value, (list, tuple)) and not value:
        raise ValueError("%s: must have one value per channel (at least one), or one value for "
                         "every channel; got an empty %s" % (name, type(value).__name__))
    return _numbers(name, value)


def _numbers(name, value):
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_number(name, v) for v in value) + "]"
    if hasattr(value, "tolist"):  # a torch tensor or numpy array
        return _numbers(name, value.tolist())
    return _number(name, value)


class _Op:
    """One op: its torchvision name and its arguments in the grammar's text, checked by sluice's
    parser when built (ValueError naming the argument and what it takes)."""

    def __init__(self, name, arguments):
        self._text = "%s(%s)" % (name, ", ".join(arguments))
        if name == "DecodeImage":  # draft=True needs the op after it: its class checks the rest
            return
        try:
            _sluice._parse_transforms(self._text)
        except ValueError as e:
            # The positions are in the text built here, which the user did not write.
            message = _re.sub(r" \(character \d+\)", "", str(e))
            message = _re.sub(r"^at character \d+ \('[^']*'\): ", "", message)
            raise ValueError("%s: %s" % (name, message) if not message.startswith(name)
                             else message) from None

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


def _bilinear(interpolation, antialias, op="Resize"):
    """Checks torchvision's interpolation and antialias arguments: sluice resizes bilinearly,
    without antialiasing as torchvision resizes a tensor (None, False), or as PIL resizes an
    8-bit image (True: what torchvision's Resize does to a PIL image), bilinear or, there only,
    bicubic. Returns the grammar's arguments for them."""
    if antialias is not True and antialias not in (None, False):
        raise ValueError("%s antialias: expected True (PIL's resampling, as torchvision resizes a "
                         "PIL image), False or None (the tensor path, no antialiasing), got %s"
                         % (op, _printable(antialias)))
    mode = str(interpolation).lower().replace("interpolationmode.", "")
    if mode == "bicubic" and antialias is True:
        return ["interpolation=bicubic", "antialias=True"]
    if mode != "bilinear":
        raise ValueError("%s interpolation: expected bilinear, or bicubic with antialias=True "
                         "(PIL's bicubic resampling; the tensor path is bilinear only), got %s"
                         % (op, _printable(interpolation)))
    return ["antialias=True"] if antialias is True else []


class DecodeImage(_Op):
    """The first op on a dataset of encoded images (JPEG or PNG records): the pixels PIL's
    Image.open(f).convert(mode) gives, mode "RGB" (3 channels) or "L" (grey).

    draft (opt in): decode a JPEG at 1/2, 1/4 or 1/8 of its size, bitwise as PIL's
    ``im.draft("RGB", (w, h)); im.convert(mode)`` for a requested size (h, w): True takes the
    size of the first Resize, RandomResizedCrop or CenterCrop after it; an int is a square; a
    pair is (h, w), torchvision's order (PIL's draft takes (w, h)). PNGs decode whole."""

    def __init__(self, mode="RGB", draft=False):
        name = str(mode).replace("ImageReadMode.", "").upper()
        if name not in ("RGB", "L", "GRAY"):
            raise ValueError("mode: expected 'RGB' or 'L', got %r" % (mode,))
        arguments = ["mode=" + ("RGB" if name == "RGB" else "L")]
        if draft is True:
            arguments.append("draft=True")
        elif draft is not False and draft is not None:
            sizes = list(draft) if isinstance(draft, (list, tuple)) else [draft]
            if not 1 <= len(sizes) <= 2 or any(
                    isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1
                    for v in sizes):
                raise ValueError("draft: expected False, True, a positive int or (h, w) of "
                                 "positive ints, got %s" % (_printable(draft),))
            arguments.append("draft=" + _ints("draft", draft))
        super().__init__("DecodeImage", arguments)


class Resize(_Op):
    """torchvision.transforms.Resize: an int is the smaller edge, (h, w) exact; bilinear.
    antialias=None or False: as torchvision resizes a tensor (no antialiasing).
    antialias=True: as torchvision resizes a PIL image (PIL's resampling, bit for bit; uint8
    images only, so before Normalize or ToDtype)."""

    def __init__(self, size, interpolation="bilinear", max_size=None, antialias=None):
        flag = _bilinear(interpolation, antialias)
        arguments = [_ints("size", size)]
        if max_size is not None:
            arguments.append("max_size=" + _int("max_size", max_size))
        super().__init__("Resize", arguments + flag)


class RandomResizedCrop(_Op):
    """torchvision.transforms.RandomResizedCrop: a window drawn by torchvision's get_params
    (scale, ratio, 10 attempts, then the central crop), resized bilinearly to `size`;
    antialias=True resizes it as PIL does (torchvision's op on a PIL image), as Resize."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation="bilinear", antialias=None):
        flag = _bilinear(interpolation, antialias, "RandomResizedCrop")
        checked = {}
        for name, value in (("scale", scale), ("ratio", ratio)):
            if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
                value = value.tolist()  # a torch tensor or numpy array
            # Numbers first: '0.1' < 1 raised "'<' not supported between instances of 'int'
            # and 'str'", naming neither the argument nor what it takes.
            if not isinstance(value, (list, tuple)) or any(
                    isinstance(v, bool) or not isinstance(v, numbers.Real) for v in value):
                raise TypeError("%s: expected (lo, hi), two numbers, got %s" % (name,
                                                                                _printable(value)))
            if len(value) != 2 or not 0 < value[0] <= value[1]:
                raise ValueError("%s: expected (lo, hi) with 0 < lo <= hi, got %s"
                                 % (name, _printable(value)))
            checked[name] = list(value)
        super().__init__("RandomResizedCrop", [_ints("size", size),
                                               "scale=" + _numbers("scale", checked["scale"]),
                                               "ratio=" + _numbers("ratio", checked["ratio"])]
                         + flag)


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
        mean_text = _channel_numbers("mean", mean)
        std_text = _channel_numbers("std", std)
        if any(float(v) == 0 for v in std_text.strip("[]").split(",")):
            raise ValueError("std: must be non-zero (it divides), got %s" % _printable(std))
        super().__init__("Normalize", ["mean=" + mean_text, "std=" + std_text])


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


def _grammar_value(name, value):
    """A Python value in the --transforms grammar (checked by the C++ parser)."""
    if isinstance(value, _Op):  # an op RandomApply runs
        return str(value)
    if _is_torchvision(value):
        raise TypeError("%s: give sluice.transforms ops here, or pass torchvision's own "
                        "RandomApply or RandomChoice in the list (it keeps their place's PIL or "
                        "tensor semantics); got torchvision's %s" % (name, type(value).__name__))
    if isinstance(value, bool):
        return "True" if value else "False"
    if value is None:
        return "None"
    if isinstance(value, numbers.Real):
        return _number(name, value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_grammar_value(name, v) for v in value) + "]"
    if hasattr(value, "tolist"):  # a torch tensor or numpy array
        return _grammar_value(name, value.tolist())
    if hasattr(value, "value"):  # an enum, e.g. torchvision's InterpolationMode
        return _grammar_value(name, value.value)
    raise TypeError("%s: expected a number, a string or a list, got %r" % (name, value))


def _generated_op(name, params):
    """The class of a registry op that has no class above: it takes the registry's parameters,
    positionally or by name, as torchvision's constructor does."""

    def __init__(self, *args, **kwargs):
        if len(args) > len(params):
            raise TypeError("%s: takes at most %d positional arguments (%s), got %d"
                            % (name, len(params), ", ".join(params), len(args)))
        for key in kwargs:
            if key not in params:
                raise TypeError("%s: unexpected argument %r (it takes %s)"
                                % (name, key, ", ".join(params)))
            if key in params[:len(args)]:
                raise TypeError("%s: argument %r given twice" % (name, key))
        arguments = [_grammar_value(p, v) for p, v in zip(params, args)]
        arguments += ["%s=%s" % (p, _grammar_value(p, kwargs[p])) for p in params if p in kwargs]
        _Op.__init__(self, name, arguments)

    doc = "%s(%s): an op of the --transforms grammar (docs/transforms.md)." % (
        name, ", ".join(params))
    return type(name, (_Op,), {"__init__": __init__, "__doc__": doc, "_params": params})


# The registry, read once: op name -> its parameters in torchvision's positional order.
_REGISTRY = dict(_sluice._transform_registry())
for _name, _params in _REGISTRY.items():
    if _name not in globals():
        globals()[_name] = _generated_op(_name, tuple(_params))
        __all__.append(_name)
__all__.sort()


def _class_params(cls):
    """The argument names an op class takes (its __init__'s, else the registry's)."""
    if hasattr(cls, "_params"):
        return cls._params
    return tuple(p for p in _inspect.signature(cls.__init__).parameters if p != "self")


# torchvision's ops that turn a PIL image into a tensor: the ops before one (or all, in a list
# with neither, as an ImageFolder's transform list is) ran on PIL images.
_TO_TENSOR = ("ToTensor", "PILToTensor")
# torchvision's resizing ops, whose pixels differ between a PIL image and a tensor.
_RESIZING = ("Resize", "RandomResizedCrop")
# torchvision's ops whose arithmetic differs between a PIL image and a tensor, and which sluice
# runs either way (pil=True: PIL's).
_PIL_ARITHMETIC = ("ColorJitter", "Grayscale", "RandomAdjustSharpness", "RandomAffine",
                   "RandomAutocontrast", "RandomGrayscale", "RandomRotation")
# torchvision's ops that run other ops (their `transforms`), which keep the position's semantics.
_NESTING = ("RandomApply", "RandomChoice")
# sluice's ops that only move values (or, Normalize, read u8 as ToTensor then Normalize): after
# torchvision's ToTensor they give the same batches on u8 samples as on ToTensor's floats, so
# ToTensor's x/255 can wait for the Loader. Any other op after ToTensor computes on values (a
# blend, a blur, a resize, a fill): ToTensor then becomes Normalize(mean=[0.0], std=[1.0]), its
# x/255 in float32, so that op sees ToTensor's floats as in torchvision.
_MOVES_VALUES = ("CenterCrop", "Normalize", "RandomHorizontalFlip", "RandomVerticalFlip",
                 "ToDtype")
_ZERO_FILLED = ("Pad", "RandomCrop", "RandomErasing")
_TO_TENSOR_OP = "Normalize(mean=[0.0], std=[1.0])"


def _moves_values(text):
    """Whether an op's grammar text (as str(op) gives it) only moves values."""
    name = text.split("(", 1)[0]
    if name in _MOVES_VALUES:
        return True
    if name in _NESTING:
        inner = text[text.index("(") + 1:].lstrip()
        if inner.startswith("["):
            inner = inner[1:]
        return all(_moves_values(part) for part in _split_ops(inner))
    if name in _ZERO_FILLED:
        filled = _re.search(r"\b(fill|value)=([^,)]*)", text)
        return filled is None or filled.group(2).strip() in ("0", "0.0", "[0]", "[0.0]")
    return False


def _split_ops(text):
    """The top-level op texts of a list of ops in the grammar ("A(...), B(...)], p=0.5)")."""
    ops, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth < 0:
                ops.append(text[start:i])
                break
        elif c == "," and depth == 0:
            ops.append(text[start:i])
            start = i + 1
    return [op for op in (o.strip() for o in ops) if "(" in op]


def _is_torchvision(op, kinds=None):
    return (type(op).__module__ or "").startswith("torchvision.transforms") and (
        kinds is None or type(op).__name__ in kinds)


def _flatten(transforms):
    """The ops of `transforms` (an op, a list, or nested Composes of sluice's or torchvision's),
    in order."""
    if isinstance(transforms, Compose) or (
            _is_torchvision(transforms, ("Compose",)) and hasattr(transforms, "transforms")):
        transforms = transforms.transforms
    if not isinstance(transforms, (list, tuple)):
        return [transforms]
    out = []
    for op in transforms:
        if isinstance(op, Compose) or _is_torchvision(op, ("Compose",)):
            out.extend(_flatten(op))
        else:
            out.append(op)
    return out


def _from_torchvision(op, on_pil=False, has_tensor=False):
    """sluice's op for a torchvision transform object of the same name, or None. The object's
    attributes of the same names as the op's arguments are its arguments. `on_pil`: the op ran
    on PIL images in the user's pipeline (before ToTensor or PILToTensor), where a resize is
    PIL's, antialiased whatever its antialias says (torchvision ignores it there)."""
    if not _is_torchvision(op):
        return None
    kind = type(op).__name__
    if kind == "Compose":
        return Compose(op.transforms)
    if kind in _TO_TENSOR:  # ToTensor: x/255 to float32, the Loader's dtype=torch.float32 (the
        return Compose([])  # default); PILToTensor: uint8, the Loader's dtype=torch.uint8
    if kind in _NESTING:  # their ops ran where they stand: PIL images or tensors
        inner = [_from_torchvision(t, on_pil, has_tensor) if _is_torchvision(t) else t
                 for t in _flatten(list(op.transforms))]
        return globals()[kind](inner, getattr(op, "p", None))
    if kind not in _REGISTRY:
        raise TypeError("transforms: torchvision's %s has no sluice equivalent yet; sluice runs "
                        "%s, ToTensor and PILToTensor (docs/transforms.md)"
                        % (kind, ", ".join(sorted(_REGISTRY))))
    arguments = {}
    for name in _class_params(globals()[kind]):
        if not hasattr(op, name):
            continue
        value = getattr(op, name)
        if isinstance(value, list):
            value = tuple(value)
        if hasattr(value, "value") and not isinstance(value, (numbers.Number, str)):
            value = value.value  # an enum such as InterpolationMode: its name
        arguments[name] = value
    if kind in _PIL_ARITHMETIC and on_pil:
        arguments["pil"] = True
    if on_pil and (kind == "RandomErasing" or (kind == "Normalize" and has_tensor)):
        raise ValueError("transforms: torchvision's %s stands before ToTensor, where torchvision "
                         "gives it a PIL image and fails (it takes tensors only); put it after "
                         "ToTensor, as torchvision needs" % kind)
    if kind in _RESIZING:
        if on_pil:
            arguments["antialias"] = True
        elif arguments.get("antialias") is True:
            raise ValueError("transforms: torchvision's %s(antialias=True) after ToTensor (its "
                             "antialiased tensor resize) has no sluice equivalent; put the resize "
                             "before ToTensor, where torchvision resizes the PIL image as sluice's "
                             "antialias=True does, or pass antialias=None" % kind)
    return globals()[kind](**arguments)


def _first_to_tensor(ops):
    for i, op in enumerate(ops):
        if _is_torchvision(op, _TO_TENSOR):
            return i
    return None


def has_to_tensor(transforms, kind="ToTensor"):
    """Whether `transforms` (as chain_text takes it) holds torchvision's `kind` (ToTensor, which
    chain_text folds into the Loader's float32 dtype, or PILToTensor, its uint8 one)."""
    return any(_is_torchvision(op, (kind,)) for op in _flatten(transforms))


def chain_text(transforms):
    """The `--transforms` text of a chain: a str is taken as it is; otherwise a sequence (or a
    Compose) of sluice.transforms ops or torchvision's ops of the same names. torchvision's
    Resize and RandomResizedCrop before ToTensor or PILToTensor, or in a list with neither (as
    an ImageFolder's transform list), resized PIL images: they become antialias=True, PIL's
    resampling; after it, the tensor path's."""
    if transforms is None:
        return ""
    if isinstance(transforms, str):
        return transforms
    if not isinstance(transforms, (list, tuple, Compose)) and not _is_torchvision(transforms):
        raise TypeError("transforms: expected a list of sluice.transforms ops (or torchvision's "
                        "of the same names), a Compose or a str, got %r" % (transforms,))
    ops = _flatten(transforms)
    to_tensor = _first_to_tensor(ops)
    parts = []
    after_to_tensor = None  # where ToTensor's x/255 would go in `parts`
    for i, op in enumerate(ops):
        converted = op if isinstance(op, _Op) else _from_torchvision(
            op, on_pil=to_tensor is None or i < to_tensor, has_tensor=to_tensor is not None)
        if converted is None:
            raise TypeError("transforms[%d]: expected a sluice.transforms op (or torchvision's "
                            "of the same name), got %r" % (i, op))
        if i == to_tensor and _is_torchvision(op, ("ToTensor",)):
            after_to_tensor = len(parts)
        text = str(converted)
        if text:
            parts.append(text)
    if after_to_tensor is not None:
        rest = parts[after_to_tensor:]
        # Up to the first Normalize, which reads u8 as ToTensor does: after it, values are floats.
        upto = next((k for k, t in enumerate(rest) if t.startswith("Normalize(")), len(rest))
        if not all(_moves_values(t) for t in rest[:upto]):
            parts.insert(after_to_tensor, _TO_TENSOR_OP)
    return ", ".join(parts)
