"""The ``bfcl-eval`` package: where its data is, and its checkers, imported without its SDKs.

BFCL's scoring is the benchmark's own: the AST checker of the single-turn categories and the
state-and-response checker of the multi-turn ones, called unchanged. Installed with its
dependencies, ``bfcl-eval`` brings ~6 GB (torch, a dozen hosted-model SDKs) that only its own
inference needs, so forge-rt installs it with ``--no-deps`` and adds exactly what its data and
checkers import (``mpmath``, for the multi-turn ``MathAPI``): the ``bfcl`` extra.

One import needs a stand-in. ``ast_checker`` imports BFCL's registry of hosted models
(``bfcl_eval.constants.model_config``, which imports every SDK) for one decision: whether a
dotted function name (``math.sum``) should be compared in its underscored form because the
model's API could not carry dots. forge-rt maps every tool name back to its dotted BFCL name
before checking, so the answer is always "no": the stand-in registry gives exactly that for the
name it is asked about, and nothing else of the checker changes.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
import types
from functools import cache
from pathlib import Path
from typing import Any

from forge_rt.errors import ConfigurationError

__all__ = ["BFCL_VERSION", "INSTALL_HINT", "Checkers", "checkers", "data_dir"]

BFCL_VERSION = "2026.3.23"
"""The ``bfcl-eval`` release whose data and checkers the suite was built and tested on."""

INSTALL_HINT = (
    f"pip install 'forge-rt[bfcl]' && pip install --no-deps 'bfcl-eval=={BFCL_VERSION}' "
    "(--no-deps: its full dependency tree is ~6 GB of SDKs the checkers never import)"
)

_REGISTRY = "bfcl_eval.constants.model_config"

# The executable API classes of multi_turn_base (BFCL's web-search and memory classes belong to
# other categories and import a search client or torch).
_MULTI_TURN_BASE_MODULES = frozenset(
    {
        "gorilla_file_system",
        "math_api",
        "message_api",
        "posting_api",
        "ticket_api",
        "trading_bot",
        "travel_booking",
        "vehicle_control",
    }
)


@dataclasses.dataclass(frozen=True)
class _NoDottedRename:
    """What the checker reads of a model's registry entry: names are compared as given."""

    underscore_to_dot: bool = False


class _Registry(dict[str, _NoDottedRename]):
    """The stand-in for BFCL's model registry: every model name answers ``_NoDottedRename``."""

    def __missing__(self, key: str) -> _NoDottedRename:
        return _NoDottedRename()


@dataclasses.dataclass(frozen=True)
class Checkers:
    """BFCL's own scoring functions, as its package defines them."""

    ast_checker: Any
    multi_turn_checker: Any
    execute_multi_turn_func_call: Any
    python: Any  # bfcl_eval.constants.enums.Language.PYTHON
    instances: dict[str, Any]  # where BFCL keeps the API instances of every run, by name
    type_mapping: dict[str, str]
    func_doc_files: dict[str, str]


def _require() -> None:
    if importlib.util.find_spec("bfcl_eval") is None:
        raise ConfigurationError(f"the BFCL suite needs the bfcl-eval package: {INSTALL_HINT}")


def data_dir() -> Path:
    """The folder of BFCL's data files inside the installed ``bfcl-eval``."""
    _require()
    spec = importlib.util.find_spec("bfcl_eval")
    assert spec is not None, "found by _require"
    assert spec.submodule_search_locations is not None, "bfcl_eval is a package"
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    if not folder.is_dir():
        raise ConfigurationError(f"bfcl-eval is installed without its data folder {folder}")
    return folder


@cache
def checkers() -> Checkers:
    """Import BFCL's checkers once, with the stand-in registry (see the module docstring)."""
    _require()
    if _REGISTRY not in sys.modules:
        registry = types.ModuleType(_REGISTRY)
        registry.MODEL_CONFIG_MAPPING = _Registry()  # type: ignore[attr-defined]
        sys.modules[_REGISTRY] = registry
    try:
        ast = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
        multi = importlib.import_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker")
        utils = importlib.import_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils")
        mappings = importlib.import_module("bfcl_eval.constants.type_mappings")
        enums = importlib.import_module("bfcl_eval.constants.enums")
        backends = importlib.import_module("bfcl_eval.constants.executable_backend_config")
        for module in backends.CLASS_FILE_PATH_MAPPING.values():
            if module.rsplit(".", 1)[1] in _MULTI_TURN_BASE_MODULES:
                importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise ConfigurationError(
            f"bfcl-eval's checkers need {exc.name!r}, which is not installed: {INSTALL_HINT}"
        ) from exc
    return Checkers(
        ast_checker=ast.ast_checker,
        multi_turn_checker=multi.multi_turn_checker,
        execute_multi_turn_func_call=utils.execute_multi_turn_func_call,
        python=enums.Language.PYTHON,
        instances=vars(utils),
        type_mapping=dict(mappings.GORILLA_TO_OPENAPI),
        func_doc_files=dict(backends.MULTI_TURN_FUNC_DOC_FILE_MAPPING),
    )
