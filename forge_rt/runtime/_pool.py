"""SlotPool: several slots of one backend, a workflow pinned to one of them.

llama-server started with ``--parallel N`` serves N slots, each with its own KV cache. A pool
gives each its own SlotWorker and keeps a workflow on the slot that holds its prompt. It sits
above the slot (it only starts and picks SlotWorkers), so a fleet of backends can grow here
without the slot knowing of it.
"""

from __future__ import annotations

from typing import Any

from actors import ActorSystem
from forge_rt.core import InferenceRequest, LLMClient, LLMResponse
from forge_rt.runtime._slot import SlotWorker

__all__ = ["SlotPool"]


class SlotPool:
    """Several slots of one backend (llama-server ``--parallel N``), each with its own SlotWorker.

    Each workflow (by ``key``) is pinned to one slot the first time it asks, so its prompt stays
    in that slot's KV cache; new keys go to the slot with the fewest pinned keys. Requests carry
    the slot index as ``slot_id`` (llama-server's ``id_slot``).
    """

    def __init__(self, slots: list[SlotWorker]) -> None:
        if not slots:
            raise ValueError("a SlotPool needs at least one slot")
        self.slots = slots
        self._pins: dict[str, int] = {}

    @classmethod
    async def start(
        cls, system: ActorSystem, client: LLMClient, n_slots: int, **options: Any
    ) -> SlotPool:
        """Start ``n_slots`` SlotWorkers named ``slot0``, ``slot1``, ... (options as SlotWorker)."""
        slots = [
            await SlotWorker.start(system, client, name=f"slot{i}", slot_id=i, **options)
            for i in range(n_slots)
        ]
        return cls(slots)

    def slot_for(self, key: str) -> SlotWorker:
        """The slot ``key`` is pinned to (pinning it now if it is new)."""
        index = self._pins.get(key)
        if index is None:
            loads = [0] * len(self.slots)
            for pinned in self._pins.values():
                loads[pinned] += 1
            index = loads.index(min(loads))
            self._pins[key] = index
        return self.slots[index]

    def release(self, key: str) -> None:
        """Forget ``key``'s pin (its workflow ended)."""
        self._pins.pop(key, None)

    async def infer(self, request: InferenceRequest, *, key: str, **options: Any) -> LLMResponse:
        """Run ``request`` on ``key``'s slot; options as ``SlotWorker.infer``."""
        return await self.slot_for(key).infer(request, affinity_key=key, **options)
