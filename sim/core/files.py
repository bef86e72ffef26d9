"""Files a run writes: atomic writes, output paths checked before any work, staged folders.

A :class:`UsageError` (an output path that cannot be written, a run that would not fit on the
disk) becomes one ``gpurtl: error: ...`` line and exit status 2 in :func:`gpurtl.sim.tools.cli.main`.
"""

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

__all__ = [
    "UsageError",
    "check_not_input",
    "check_output_file",
    "check_output_folder",
    "staged_folder",
    "write_atomic",
]


class UsageError(Exception):
    """A mistake in the command line (bad option value, unusable output path)."""


def _special(target):
    """``"through"`` for a node that is written through rather than replaced (a character device
    such as ``/dev/null``, a FIFO), ``"refused"`` for other nodes that are not regular files (a
    block device, a socket), ``None`` for a regular file or a missing one."""
    try:
        mode = os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return "through"
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return "refused"


def check_output_file(path, option):
    """Raise :class:`UsageError` unless ``path`` (``None`` and ``-`` mean stdout) can be written
    as a file: not a folder, in an existing, writable folder; or a character device or FIFO,
    which is written through (see :func:`write_atomic`). A symbolic link is judged by what it
    points to."""
    if path is None or str(path) == "-":
        return
    target = Path(os.path.realpath(path))
    if target.is_dir():
        raise UsageError(f"{option} `{path}` must be a file name, not a folder")
    special = _special(target)
    if special == "refused":
        raise UsageError(f"{option} `{path}` must be a file, a character device or a FIFO")
    if special == "through":
        if not os.access(target, os.W_OK):
            raise UsageError(f"{option} `{path}` is not writable")
        return
    folder = target.parent
    if not folder.exists():
        raise UsageError(f"{option} `{path}`: folder `{folder}` does not exist")
    if not folder.is_dir():
        raise UsageError(f"{option} `{path}`: `{folder}` is not a folder")
    _check_writable_folder(folder, option, path)
    if target.exists() and not os.access(target, os.W_OK):
        raise UsageError(f"{option} `{path}`: the file is not writable")


def check_not_input(path, inputs, option):
    """Raise :class:`UsageError` if the output ``path`` is one of the files ``inputs`` (a pair
    of option and path each; ``None`` and ``-`` are skipped): writing it would replace an
    input before it was read. Links and other names of the same file count as the same."""
    if path is None or str(path) == "-":
        return
    for input_option, source in inputs:
        if source is None or str(source) == "-":
            continue
        same = os.path.realpath(path) == os.path.realpath(source)
        with contextlib.suppress(OSError):
            same = same or os.path.samefile(path, source)
        if same:
            raise UsageError(
                f"{option} `{path}` is the {input_option} file; name another output file "
                f"(writing it would replace the input)"
            )


def write_atomic(path, data):
    """Write ``data`` (``str`` or ``bytes``, or an iterable of them written in turn) to ``path``.

    A regular file is written through a temporary file in its folder that is renamed into place,
    so a failure leaves the old file, or none, and never a partial one. A symbolic link is
    followed (the file it points to is written). A character device (``/dev/null``) or a FIFO is
    opened and written in place: such a node is never replaced. Any other node is refused. A
    write that fails (``/dev/full``, a full disk) raises :class:`UsageError` naming the path.
    """
    target = Path(os.path.realpath(path))
    chunks = [data] if isinstance(data, (str, bytes)) else data

    def write_all(file):
        for chunk in chunks:
            file.write(chunk.encode() if isinstance(chunk, str) else chunk)

    special = _special(target)
    if special == "refused":
        raise UsageError(f"`{path}` must be a file, a character device or a FIFO")
    try:
        if special == "through":
            with open(target, "wb") as file:
                write_all(file)
            return
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            # mkstemp creates the file 0600; give it the mode any other tool would (umask applied).
            os.fchmod(handle, 0o666 & ~_umask())
            with os.fdopen(handle, "wb") as file:
                write_all(file)
            os.replace(temporary, target)
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise
    except OSError as error:
        raise UsageError(f"cannot write `{path}`: {error.strerror or error}") from None


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _check_writable_folder(folder, option, path):
    # Creating a file is the only test that holds for every user and file system (root passes
    # os.access() on read-only mounts and /proc).
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise UsageError(
            f"{option} `{path}`: cannot write in folder `{folder}` ({error.strerror})"
        ) from None


def check_output_folder(path, option):
    """Raise :class:`UsageError` unless ``path`` is a folder, or can be created as one."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise UsageError(f"{option} `{path}` must be a folder, not a file")
    existing = target
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{option} `{path}`: `{existing}` is not a folder")
    _check_writable_folder(existing, option, path)


@contextlib.contextmanager
def staged_folder(folder):
    """Yield a temporary sibling of ``folder`` to write into; on success it replaces ``folder``,
    on any failure or Ctrl-C it is removed, with the parent folders it had to create, so an
    interrupted run leaves no stray files or empty folders."""
    folder = Path(folder)
    created = []  # the missing parent folders, made here and removed again on failure
    parent = folder.parent
    while not parent.exists():
        created.append(parent)
        parent = parent.parent
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = folder.parent / f".{folder.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for made in created:  # innermost first; one that something else wrote into stays
            with contextlib.suppress(OSError):
                made.rmdir()
        raise
    if folder.exists():
        shutil.rmtree(folder)
    staging.rename(folder)
