"""A reference run replayed when nothing it reads has changed.

The references here are pure functions of what they read: the script itself, the files and
folders named on their command line, and the versions of the libraries they import
(torch's CPU kernels and transformers' model code included). A test command that runs them
again on the same inputs recomputes the same numbers: on two cores, PyTorch's replays of
medrank's trainings and transformers' forward passes were about 600 of the native tests'
~2,100 seconds. So each script asks this module first:

    MEMO = memo.Memo(inputs=["--trace"], outputs={"--json": "path", "--out": "path"})  # before importing torch
    ...
    if __name__ == "__main__":
        MEMO.run(main)

The key is a SHA-256 of: this module and the calling script (their bytes), the Python and
package versions (read from the installed metadata, so a hit imports nothing), and the
command line with each input option's value replaced by the digest of its content (a file's
bytes, or a folder's relative paths and bytes) and each output option's value by its role.
Paths themselves never enter the key: each test writes to a scratch folder of its own.

On a hit the recorded outputs are copied to the paths asked for and the recorded standard
output is printed; the script's work does not run. On a miss the script runs, and only a
run that ends with exit status 0 is recorded (a reference that disagrees with medrank, or
fails, runs again next time and fails again). The comparison with medrank's numbers happens
inside the scripts (train_reference.py reads medrank's losses from the trace, which is part
of the key), or in the test, which reads the outputs either way: the same assertions hold.

With $MEDRANK_REFERENCE_LOG set, each run adds a line (replayed or computed) to that file:
the test command prints the counts at its end, so a log says how much was replayed.

The cache lives in $MEDRANK_REFERENCE_CACHE (default ~/.cache/medrank/reference), outside
any clone, like the build folder; MEDRANK_REFERENCE_CACHE=off recomputes everything. Entries
are written to a temporary folder and renamed into place, so a killed run leaves no half
entry; the least recently used ones are removed past 2 GiB.
"""
import hashlib
import importlib.metadata
import io
import os
import shutil
import sys
import tempfile
import time

LIMIT_BYTES = 2 << 30
# What the reference scripts import, directly or through transformers: their versions are
# part of every key.
PACKAGES = ("numpy", "safetensors", "sentencepiece", "tokenizers", "torch", "transformers")


def _digest_path(path, h):
    """Feeds a file's bytes, or a folder's sorted relative paths and bytes, to `h`."""
    if os.path.isdir(path):
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                h.update(b"\0file\0" + os.path.relpath(full, path).encode() + b"\0")
                _digest_file(full, h)
    elif os.path.isfile(path):
        _digest_file(path, h)
    else:
        h.update(b"\0missing\0")


def _digest_file(path, h):
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)


def _option_value(argv, i):
    """(option, value, how many argv items it took) for argv[i]: `--opt value` or `--opt=value`."""
    arg = argv[i]
    if arg.startswith("--") and "=" in arg:
        name, value = arg.split("=", 1)
        return name, value, 1
    if i + 1 < len(argv):
        return arg, argv[i + 1], 2
    return arg, None, 1


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


class Memo:
    """One script's cache entry for this command line (see the module's text)."""

    def __init__(self, inputs=(), outputs=None, packages=PACKAGES, argv=None):
        self.argv = list(sys.argv[1:] if argv is None else argv)
        self.outputs = dict(outputs or {})  # option -> "path" (a file or folder) or "prefix" (PREFIX.*)
        self.started = time.time()
        root = os.environ.get("MEDRANK_REFERENCE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache/medrank/reference")
        self.root = None if root == "off" else root
        self.asked = {}  # option -> the output path this run was asked for
        h = hashlib.sha256()
        script = os.path.abspath(sys.argv[0])
        for path in (__file__, script):
            h.update(b"\0source\0" + os.path.basename(path).encode() + b"\0")
            _digest_file(path, h)
        h.update(f"\0python {sys.version}\0".encode())
        for package in sorted(packages):
            h.update(f"\0{package} {_version(package)}\0".encode())
        i = 0
        while i < len(self.argv):
            name, value, took = _option_value(self.argv, i)
            if name in inputs and value is not None:
                h.update(b"\0in\0" + name.encode() + b"\0")
                _digest_path(value, h)
            elif name in self.outputs and value is not None:
                h.update(b"\0out\0" + name.encode() + b"\0")
                self.asked[name] = value
            else:
                h.update(b"\0arg\0" + self.argv[i].encode() + b"\0")
                took = 1
            i += took
        self.key = h.hexdigest()
        if self.root is not None:
            self._replay_if_recorded()

    def _log(self, what):
        """One line per run in $MEDRANK_REFERENCE_LOG, if set: the test command counts them."""
        log = os.environ.get("MEDRANK_REFERENCE_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"{what}\t{os.path.basename(sys.argv[0])}\t{self.key[:12]}\n")

    def _entry(self):
        return os.path.join(self.root, self.key[:2], self.key)

    def _replay_if_recorded(self):
        entry = self._entry()
        if not os.path.isdir(entry):
            return
        try:
            for name, asked in self.asked.items():
                recorded = os.path.join(entry, name.strip("-"))
                if self.outputs[name] == "prefix":
                    for suffix in sorted(os.listdir(recorded)):
                        shutil.copyfile(os.path.join(recorded, suffix), asked + suffix)
                elif os.path.isdir(recorded):
                    shutil.copytree(recorded, asked, dirs_exist_ok=True)
                elif os.path.isfile(recorded):
                    shutil.copyfile(recorded, asked)
            with open(os.path.join(entry, "stdout"), encoding="utf-8") as f:
                stdout = f.read()
            os.utime(entry)  # most recently used
        except OSError:
            return  # removed by another run's pruning meanwhile: computed instead (its outputs overwrite these)
        sys.stdout.write(stdout)
        sys.stdout.flush()
        print(f"{os.path.basename(sys.argv[0])}: replayed reference run {self.key[:12]} (the same script, "
              "libraries and inputs; MEDRANK_REFERENCE_CACHE=off recomputes)", file=sys.stderr)
        self._log("replayed")
        sys.exit(0)

    def run(self, main):
        """Runs `main`, recording its outputs and standard output if it ends with status 0."""
        if self.root is None:
            self._log("computed (cache off)")
            main()
            return
        self._log("computed")
        tee = _Tee(sys.stdout)
        sys.stdout = tee
        try:
            main()
        except SystemExit as e:
            if e.code not in (None, 0):
                raise
            self._record(tee.text())
            raise
        finally:
            sys.stdout = tee.inner
        self._record(tee.text())

    def _record(self, stdout):
        entry = self._entry()
        if os.path.isdir(entry):
            return
        os.makedirs(os.path.dirname(entry), exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".staging-", dir=os.path.dirname(entry))
        try:
            for name, asked in self.asked.items():
                target = os.path.join(staging, name.strip("-"))
                if self.outputs[name] == "prefix":
                    os.makedirs(target)
                    folder, stem = os.path.split(asked)
                    for file in os.listdir(folder or "."):
                        path = os.path.join(folder, file)
                        if file.startswith(stem + ".") and os.path.getmtime(path) >= self.started - 1:
                            shutil.copyfile(path, os.path.join(target, file[len(stem):]))
                elif os.path.isdir(asked):
                    shutil.copytree(asked, target)
                elif os.path.isfile(asked):
                    shutil.copyfile(asked, target)
            with open(os.path.join(staging, "stdout"), "w", encoding="utf-8") as f:
                f.write(stdout)
            os.rename(staging, entry)
        except OSError:
            pass  # another run recorded it first, or the disk is full: the outputs are there anyway
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        _prune(self.root)


class _Tee(io.TextIOBase):
    """Standard output that also keeps what was written."""

    def __init__(self, inner):
        self.inner, self.kept = inner, []

    def write(self, s):
        self.kept.append(s)
        return self.inner.write(s)

    def flush(self):
        self.inner.flush()

    def text(self):
        return "".join(self.kept)


def _prune(root):
    """Removes the least recently used entries while the cache holds more than LIMIT_BYTES."""
    try:
        _prune_entries(root)
    except OSError:
        pass  # another run pruned or recorded meanwhile: the next run prunes again


def _prune_entries(root):
    entries = []
    for shard in os.listdir(root):
        folder = os.path.join(root, shard)
        if not os.path.isdir(folder):
            continue
        for key in os.listdir(folder):
            if key.startswith(".staging-"):
                continue
            path = os.path.join(folder, key)
            size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)
            entries.append((os.path.getmtime(path), size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= LIMIT_BYTES:
            break
        shutil.rmtree(path, ignore_errors=True)
        total -= size
