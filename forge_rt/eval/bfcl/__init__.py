"""BFCL (the Berkeley Function Calling Leaderboard) as an eval suite: its data, its checkers.

Cases come from the installed ``bfcl-eval`` package and are scored by its own checkers; forge_rt
only sends them, as a client would, through its proxy (see :mod:`forge_rt.eval.bfcl._suite`),
and decodes the calls it got back. Install: ``pip install 'forge-rt[bfcl]'`` and
``pip install --no-deps 'bfcl-eval==2026.3.23'`` (see :mod:`forge_rt.eval.bfcl._package`).
"""

from forge_rt.eval.bfcl._cases import CATEGORIES as CATEGORIES
from forge_rt.eval.bfcl._cases import MULTI_TURN as MULTI_TURN
from forge_rt.eval.bfcl._cases import SINGLE_TURN as SINGLE_TURN
from forge_rt.eval.bfcl._cases import BfclCase as BfclCase
from forge_rt.eval.bfcl._cases import Category as Category
from forge_rt.eval.bfcl._cases import load_category as load_category
from forge_rt.eval.bfcl._cases import sample_cases as sample_cases
from forge_rt.eval.bfcl._cases import tool_name as tool_name
from forge_rt.eval.bfcl._check import Call as Call
from forge_rt.eval.bfcl._check import CheckVerdict as CheckVerdict
from forge_rt.eval.bfcl._check import as_python_call as as_python_call
from forge_rt.eval.bfcl._check import check_multi_turn as check_multi_turn
from forge_rt.eval.bfcl._check import check_single_turn as check_single_turn
from forge_rt.eval.bfcl._drive import MAX_STEPS as MAX_STEPS
from forge_rt.eval.bfcl._drive import Reply as Reply
from forge_rt.eval.bfcl._package import BFCL_VERSION as BFCL_VERSION
from forge_rt.eval.bfcl._package import INSTALL_HINT as INSTALL_HINT
from forge_rt.eval.bfcl._suite import BARE as BARE
from forge_rt.eval.bfcl._suite import PROXY_ABLATIONS as PROXY_ABLATIONS
from forge_rt.eval.bfcl._suite import ROUTES as ROUTES
from forge_rt.eval.bfcl._suite import BfclPlan as BfclPlan
from forge_rt.eval.bfcl._suite import Route as Route
from forge_rt.eval.bfcl._suite import check_ablation as check_ablation
from forge_rt.eval.bfcl._suite import proxy_config as proxy_config
from forge_rt.eval.bfcl._suite import run_bfcl as run_bfcl
from forge_rt.eval.bfcl._suite import run_case as run_case

__all__ = [
    "BARE",
    "BFCL_VERSION",
    "CATEGORIES",
    "INSTALL_HINT",
    "MAX_STEPS",
    "MULTI_TURN",
    "PROXY_ABLATIONS",
    "ROUTES",
    "SINGLE_TURN",
    "BfclCase",
    "BfclPlan",
    "Call",
    "Category",
    "CheckVerdict",
    "Reply",
    "Route",
    "as_python_call",
    "check_ablation",
    "check_multi_turn",
    "check_single_turn",
    "load_category",
    "proxy_config",
    "run_bfcl",
    "run_case",
    "sample_cases",
    "tool_name",
]
