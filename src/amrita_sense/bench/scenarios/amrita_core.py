"""A user's whole application turn: AmritaCore's ChatObject (PyPI amrita-core, which runs on
whichever amrita_sense its environment imports) over an instant scripted model, registered
under a protocol of its own. n/a where amrita-core is not installed.
"""

import contextlib
import gc
from typing import Any, Callable, Optional

from .framework import Holder, Plan, expect, expect_results, need, scenario, unique_ids

AMRITA_CORE_ANSWER = ("Hello", " world")
AMRITA_CORE_TURNS = ("chat", "tool", "step")  # a chat turn, one tool round, the NATIVE_DO step loop


class _AmritaCoreModel:
    """AmritaCore, its scripted model and tool, made once per process (AmritaCore keeps its
    adapters and tools in process-wide registries)."""

    made: Optional["_AmritaCoreModel"] = None

    def __init__(self) -> None:
        AmritaConfig, self.ChatObject, ModelPreset, set_config, simple_tool = need(
            "amrita_core", "AmritaConfig", "ChatObject", "ModelPreset", "set_config", "simple_tool"
        )
        ModelAdapter = need("amrita_core.base.adapter", "ModelAdapter")
        self.ToolCall, self.UniResponse = need("amrita_core.types", "ToolCall", "UniResponse")
        self.step_workflow = need("amrita_core.chatmanager", "_step_workflow_rendered")
        suffix = next(unique_ids)
        self.tool_rounds: list = []  # what each call_tools answers, in turn (None: no tool call)
        self.tool_runs = 0
        self.tool_name = f"bench_weather_{suffix}"
        set_config(AmritaConfig())
        self.preset = ModelPreset(model="scripted", protocol=f"amrita-sense-bench-{suffix}")
        self.adapter = self._adapter(ModelAdapter, self.preset.protocol)
        simple_tool(self._tool())

    @classmethod
    def get(cls) -> "_AmritaCoreModel":
        if cls.made is None:
            cls.made = cls()
        return cls.made

    def _adapter(self, ModelAdapter: Any, protocol: str) -> Any:
        model = self

        class ScriptedAdapter(ModelAdapter):
            @staticmethod
            def get_adapter_protocol() -> str:
                return protocol

            async def call_api(self, messages: Any, **kwargs: Any) -> Any:
                for chunk in AMRITA_CORE_ANSWER:
                    yield chunk
                yield model.UniResponse(role="assistant", content="".join(AMRITA_CORE_ANSWER), tool_calls=None)

            async def call_tools(self, messages: Any, tools: Any, tool_choice: Any = None, **kwargs: Any) -> Any:
                calls = model.tool_rounds.pop(0) if model.tool_rounds else None
                tool_calls = [model.ToolCall.model_validate(call) for call in calls] if calls else None
                return model.UniResponse(role="assistant", content=None, tool_calls=tool_calls)

        return ScriptedAdapter

    def _tool(self) -> Callable[..., Any]:
        async def weather(city: str) -> str:
            """Look up the weather of a city.

            Args:
                city (str): The city.
            """
            self.tool_runs += 1
            return f"sunny in {city}"

        weather.__name__ = weather.__qualname__ = self.tool_name
        return weather

    def _call(self) -> dict:
        return {
            "id": "call_0",
            "type": "function",
            "function": {"name": self.tool_name, "arguments": '{"city": "Oslo"}'},
        }

    async def turn(self, kind: str) -> str:
        """One chat turn; what the consumer received (or, if the turn failed, why)."""
        self.tool_rounds = [[self._call()], None] if kind == "tool" else [None]
        extra = {"workflow": self.step_workflow} if kind == "step" else {}
        chat = self.ChatObject(
            train={"role": "system", "content": "Answer briefly."},
            user_input="What is the weather?",
            session_id=f"bench-{kind}",
            preset=self.preset,
            **extra,
        )
        chat.begin()
        received = await chat.full_response()
        await chat
        problem = chat.get_exception()
        return received if problem is None else f"{type(problem).__name__}: {problem}"


class _EngineFlag:
    """Sets an engine flag (`_unsafe.__flags__`) for a while and restores it, leaving the
    flags' own record of what a user set untouched."""

    def __init__(self, name: str, value: Any) -> None:
        self.flags = need("amrita_sense._unsafe", "__flags__")
        self.name, self.value = name, value

    def __enter__(self) -> None:
        self.saved = getattr(self.flags, self.name)
        object.__setattr__(self.flags, self.name, self.value)

    def __exit__(self, *exc: Any) -> None:
        object.__setattr__(self.flags, self.name, self.saved)


def _amrita_core_plan(rounds: int, inline: bool) -> Plan:
    """`rounds` rounds of the three turns, alternating; a value per turn. Each turn's
    consumer must receive the scripted answer, and every tool turn must run the tool.
    The first measurement is preceded by one untimed round (first-turn costs).

    The heap is frozen from prepare to check: AmritaCore's imports leave a heap whose full
    collection takes 0.1-0.3 s, which would land in random timed runs and, as the collection
    before each run counts against the budget, leave one run per measurement."""
    model = _AmritaCoreModel.get()
    want = "".join(AMRITA_CORE_ANSWER)
    got: list = []
    holder = Holder()
    holder.nodes = None  # None until the untimed round ran
    flag = _EngineFlag("FORCE_NOT_WRAP_TO_ASYNC", True) if inline else contextlib.nullcontext()

    async def prepare() -> None:
        if holder.nodes is None:
            holder.nodes = [await model.turn(kind) for kind in AMRITA_CORE_TURNS]
            expect_results("the untimed round", holder.nodes, [want] * len(AMRITA_CORE_TURNS))
        got.clear()
        model.tool_runs = 0
        gc.freeze()

    async def timed() -> None:
        with flag:
            for _ in range(rounds):
                for kind in AMRITA_CORE_TURNS:
                    got.append(await model.turn(kind))

    def check() -> None:
        gc.unfreeze()
        expect_results("turns (what the consumer received)", got, [want] * (rounds * len(AMRITA_CORE_TURNS)))
        expect("tool runs", model.tool_runs, rounds)

    return Plan(rounds * len(AMRITA_CORE_TURNS), timed, prepare, check)


@scenario(
    "amrita_core_turn",
    "AmritaCore chat turn, instant model: chat / one tool round / NATIVE_DO step loop, alternating",
    unit="turn",
    size=5,
    quick=1,
    kind="app",
)
def amrita_core_turn(n: int) -> Plan:
    return _amrita_core_plan(n, inline=False)


@scenario(
    "amrita_core_turn_inline",
    "amrita_core_turn with FORCE_NOT_WRAP_TO_ASYNC: default @Node() sync nodes inline, no worker threads",
    unit="turn",
    size=5,
    quick=1,
    kind="app",
)
def amrita_core_turn_inline(n: int) -> Plan:
    return _amrita_core_plan(n, inline=True)
