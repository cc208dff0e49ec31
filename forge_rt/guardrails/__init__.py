"""The reliability core shared by the runtime, the proxy and the middleware facade.

Rescue parsing, response validation, nudges, error budgets, step and prerequisite enforcement,
the loop guard, the synthetic respond tool and constrained decoding -- each piece independently
testable and composable.
"""

# --- rescue parsing, respond tool, constrained decoding (exports) ---
# --- end rescue block ---

# --- validation, nudges, budgets, steps, loop guard, facade (exports) ---
# --- end validation block ---

__all__: list[str] = [
    # rescue block names
    # validation block names
]
