"""sluice.transforms: the Python ops render the --transforms grammar, and the chain they (or
torchvision's own objects of the same names) describe gives torchvision's result."""
import re

import numpy as np
import pytest
import torch
import torchvision.transforms as TV

import sluice.transforms as T
from sluice import _sluice

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261)


def image(seed=0):
    return np.random.default_rng(seed).integers(0, 256, size=(3, 20, 22), dtype=np.uint8)


def apply(chain, x, index=0):
    return _sluice._apply_transforms(T.chain_text(chain), x, seed=5, epoch=2, index=index)


def test_ops_render_the_grammar_with_every_argument():
    assert str(T.RandomCrop(32, padding=4)) == (
        "RandomCrop(32, padding=4, pad_if_needed=False, fill=0, padding_mode=constant)")
    assert str(T.CenterCrop((24, 20))) == "CenterCrop([24, 20])"
    assert str(T.RandomHorizontalFlip()) == "RandomHorizontalFlip(p=0.5)"
    assert str(T.Normalize(MEAN, STD)) == (
        "Normalize(mean=[0.4914, 0.4822, 0.4465], std=[0.247, 0.243, 0.261])")
    assert str(T.ToDtype(torch.bfloat16)) == "ToDtype(bf16)"
    assert T.chain_text([T.CenterCrop(8), T.ToDtype("float16")]) == "CenterCrop(8), ToDtype(f16)"


def test_the_rendered_chain_equals_torchvision_on_the_same_image():
    x = image()
    ours = apply([T.CenterCrop((16, 18)), T.RandomHorizontalFlip(p=1.0), T.Normalize(MEAN, STD)],
                 x)
    theirs = TV.Compose([TV.CenterCrop((16, 18)), TV.RandomHorizontalFlip(p=1.0),
                         TV.Normalize(MEAN, STD)])(torch.from_numpy(x).float().div(255))
    np.testing.assert_array_equal(ours.view(np.uint32), theirs.numpy().view(np.uint32))


def test_torchvision_objects_are_taken_as_they_are():
    tv = TV.Compose([TV.CenterCrop(12), TV.RandomHorizontalFlip(p=1.0), TV.ToTensor(),
                     TV.Normalize(MEAN, STD)])
    assert T.chain_text(tv) == T.chain_text(
        [T.CenterCrop((12, 12)), T.RandomHorizontalFlip(p=1.0), T.Normalize(MEAN, STD)])
    x = image(1)
    ours = apply(tv, x)
    theirs = tv.transforms[-1](TV.functional.hflip(TV.functional.center_crop(
        torch.from_numpy(x).float().div(255), 12)))
    np.testing.assert_array_equal(ours.view(np.uint32), theirs.numpy().view(np.uint32))


def test_a_random_crop_from_torchvisions_object_is_one_of_its_padded_crops():
    tv = TV.RandomCrop(16, padding=2, padding_mode="reflect")
    x = image(2)
    padded = TV.functional.pad(torch.from_numpy(x), 2, padding_mode="reflect").numpy()
    for index in range(20):
        out = apply([tv], x, index)
        assert any(np.array_equal(out, padded[:, t:t + 16, l:l + 16])
                   for t in range(padded.shape[1] - 15) for l in range(padded.shape[2] - 15))


@pytest.mark.parametrize("make,error,text", [
    (lambda: T.RandomCrop(32, padding_mode="wrap"), ValueError, "padding_mode"),
    (lambda: T.RandomCrop(32.5), TypeError, "size"),
    (lambda: T.RandomHorizontalFlip(p=2), ValueError, "p: expected a probability"),
    (lambda: T.Normalize([0.5, float("nan")], [1, 1]), ValueError, "mean: expected a finite"),
    (lambda: T.ToDtype(torch.int32), ValueError, "dtype"),
    (lambda: T.chain_text([TV.RandomPerspective()]), TypeError, "RandomPerspective has no sluice"),
    (lambda: T.chain_text([lambda x: x]), TypeError, "transforms[0]"),
    (lambda: T.chain_text(5), TypeError, "expected a list"),
])
def test_bad_arguments_are_refused_naming_them(make, error, text):
    with pytest.raises(error, match=None) as e:
        make()
    assert text in str(e.value)


def test_a_zero_std_is_refused_when_the_op_is_built():
    with pytest.raises(ValueError, match="std: must be non-zero"):
        T.Normalize((0.5, 0.5, 0.5), (0.2, 0, 0.2))
    with pytest.raises(ValueError, match="std: must be non-zero"):
        T.Normalize(0.5, 0)


def test_totensor_is_found_in_lists_and_composes():
    assert T.has_to_tensor(TV.Compose([TV.CenterCrop(8), TV.ToTensor()]))
    assert T.has_to_tensor([T.CenterCrop(8), TV.ToTensor()])
    assert not T.has_to_tensor([T.CenterCrop(8)]) and not T.has_to_tensor(None)


def test_decode_and_resize_ops_render_the_grammar_and_read_torchvisions_objects():
    assert str(T.DecodeImage()) == "DecodeImage(mode=RGB)"
    assert str(T.DecodeImage("L")) == "DecodeImage(mode=L)"
    assert str(T.Resize(256)) == "Resize(256)"
    assert str(T.Resize((3, 4))) == "Resize([3, 4])"
    assert str(T.Resize(8, max_size=20)) == "Resize(8, max_size=20)"
    assert str(T.RandomResizedCrop(224)) == (
        "RandomResizedCrop(224, scale=[0.08, 1.0], ratio=[0.75, 1.3333333333333333])")
    # A list with no ToTensor ran on PIL images: PIL's resampling (test_pil_resize.py).
    tv = TV.Compose([TV.RandomResizedCrop(224), TV.Resize(256), TV.Resize((5, 6))])
    assert T.chain_text(tv) == ("RandomResizedCrop([224, 224], scale=[0.08, 1.0], "
                                "ratio=[0.75, 1.3333333333333333], antialias=True), "
                                "Resize(256, antialias=True), Resize([5, 6], antialias=True)")
    # After ToTensor, resizes compute on ToTensor's floats: its x/255 comes first.
    tv = TV.Compose([TV.ToTensor(), TV.RandomResizedCrop(224), TV.Resize((5, 6))])
    assert T.chain_text(tv) == ("Normalize(mean=[0.0], std=[1.0]), "
                                "RandomResizedCrop([224, 224], scale=[0.08, 1.0], "
                                "ratio=[0.75, 1.3333333333333333]), Resize([5, 6])")
    x = image(3)
    ours = apply([T.Resize((10, 30))], x.astype(np.float32))
    theirs = TV.Resize((10, 30))(torch.from_numpy(x).float()).numpy()
    assert np.abs(ours - theirs).max() <= 2.0 ** -14


@pytest.mark.parametrize("make,error", [
    (lambda: T.Resize(8, interpolation="nearest"), "expected bilinear"),
    (lambda: T.Resize(8, antialias=1), "antialias"),
    (lambda: T.RandomResizedCrop(8, scale=(0.9, 0.1)), "scale"),
    (lambda: T.DecodeImage("CMYK"), "mode"),
])
def test_decode_and_resize_refuse_what_sluice_does_not_do(make, error):
    with pytest.raises(ValueError, match=error):
        make()


def test_the_ops_are_the_cpp_registrys_and_their_arguments_follow_it():
    registry = dict(_sluice._transform_registry())
    assert registry and list(registry) == sorted(registry)
    for name, params in registry.items():
        cls = getattr(T, name)
        assert name in T.__all__ and issubclass(cls, T._Op), name
        # The class takes the registry's parameters first, in torchvision's positional order,
        # so a positional call means the same in Python, the grammar and torchvision.
        assert T._class_params(cls)[:len(params)] == tuple(params), name


def test_an_op_without_a_python_class_gets_one_from_the_registry():
    # As an op added to registry.cc alone would get: the registry's parameters, positionally or
    # by name, rendered in the grammar that the C++ parser reads back.
    Crop = T._generated_op("CenterCrop", ("size",))
    assert str(Crop(8)) == "CenterCrop(8)" and str(Crop(size=[8, 6])) == "CenterCrop(size=[8, 6])"
    Flip = T._generated_op("RandomHorizontalFlip", ("p",))
    x = image()
    np.testing.assert_array_equal(apply([Crop((16, 18)), Flip(p=1.0)], x),
                                  apply([T.CenterCrop((16, 18)), T.RandomHorizontalFlip(1.0)], x))
    with pytest.raises(TypeError, match="unexpected argument 'padding'"):
        Crop(8, padding=2)
    with pytest.raises(TypeError, match="at most 1 positional"):
        Crop(8, 9)
    with pytest.raises(TypeError, match="given twice"):
        Crop(8, size=9)


def test_a_torchvision_op_sluice_lacks_is_named_with_the_registrys_ops():
    # Every op of the registry, sorted by name, then ToTensor (which Python folds away).
    names = sorted(name for name, _ in _sluice._transform_registry())
    assert len(names) >= 2
    with pytest.raises(TypeError, match=re.escape(
            "RandomPerspective has no sluice equivalent yet; sluice runs %s, ToTensor and "
            "PILToTensor (docs/transforms.md)" % ", ".join(names))):
        T.chain_text([TV.RandomPerspective()])
