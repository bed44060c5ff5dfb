"""Triggers for the raise sites this runtime shares with amrita-sense 1.1.3.

Each trigger uses only the API both have, and makes one raise site fire.
`SITES` maps a site's name to (trigger, expected exception type name, message
prefix); the prefixes are 1.1.3's messages, verbatim (our messages may add
detail after them). `tests/test_messages.py` runs the triggers on this
runtime; run this file with a 1.1.3 interpreter
(`python tests/support/raise_sites.py`) to check that the table still describes
1.1.3: it prints each site that does not match and exits non-zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from typing import Any


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def _node(name: str = "step", result: Any = None, **options: Any) -> Any:
    from amrita_sense import Node

    def step() -> Any:
        return result

    step.__name__ = name
    return Node(wrap_to_async=False, **options)(step)


def _graph(*nodes: Any) -> Any:
    from amrita_sense import NodeCompose

    return NodeCompose(*nodes).render()


def _interp(*nodes: Any, **kwargs: Any) -> Any:
    from amrita_sense import WorkflowInterpreter

    return WorkflowInterpreter(_graph(*(nodes or (_node(),))), **kwargs)


# ----- compose and render ------------------------------------------------------------------


def rendered_in_source() -> None:
    from amrita_sense import NodeCompose

    NodeCompose(_graph(_node()))


def build_twice() -> None:
    _graph(_node())._build()


def duplicate_alias() -> None:
    from amrita_sense import ALIAS

    _graph(ALIAS(_node("a"), "same"), ALIAS(_node("b"), "same"))


def alias_of_instruction() -> None:
    from amrita_sense import ALIAS, Try

    ALIAS(Try(_node()).CATCH(ValueError, _node()), "t")


def index_out_of_range() -> None:
    _graph(_node())[5]


def alias_lookup() -> None:
    _graph(_node()).calc.resolve_alias("missing")


def address_lookup() -> None:
    _graph(_node()).calc.find_addr([7])


def jmp_to_missing_alias() -> None:
    from amrita_sense import JMP

    _graph(JMP("nowhere"))


def invoke_missing_alias() -> None:
    from amrita_sense import INVOKE

    _graph(INVOKE("nowhere"))


def jmp_compiled_twice() -> None:
    from amrita_sense import JMP

    node = JMP([0])
    _graph(node)
    _graph(node)


def call_compiled_twice() -> None:
    from amrita_sense import CALL

    node = CALL([0])
    _graph(node)
    _graph(node)


def invoke_compiled_twice() -> None:
    from amrita_sense import ALIAS, INVOKE

    node = INVOKE("x")
    _graph(node, ALIAS(_node("x"), "x"))
    _graph(node, ALIAS(_node("x"), "x"))


def dll_of_a_non_compose() -> None:
    from amrita_sense.node.dll import DLLCompose

    DLLCompose([_node()])


def dll_render() -> None:
    from amrita_sense import NodeCompose
    from amrita_sense.node.dll import DLLCompose

    DLLCompose(NodeCompose(_node())).render()


def dll_proxy_before_build() -> None:
    from amrita_sense import NodeCompose
    from amrita_sense.node.dll import DLLCompose

    DLLCompose(NodeCompose(_node())).get_proxy()


# ----- instruction declarations --------------------------------------------------------------


def if_body_is_a_compose() -> None:
    from amrita_sense import IF, NodeCompose

    IF(_node("c", True), NodeCompose(_node()))


def try_catch_after_finally() -> None:
    from amrita_sense import Try

    Try(_node()).FINALLY(_node()).CATCH(ValueError, _node())


def try_finally_twice() -> None:
    from amrita_sense import Try

    Try(_node()).FINALLY(_node()).FINALLY(_node())


def try_then_twice() -> None:
    from amrita_sense import Try

    Try(_node()).CATCH(ValueError, _node()).THEN(_node()).THEN(_node())


def try_without_handlers() -> None:
    from amrita_sense import Try

    _graph(Try(_node()))


def while_body_is_a_compose() -> None:
    from amrita_sense import WHILE, NodeCompose

    _graph(WHILE(_node("c", False)).ACTION(NodeCompose(_node(), _node())))


def while_body_is_a_jump() -> None:
    from amrita_sense import JMP, WHILE

    _graph(WHILE(_node("c", False)).ACTION(JMP([0])))


def while_action_twice() -> None:
    from amrita_sense import WHILE

    WHILE(_node("c", False)).ACTION(_node()).ACTION(_node())


def native_do_while_twice() -> None:
    from amrita_sense.instructions.native import NATIVE_DO

    NATIVE_DO(_node()).WHILE(_node("c", False)).WHILE(_node("d", False))


def native_do_without_while() -> None:
    from amrita_sense.instructions.native import NATIVE_DO

    _graph(NATIVE_DO(_node()))


def native_while_action_twice() -> None:
    from amrita_sense.instructions.native import NATIVE_WHILE

    NATIVE_WHILE(_node("c", False)).ACTION(_node()).ACTION(_node())


def native_while_without_action() -> None:
    from amrita_sense.instructions.native import NATIVE_WHILE

    _graph(NATIVE_WHILE(_node("c", False)))


def native_if_else_twice() -> None:
    from amrita_sense.instructions.native import NATIVE_IF

    NATIVE_IF(_node("c", True), _node()).ELSE(_node()).ELSE(_node())


def native_payload_type() -> None:
    from amrita_sense.instructions.native import NATIVE_WHILE

    _graph(NATIVE_WHILE(_node("c", False)).ACTION(42))


def break_outside_a_loop() -> None:
    from amrita_sense.instructions.native import BREAK_LOOP

    _run(_interp(BREAK_LOOP()).run())


def trigger_without_an_event() -> None:
    from amrita_sense import MatcherFactory

    _run(MatcherFactory.trigger_event(None))


def trigger_a_constructable_event_class() -> None:
    from amrita_sense import MatcherFactory
    from amrita_sense.hook.event import ConstructableEvent

    class Made(ConstructableEvent):
        def get_event_type(self) -> str:
            return "made"

        @classmethod
        def constructor(cls) -> Made:
            return cls()

    _run(MatcherFactory.trigger_event(Made))


def batch_run_failure() -> None:
    from amrita_sense import Node
    from amrita_sense.instructions import BATCH_RUN

    def broken() -> None:
        raise ValueError("broken")

    _run(_interp(BATCH_RUN(_node(), Node(wrap_to_async=False)(broken), fail_fast=False)).run())


def event_priority() -> None:
    from amrita_sense import Matcher

    Matcher("evt", priority=0)


def trigger_a_non_event() -> None:
    from amrita_sense import TRIGGER_EVENT

    class NotAnEvent:
        @staticmethod
        def constructor() -> object:
            return object()

    _run(_interp(TRIGGER_EVENT(NotAnEvent)).run())


# ----- interpreter -------------------------------------------------------------------------


def if_flag_not_bool() -> None:
    _interp().if_flag = 1


def jump_to_invalid_address() -> None:
    _interp().jump_to([9, 9])


def call_sub_without_the_lock() -> None:
    _run(_interp().call_sub([0]))


def run_while_running() -> None:
    async def main() -> None:
        gate = asyncio.Event()

        async def hold() -> None:
            await gate.wait()

        from amrita_sense import Node

        interp = _interp(Node()(hold))
        task = asyncio.ensure_future(interp.run())
        await asyncio.sleep(0.01)
        try:
            await interp.run()
        finally:
            gate.set()
            await task

    _run(main())


def wait_when_idle() -> None:
    _interp().wait  # noqa: B018 - the property raises


def _sub_interpreter() -> Any:
    from amrita_sense import WorkflowInterpreter

    parent = _interp()
    return WorkflowInterpreter(parent.get_graph(), parent_interpreter=parent)


def terminate_all_on_a_sub_interpreter() -> None:
    _run(_sub_interpreter().terminate_all())


def wait_all_on_a_sub_interpreter() -> None:
    _run(_sub_interpreter().wait_all())


def sub_interpreters_of_a_sub_interpreter() -> None:
    sub = _sub_interpreter()
    try:
        sub.all_sub_interpreters  # noqa: B018
    except RuntimeError as exc:
        # The message starts with both ids: name them for the table's fixed prefix.
        raise RuntimeError(str(exc).replace(sub.id, "<sub>").replace(sub.top_interpreter.id, "<top>")) from None


def reset_node() -> None:
    from amrita_sense import RESET

    RESET.func()


def suspend_node() -> None:
    from amrita_sense import SUSPEND

    SUSPEND.func()


def interrupt_into_inside_if() -> None:
    from amrita_sense.instructions import INT

    async def main() -> None:
        interp = _interp(INT([0]), _node())
        interp.if_flag = True
        await interp.run()

    _run(main())


def failing_node_provider() -> None:
    from amrita_sense import Node
    from amrita_sense.hook.matcher import Depends

    def broken() -> int:
        raise ValueError("provider broke")

    def uses(value: int = Depends(broken)) -> None:
        return None

    _run(_interp(Node(wrap_to_async=False)(uses)).run())


# ----- dependency injection ----------------------------------------------------------------


def plain_provider() -> int:
    return 1


def generator_provider() -> Any:
    yield 1


def handler_with_two_depends(x: Any = None) -> None:
    return None


def depends_in_annotation_and_default() -> None:
    from typing import Annotated

    from amrita_sense.hook.fun_typing import sign_func
    from amrita_sense.hook.matcher import Depends

    handler_with_two_depends.__defaults__ = (Depends(plain_provider),)
    handler_with_two_depends.__annotations__ = {"x": Annotated[int, Depends(plain_provider)]}
    sign_func(handler_with_two_depends)


def scope_on_a_plain_provider() -> None:
    from amrita_sense.hook.matcher import Depends

    Depends(plain_provider, scope="call")


def generator_provider_resolved_directly() -> None:
    from amrita_sense.hook.matcher import Depends

    _run(Depends(generator_provider).resolve())


class NeverProvided:
    """A type no pool holds."""


def needs_a_missing_value(x: NeverProvided) -> None:
    return None


def node_dependency_unresolvable() -> None:
    from amrita_sense import Node

    _run(_interp(Node(wrap_to_async=False)(needs_a_missing_value)).run())


def scope_inactive() -> None:
    from amrita_sense.di.scope import LifecycleScope, Scope

    async def main() -> None:
        scope = LifecycleScope(Scope.CALL)
        async with scope:
            pass

        @contextlib.asynccontextmanager
        async def resource() -> Any:
            yield 1

        await scope.acquire("k", resource)

    _run(main())


def scope_closed() -> None:
    from amrita_sense.di.scope import LifecycleScope, Scope

    async def main() -> None:
        scope = LifecycleScope(Scope.CALL)
        async with scope:
            pass
        async with scope:
            pass

    _run(main())


# ----- streams -------------------------------------------------------------------------------


def _stream() -> Any:
    from amrita_sense.streaming import SuspendObjectStream

    return SuspendObjectStream()


async def _noop(_item: Any) -> None:
    return None


def second_response_callback() -> None:
    stream = _stream()
    stream.set_callback_func(_noop)
    stream.set_callback_func(_noop)


def second_push_callback() -> None:
    stream = _stream()
    stream.set_callback_fun_sending(_noop)
    stream.set_callback_fun_sending(_noop)


def suspend_decorator_on_sync_function() -> None:
    from amrita_sense.streaming import SuspendObjectStream

    def plain() -> None:
        return None

    SuspendObjectStream.suspend(plain)


def suspend_decorator_without_stream() -> None:
    from amrita_sense.streaming import SuspendObjectStream

    async def gated(x: int, *, y: int = 0) -> None:
        return None

    _run(SuspendObjectStream.suspend(gated)(1, y=2))


def yield_after_queue_done() -> None:
    async def main() -> None:
        stream = _stream()
        await stream.set_queue_done()
        await stream.yield_response("late")

    _run(main())


def push_after_queue_done() -> None:
    async def main() -> None:
        stream = _stream()
        await stream.set_queue_done()
        await stream.push_object("late")

    _run(main())


def second_response_generator() -> None:
    stream = _stream()
    stream.get_response_generator()
    stream.get_response_generator()


def send_after_producer_done() -> None:
    async def main() -> None:
        stream = _stream()
        await stream.send_done_to_producer()
        await stream.send_to_producer("late")

    _run(main())


def second_producer_input_generator() -> None:
    stream = _stream()
    stream.get_producer_input_generator()
    stream.get_producer_input_generator()


def second_suspend_request() -> None:
    async def main() -> None:
        stream = _stream()
        first = asyncio.ensure_future(stream.wait_to_suspend())
        await asyncio.sleep(0.01)
        try:
            await stream.wait_to_suspend()
        finally:
            first.cancel()
            with contextlib.suppress(BaseException):
                await first

    _run(main())


# ----- small types ---------------------------------------------------------------------------


def stack_overflow() -> None:
    from amrita_sense import Stack

    stack = Stack(1)
    stack.push(1)
    stack.push(2)


def stack_empty() -> None:
    from amrita_sense import Stack

    Stack(1).pop()


def pointer_delete() -> None:
    from amrita_sense import PointerVector

    del PointerVector([0, 1])[0]


def weak_cache_capacity() -> None:
    from amrita_sense.weakcache import WeakValueLRUCache

    WeakValueLRUCache(capacity=-1)


def weak_cache_none() -> None:
    from amrita_sense.weakcache import WeakValueLRUCache

    WeakValueLRUCache(capacity=2).put("k", None)


def conflicting_flags() -> None:
    from amrita_sense._unsafe import _Flags

    flags = _Flags()
    flags.WORKFLOW_DI_NO_CACHE = True
    flags.WORKFLOW_DI_PRELOAD_CACHE = True


def flag_modified_twice() -> None:
    from amrita_sense._unsafe import _Flags

    flags = _Flags()
    flags.SQUASHED_LOOP = True
    flags.SQUASHED_LOOP = False


Site = tuple[Callable[[], None], str, str]

SITES: dict[str, Site] = {
    "NodeCompose(rendered)": (
        rendered_in_source,
        "TypeError",
        "A rendered composition cannot be used in a source composition",
    ),
    "NodeComposeRendered._build twice": (build_twice, "GraphBuildError", "NodeComposeRendered is already built"),
    "duplicate ALIAS": (duplicate_alias, "GraphBuildError", "Alias same already exists in address `[0]`"),
    "ALIAS of an instruction": (alias_of_instruction, "ValueError", "Alias node can't be SelfCompileInstruction"),
    "rendered[index]": (index_out_of_range, "NullPointerException", "NodeComposeRendered index out of range: 5"),
    "calc.resolve_alias": (alias_lookup, "NullPointerException", "alias 'missing' not found"),
    "calc.find_addr": (address_lookup, "NullPointerException", "address [7] not found"),
    "JMP to a missing alias": (
        jmp_to_missing_alias,
        "AliasNotFoundError",
        "nowhere not found in namespace, please check your alias!",
    ),
    "INVOKE a missing alias": (
        invoke_missing_alias,
        "AliasNotFoundError",
        "nowhere not found in namespace, please check your alias!",
    ),
    "JMP compiled twice": (
        jmp_compiled_twice,
        "RuntimeError",
        "JMP node has already been compiled; a compose-bound node can only be compiled once",
    ),
    "CALL compiled twice": (
        call_compiled_twice,
        "RuntimeError",
        "BuiltinTags.CALL node has already been compiled; a compose-bound node can only be compiled once",
    ),
    "INVOKE compiled twice": (
        invoke_compiled_twice,
        "RuntimeError",
        "INVOKE node has already been compiled; a compose-bound node can only be compiled once",
    ),
    "DLLCompose of a non-compose": (dll_of_a_non_compose, "GraphBuildError", "Only NodeCompose is allowed."),
    "DLLCompose.render()": (
        dll_render,
        "GraphBuildError",
        "DLLCompose: render() is not allowed, please use it in a NodeCompose context.",
    ),
    "DLLCompose.get_proxy() before a build": (
        dll_proxy_before_build,
        "GraphBuildError",
        "DLLCompose: No proxy available, which means this compose has never been built.",
    ),
    "IF ... DO(compose)": (
        if_body_is_a_compose,
        "TypeError",
        "DO cannot be a composition or SelfCompileInstruction, please use FUN_BLOCK to wrap the sub component.",
    ),
    "Try CATCH after FINALLY": (try_catch_after_finally, "IllegalState", "Cannot add catch after finally"),
    "Try FINALLY twice": (try_finally_twice, "IllegalState", "Cannot add finally after finally"),
    "Try THEN twice": (try_then_twice, "IllegalState", "Cannot add THEN after THEN"),
    "Try without CATCH or FINALLY": (
        try_without_handlers,
        "IllegalState",
        "Try Clause must have at least one catch or finally",
    ),
    "WHILE ACTION(compose)": (
        while_body_is_a_compose,
        "TypeError",
        "WHILE body must be a single node, got NodeCompose.",
    ),
    "WHILE ACTION(JMP)": (
        while_body_is_a_jump,
        "RuntimeError",
        "Please DO NOT use a JMP node in a WHILE clause. Which will cause probably problems.",
    ),
    "WHILE ACTION twice": (while_action_twice, "RuntimeError", "Please DO NOT follow a ACTION after a ACTION"),
    "NATIVE_DO WHILE twice": (native_do_while_twice, "TypeError", "NATIVE_DO can only have a single .WHILE(condition)"),
    "NATIVE_DO without WHILE": (
        native_do_without_while,
        "RuntimeError",
        "NATIVE_DO requires .WHILE(condition) before use",
    ),
    "NATIVE_WHILE ACTION twice": (native_while_action_twice, "TypeError", "ACTION already set on NativeWhileClause"),
    "NATIVE_WHILE without ACTION": (
        native_while_without_action,
        "RuntimeError",
        "NATIVE_WHILE requires .ACTION(body) before use",
    ),
    "NATIVE_IF ELSE twice": (native_if_else_twice, "TypeError", "ELSE branch already defined"),
    "native body of another type": (native_payload_type, "TypeError", "Unsupported payload type: int"),
    "BREAK_LOOP outside a native loop": (
        break_outside_a_loop,
        "RuntimeError",
        "BuiltinTags.BREAK_LOOP: not configured — must be inside a native loop body",
    ),
    "trigger_event without an event": (trigger_without_an_event, "RuntimeError", "No event found in args"),
    "trigger_event of a ConstructableEvent class": (
        trigger_a_constructable_event_class,
        "TypeError",
        "Cannot trigger ConstructableEvent class ",
    ),
    "BATCH_RUN with a failing node": (
        batch_run_failure,
        "ExceptionGroup",
        "Some exceptions were detected when running nodes",
    ),
    "Matcher priority": (event_priority, "ValueError", "Event priority cannot be zero or negative!"),
    "TRIGGER_EVENT of a non-event": (
        trigger_a_non_event,
        "TypeError",
        "Expected an event object, got <class 'object'>",
    ),
    "if_flag = non-bool": (if_flag_not_bool, "TypeError", "if_flag must be a boolean value"),
    "jump_to an invalid address": (jump_to_invalid_address, "NullPointerException", "[9, 9] is not a valid address"),
    "call_sub without the lock": (
        call_sub_without_the_lock,
        "RuntimeError",
        "Subroutine call detected, but lock is not acquired by current coroutine and caller is not in interrupt mode. Set `interrupt` to True to use outer interrupt mode.",
    ),
    "run() while running": (
        run_while_running,
        "IllegalState",
        "Cannot start a new workflow while one is already running",
    ),
    "wait while idle": (wait_when_idle, "IllegalState", "Interpreter is not running."),
    "terminate_all on a sub-interpreter": (
        terminate_all_on_a_sub_interpreter,
        "IllegalState",
        "This interpreter is not top level.",
    ),
    "wait_all on a sub-interpreter": (
        wait_all_on_a_sub_interpreter,
        "IllegalState",
        "Only top-level interpreter can wait all interpreters.",
    ),
    "all_sub_interpreters of a sub-interpreter": (
        sub_interpreters_of_a_sub_interpreter,
        "RuntimeError",
        "<sub> is not a top-level interpreter, the real top-level interpreter is <top>",
    ),
    "RESET": (reset_node, "InterruptNotice", "InterruptNotice Reset Node"),
    "SUSPEND": (suspend_node, "InterruptKeepContext", "InterruptNotice Suspend Node with context retention"),
    "INT inside IF": (interrupt_into_inside_if, "IllegalState", "Interrupt into is not allowed in IF statement"),
    "a failing node provider": (failing_node_provider, "ExceptionGroup", "Some exceptions had occurred."),
    "Depends in annotation and default": (
        depends_in_annotation_and_default,
        "DependsDeclarationError",
        "Parameter 'x' of handler_with_two_depends declares `Depends` in both its annotation and its default value; pick one.",
    ),
    "Depends(scope=) on a plain provider": (
        scope_on_a_plain_provider,
        "DependsDeclarationError",
        "`scope` is only meaningful for generator dependencies, but 'plain_provider' is a plain callable; use `use_cache=True` to reuse its value instead.",
    ),
    "generator Depends resolved directly": (
        generator_provider_resolved_directly,
        "DependsInjectFailed",
        "'generator_provider' is a generator dependency; it has to be resolved through a lifecycle scope rather than by calling `resolve()` directly.",
    ),
    "node dependency unresolvable": (
        node_dependency_unresolvable,
        "DependsResolveFailed",
        "Function needs_a_missing_value in NodeSuspend::needs_a_missing_value could not be resolved due to reason `Missed dependency`",
    ),
    "scope not active": (scope_inactive, "RuntimeError", "Cannot acquire a resource from an inactive 'call' scope"),
    "scope closed": (scope_closed, "RuntimeError", "'call' scope has already been closed"),
    "set_callback_func twice": (
        second_response_callback,
        "StreamStateError",
        "The callback function of this chat object has already been set!",
    ),
    "set_callback_fun_sending twice": (
        second_push_callback,
        "StreamStateError",
        "The callback function for sending-side responses has already been set!",
    ),
    "suspend() of a sync function": (
        suspend_decorator_on_sync_function,
        "TypeError",
        "plain is not a coroutine function.",
    ),
    "suspend() without a stream argument": (
        suspend_decorator_without_stream,
        "TypeError",
        "No SuspendObjectStream parameter found in function 'gated'. Args types: ['int'], Kwargs keys: ['y']",
    ),
    "yield_response after set_queue_done": (yield_after_queue_done, "StreamStateError", "Queue is closed."),
    "push_object after set_queue_done": (push_after_queue_done, "StreamStateError", "Queue is closed."),
    "second response generator": (second_response_generator, "StreamStateError", "Response is already being consumed."),
    "send_to_producer after done": (send_after_producer_done, "StreamStateError", "Reverse queue is closed."),
    "second producer input generator": (
        second_producer_input_generator,
        "StreamStateError",
        "Producer input is already being consumed.",
    ),
    "second wait_to_suspend": (second_suspend_request, "StreamStateError", "Already waiting for suspend!"),
    "Stack overflow": (stack_overflow, "OverflowError", "Stack overflow"),
    "Stack empty": (stack_empty, "IndexError", "Stack is empty"),
    "del PointerVector[i]": (pointer_delete, "ValueError", "Cannot delete items from PointerVector"),
    "WeakValueLRUCache capacity": (weak_cache_capacity, "ValueError", "Capacity must be a positive integer"),
    "WeakValueLRUCache None value": (weak_cache_none, "ValueError", "Cannot store None value in WeakValueLRUCache"),
    "conflicting engine flags": (
        conflicting_flags,
        "RuntimeError",
        "Conflicting flags:('WORKFLOW_DI_NO_CACHE', 'WORKFLOW_DI_PRELOAD_CACHE') are set, please check the documentation for more details",
    ),
    "engine flag set twice": (flag_modified_twice, "RuntimeError", "SQUASHED_LOOP is modified"),
}


def outcome(trigger: Callable[[], None]) -> tuple[str, str]:
    """(exception type name, message) of what `trigger` raised; ("", "") if it raised nothing."""
    try:
        trigger()
    except BaseException as exc:  # noqa: BLE001 - every site's exception is the data
        return type(exc).__name__, str(exc)
    return "", ""


def mismatches() -> list[str]:
    """One line per site whose outcome does not start with the table's type and prefix."""
    lines = []
    for name, (trigger, kind, prefix) in SITES.items():
        got_kind, message = outcome(trigger)
        if got_kind != kind or not message.startswith(prefix):
            lines.append(f"{name}: expected {kind}: {prefix!r}\n    got {got_kind}: {message!r}")
    return lines


if __name__ == "__main__":
    if "--dump" in sys.argv:
        for site, (site_trigger, _, _) in SITES.items():
            print(site, "=>", *outcome(site_trigger))
        sys.exit(0)
    bad = mismatches()
    print("\n".join(bad) or f"all {len(SITES)} sites match")
    sys.exit(1 if bad else 0)
