"""``import needle`` answered by quill: the one change a needle user makes is the import.
``needle`` is quill itself and ``needle.X`` is ``quill.X``, so classes keep one identity."""
import importlib
import importlib.abc
import importlib.util
import sys

import quill


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.startswith("needle."):
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("quill." + spec.name[len("needle."):])

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Alias())
sys.modules["needle"] = quill
