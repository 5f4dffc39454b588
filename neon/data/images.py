"""Image folders: ``root/<class>/<image>`` decoded with Pillow into ``(n, C, H, W)`` arrays and labels.

The layout is the usual one (torchvision's ``ImageFolder``, Keras's
``image_dataset_from_directory``): one sub-folder per class, the class names sorted, labels
numbered in that order, the files of each class sorted by name so the result never depends on
the file system's listing order. Files whose suffix is not an image format are skipped (a
``README.txt`` or ``.DS_Store`` beside the images is no error); hidden folders are not classes.
An image that Pillow cannot decode — corrupt, truncated, not an image at all — raises a
``DataError`` naming the file, rather than being skipped: a silently smaller dataset is a bug
found late.

Decoding is bounded: an image whose header announces more than ``max_pixels`` pixels (Pillow's
own decompression-bomb limit, ~89.5 million, by default) is refused before its pixels are
decoded, whatever ``PIL.Image.MAX_IMAGE_PIXELS`` is set to. Pixels come back as uint8 0-255;
16-bit grey images (PNG's 16-bit depth, Pillow modes ``I;16*`` and ``I``) are scaled to that
range, ``round(v / 257)``, rather than clipped (which would leave only 0 and 255).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from .iterators import DataError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".ppm", ".pgm", ".tif", ".tiff", ".webp")
MODES = {"RGB": 3, "L": 1}
DEFAULT_MAX_PIXELS = 89_478_485  # Pillow's Image.MAX_IMAGE_PIXELS default: 2**30 bytes of 32-bit pixels / 3
WIDE_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I")  # 16-bit grey (PNG opens as I;16, older Pillow as I)


def _positive_int(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= 1


def _class_folders(root: Path, classes: Sequence[str] | None) -> list[tuple[str, Path]]:
    if classes is None:
        found = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
        if not found:
            raise DataError(f"load_image_folder: {root} has no class folders; expected root/<class>/<image files>, "
                            "one folder per class")
        return [(name, root / name) for name in found]
    names = [str(name) for name in classes]
    if not names or len(set(names)) != len(names):
        raise DataError(f"load_image_folder: classes must be distinct folder names, at least one, received {names}")
    missing = [name for name in names if not (root / name).is_dir()]
    if missing:
        raise DataError(f"load_image_folder: no folder {root / missing[0]} for class {missing[0]!r} (missing: "
                        f"{missing}); expected one folder per class in classes={names}")
    return [(name, root / name) for name in names]


def _image_files(name: str, folder: Path) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise DataError(f"load_image_folder: class {name!r} ({folder}) holds no images; expected files ending in "
                        f"{', '.join(IMAGE_SUFFIXES)}")
    return files


def _to_8bit(image: Image.Image) -> Image.Image:
    """A 16-bit grey image as 8-bit grey, 0-65535 scaled to 0-255 (Pillow's ``convert`` would clip)."""
    wide = np.clip(np.asarray(image).astype(np.int64), 0, 65535)
    return Image.fromarray(((wide * 255 + 32767) // 65535).astype(np.uint8), mode="L")


def read_image(path: str | Path, mode: str = "RGB", size: tuple[int, int] | None = None,
               max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Decode one image file with Pillow into a ``(C, H, W)`` uint8 array.

    Args:
        path: the image file (any format Pillow reads).
        mode: ``"RGB"`` (3 channels; grey, palette and alpha images are converted) or ``"L"`` (1, grey).
        size: ``(H, W)`` to resize to (bilinear, antialiased when shrinking); None keeps the image's size.
        max_pixels: the most pixels (width x height) to decode; a larger image is refused from
            its header, before decoding (a decompression bomb). Pillow refuses images over twice
            ``PIL.Image.MAX_IMAGE_PIXELS`` whatever this says.

    Returns:
        uint8 ``(C, H, W)`` in 0-255; a 16-bit image is scaled, ``round(v / 257)``.

    Raises:
        DataError: naming the file — unreadable, not an image, corrupt or truncated, or more
            than ``max_pixels`` pixels.

    Example:
        >>> read_image("cats/001.jpg", size=(32, 32)).shape
        (3, 32, 32)
    """
    path = Path(path)
    if mode not in MODES:
        raise DataError(f"read_image: mode must be one of {sorted(MODES)}, received {mode!r}")
    if not _positive_int(max_pixels):
        raise DataError(f"read_image: max_pixels must be a positive int, received {max_pixels!r}")
    try:
        with warnings.catch_warnings():
            # max_pixels below replaces Pillow's warning; its DecompressionBombError (2x its limit) still applies
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                if image.width * image.height > max_pixels:
                    raise DataError(f"{path}: an image of {image.width}x{image.height} pixels, expected at most "
                                    f"max_pixels={max_pixels}; hint: a decompression bomb, or pass a larger "
                                    "max_pixels if the image is genuine")
                image.load()  # decode now: a truncated file fails here, not later
                image = (_to_8bit(image) if image.mode in WIDE_MODES else image).convert(mode)
                if size is not None and image.size != (size[1], size[0]):
                    image = image.resize((size[1], size[0]), Image.Resampling.BILINEAR)
                pixels = np.asarray(image, dtype=np.uint8)
    except DataError:
        raise
    except Exception as exc:  # Pillow's decoders raise a zoo of types on corrupt input
        # UnidentifiedImageError and "image file is truncated" are OSErrors; some decoders raise SyntaxError,
        # ValueError, struct.error or IndexError; DecompressionBombError/Warning when MAX_IMAGE_PIXELS is passed
        raise DataError(f"{path}: cannot decode the image: {type(exc).__name__}: {exc}; hint: the file is corrupt, "
                        "truncated, too large or not an image; remove or replace it") from None
    return pixels[None] if pixels.ndim == 2 else np.ascontiguousarray(pixels.transpose(2, 0, 1))


def load_image_folder(root: str | Path, size: tuple[int, int] | None = None, classes: Sequence[str] | None = None,
                      mode: str = "RGB") -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Read every image under ``root/<class>/`` into one array, with integer labels.

    Args:
        root: the folder holding one sub-folder per class.
        size: ``(H, W)`` every image is resized to; None requires all images to have one size.
        classes: the class folders to read, in label order; None: every sub-folder, sorted by name.
        mode: ``"RGB"`` (C=3) or ``"L"`` (C=1, grey).

    Returns:
        ``(X, y, classes)``: X uint8 ``(n, C, H, W)``, y int64 ``(n,)`` indexing ``classes``
        (the class names in label order); samples grouped by class, files sorted by name.

    Raises:
        DataError: ``root`` is not a folder, has no class folders, a requested class folder is
            missing, a class holds no images, an image cannot be decoded (naming the file),
            images of different sizes with ``size=None``, a bad ``size`` or ``mode``.

    Example:
        >>> X, y, classes = load_image_folder("~/data/pets/train", size=(64, 64))
        >>> train = ImageIterator(X, y, nclass=len(classes), batch_size=64, shuffle=True, seed=0)
    """
    if mode not in MODES:
        raise DataError(f"load_image_folder: mode must be one of {sorted(MODES)}, received {mode!r}")
    if size is not None:
        if not isinstance(size, (tuple, list)) or len(size) != 2 or not all(_positive_int(n) for n in size):
            raise DataError(f"load_image_folder: size must be (H, W) with positive ints, received {size!r}")
        size = (int(size[0]), int(size[1]))
    directory = Path(root).expanduser()
    if not directory.is_dir():
        raise DataError(f"load_image_folder: {directory} is not a directory; expected root/<class>/<image files>")
    folders = _class_folders(directory, classes)
    images, labels = [], []
    first: Path | None = None
    for label, (name, folder) in enumerate(folders):
        for path in _image_files(name, folder):
            pixels = read_image(path, mode, size)
            if first is None:
                first = path
            elif pixels.shape != images[0].shape:
                raise DataError(f"load_image_folder: {path} is {pixels.shape[1]}x{pixels.shape[2]} (HxW) but "
                                f"{first} is {images[0].shape[1]}x{images[0].shape[2]}; expected one size for all "
                                "images; hint: pass size=(H, W) to resize them")
            images.append(pixels)
            labels.append(label)
    return np.stack(images), np.asarray(labels, dtype=np.int64), [name for name, _ in folders]
