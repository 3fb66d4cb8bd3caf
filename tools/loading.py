"""A person's own tools, named as ``module:attribute`` or ``path/to/file.py:attribute``: what the
command line's ``--tools`` and the LangGraph server's ``REACTGRAPH_TOOLS`` load.

The attribute is a ``BaseTool`` (a classic ``Tool``, a ``@tool`` function, an MCP tool...), a list
or tuple of them, or a function of no arguments returning either. The code is the person's own,
trusted as ``langgraph.json`` trusts its graphs; a model never chooses what is loaded.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from langchain_core.tools import BaseTool

__all__ = ["load_tools", "tools_address", "tools_from_env"]

ENV = "REACTGRAPH_TOOLS"
"""The LangGraph server's tools beside the bundled ones: addresses separated by spaces."""


def _split(address: str) -> tuple[str, str]:
    where, colon, name = address.strip().rpartition(":")
    if not colon or not where or not name.isidentifier():
        raise ValueError(f"tools {address!r}: write module:attribute or path/to/file.py:attribute")
    return where, name


def tools_address(address: str) -> str:
    """The address with its file made absolute (a resume in another folder, or a worker, loads
    it again); a module's name as given."""
    where, name = _split(address)
    if where.endswith(".py"):
        return f"{os.path.abspath(where)}:{name}"
    return f"{where}:{name}"


def _from_file(path: str) -> ModuleType:
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"tools {path}: no such file")
    # One module per file, whatever its name: two files both called tools.py stay apart.
    name = "reactgraph_user_tools_" + hashlib.sha1(str(file.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ValueError(f"tools {path}: cannot be loaded as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _module(where: str) -> ModuleType:
    if where.endswith(".py"):
        return _from_file(where)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # as `python -m` would find a module of this folder
    return importlib.import_module(where)


def _as_list(address: str, value: Any) -> list[BaseTool]:
    if callable(value) and not isinstance(value, BaseTool):
        value = value()
    found = [value] if isinstance(value, BaseTool) else value
    if not isinstance(found, list | tuple) or not all(isinstance(t, BaseTool) for t in found):
        raise ValueError(
            f"tools {address}: is a {type(value).__name__}, not a langchain-core BaseTool, a "
            "list of them, or a function returning them"
        )
    return list(found)


def load_tools(address: str) -> list[BaseTool]:
    """The tools at ``address``; ValueError, in one line, when there are none to be had."""
    where, name = _split(address)
    try:
        module = _module(where)
    except ValueError:
        raise
    except Exception as error:  # the module's own failure, as it would show on import
        raise ValueError(f"tools {address}: cannot import {where} ({error!r})") from None
    if not hasattr(module, name):
        raise ValueError(f"tools {address}: {where} has no attribute {name!r}")
    try:
        return _as_list(address, getattr(module, name))
    except ValueError:
        raise
    except Exception as error:
        raise ValueError(f"tools {address}: {name}() failed ({error!r})") from None


def tools_from_env(environ: Any = os.environ) -> list[BaseTool]:
    """The tools ``REACTGRAPH_TOOLS`` names (none when it is unset)."""
    return [t for address in (environ.get(ENV) or "").split() for t in load_tools(address)]
